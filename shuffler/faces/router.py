"""The service's faces beyond its socket: the dealer's page and MQTT telemetry.

Both are opt-in (``[web]``, ``[mqtt]``) and both only listen to what the service
publishes (:meth:`shuffler.service.hub.Hub.subscribe`) and ask it to act through the
same path as a socket client, so neither can do what a client could not, and neither
ever sees a plan.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from shuffler.constants import EXIT_FAULT
from shuffler.errors import ShufflerError
from shuffler.faces.panel import DEALING, Panel
from shuffler.logs import get_logger
from shuffler.service.events import (
    CardCounted,
    Event,
    HandSummary,
    PassStarted,
    ScoreChanged,
    SignalShown,
    StateChanged,
    TouchIgnored,
)
from shuffler.service.hub import Ignore, Start
from shuffler.service.machine import COMMANDS, MQTT, PAGE
from shuffler.service.protocol import error_reply
from shuffler.service.request import RequestError

if TYPE_CHECKING:
    from shuffler.faces.telemetry import Telemetry
    from shuffler.faces.web import WebServer
    from shuffler.service.hub import Hub

log = get_logger("shuffler.faces")

SCORE_WAIT_S = 3.0  # a score change waits this long for another phone's to finish


class Faces:
    """The panel (always: it is cheap), and the page and telemetry when configured:
    a :class:`shuffler.service.hub.Face` of the service (``Service(..., faces=Faces)``)."""

    def __init__(self, service: Hub) -> None:
        self.service = service
        config = service.config
        self.board = Panel(config.hand.passes)
        self.web: WebServer | None = None
        self.telemetry: Telemetry | None = None
        service.subscribe(self.on_publish)
        if config.mqtt.enabled:  # before the page opens its port: nothing left half-open
            from shuffler.faces.listen import check_network

            check_network("mqtt", str(config.mqtt.host), config.mqtt.port)
        if config.web.enabled:
            from shuffler.faces.listen import listener_error
            from shuffler.faces.web import WebServer

            try:
                self.web = WebServer(self.board, self.act, self.tournament, config.web.bind,
                                     config.web.port, service.state_folder,
                                     hosts=config.web.hosts)
            except OSError as e:  # serve exits 2 naming the key, the port and the fix
                raise listener_error(e, "web", config.web.bind, config.web.port) from None
            service.on_touch(self.web.touched)  # a touch on the sensor may pair a phone
        self.room: Any = None  # the tournament view, when the page and MQTT are both on
        if config.mqtt.enabled:
            from shuffler.faces.telemetry import Telemetry

            self.telemetry = Telemetry(config.mqtt, on_command=self.remote_command)
            service.subscribe(self.telemetry.hear)
            if self.web is not None:
                from shuffler.faces.tables import TableWatcher

                self.room = TableWatcher(config.mqtt, f"shuffler-{config.mqtt.table}-view")

    @property
    def page(self) -> str | None:
        return None if self.web is None else self.web.url

    def _parts(self) -> list[Any]:
        """The page, telemetry and the room's view, those configured, in starting order."""
        return [part for part in (self.web, self.telemetry, self.room) if part is not None]

    def start(self) -> None:
        try:
            self.board.score(self.service.score()["score"])
        except ShufflerError as e:
            log.warning("the stored score cannot be shown", error=str(e))
        for part in self._parts():
            part.start()

    def close(self) -> None:
        for part in reversed(self._parts()):
            part.close()

    # -- what the service publishes -----------------------------------------------------
    def on_publish(self, event: Event) -> None:
        """The panel the page draws and streams, from what the service says."""
        match event:
            case SignalShown(status):
                self.board.signal(status)
            case PassStarted(number, of):
                self.board.pass_started(number, of)
            case CardCounted(counted, expected):
                self.board.counted(counted, expected)
            case TouchIgnored(why):
                self.board.touch_ignored(why)
            case StateChanged(status):  # the panel is the page's JSON: made here
                self.board.status(status.to_json())
            case ScoreChanged(score):
                self.board.score(score.to_json())
            case HandSummary(_, last):
                self.board.hand_done(last.to_json())

    # -- the page ---------------------------------------------------------------------
    def tournament(self) -> dict[str, Any]:
        """The tournament board: standings, games and the round clock (empty without
        MQTT)."""
        from shuffler.faces.tables import TableBook, board

        return board(self.room.book if self.room is not None else TableBook(), time.time())

    def act(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """One of the page's actions (machine.sent_by(PAGE)): a service's command."""
        if action == "pass":  # the page's button is the touch sensor, with all its rules
            return self.touch()
        # the page's score changes name the version of the score they were made against
        versioned = action in COMMANDS and COMMANDS[action].score
        if versioned and type(body.get("version")) is not int:
            return error_reply(RequestError(
                "version: a score change from the page names the score's version"))
        request = {**body, "cmd": action}  # a body's own cmd never wins
        reply = self.service.submit(request, PAGE)
        # another phone's score change holds the machine a moment: wait for it, so this
        # one is judged against its version (``stale_score``: the score changed, and the
        # page shows it), not told a pass is running when none is
        deadline = time.monotonic() + SCORE_WAIT_S
        while (versioned and not reply["ok"] and reply["error"]["kind"] == "busy"
               and time.monotonic() < deadline
               and self.board.snapshot()[1]["phase"] not in DEALING):
            time.sleep(0.01)
            reply = self.service.submit(request, PAGE)
        return reply

    def touch(self) -> dict[str, Any]:
        """The page's Start pass: a touch, answered by the policy's decision (ok once its
        pass has started; else the sentence and error kind of why not, all of them in
        shuffler.control.touch or the machine's refusal)."""
        match self.service.touch().result():
            case Start():
                return {"ok": True, "result": {"touch": True, "started": True}}
            case Ignore(why=why, kind=kind):
                return error_reply(RequestError(why, kind), EXIT_FAULT)

    # -- MQTT ---------------------------------------------------------------------------
    def remote_command(self, command: dict[str, Any]) -> dict[str, Any]:
        """Run a remote command (from telemetry's worker thread, never MQTT's network
        thread) through the deciding loop; a dealer's touch waiting for the machine goes
        first."""
        deadline = time.monotonic() + 10
        while self.service.touch_waiting and time.monotonic() < deadline:
            time.sleep(0.02)
        request = {k: v for k, v in command.items() if k != "id" and v is not None}
        if command["cmd"] == "new_game":
            # from across the room: a game in progress is replaced only by naming its version
            request.update(replace=command["version"] is not None, version=command["version"])
        return self.service.submit(request, MQTT)

