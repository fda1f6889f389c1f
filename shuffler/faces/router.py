"""The service's faces beyond its socket: the dealer's page and MQTT telemetry.

Both are opt-in (``[web]``, ``[mqtt]``) and both only listen to what the service
publishes (:meth:`shuffler.service.hub.Hub.subscribe`) and ask it to act through the
same path as a socket client, so neither can do what a client could not, and neither
ever sees a plan.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from shuffler.constants import EXIT_FAULT, EXIT_USAGE
from shuffler.errors import ShufflerError
from shuffler.faces.panel import Panel
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
                self.web = WebServer(self, config.web.bind, config.web.port,
                                     service.state_folder, hosts=config.web.hosts)
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
        if self.web is None:
            return None
        return f"http://{self.web.address[0]}:{self.web.address[1]}/"

    def start(self) -> None:
        try:
            self.board.score(self.service.score()["score"])
        except ShufflerError as e:
            log.warning("the stored score cannot be shown", error=str(e))
        if self.web is not None:
            self.web.start()
        if self.telemetry is not None:
            self.telemetry.start()
        if self.room is not None:
            self.room.start()

    def close(self) -> None:
        if self.room is not None:
            self.room.close()
        if self.web is not None:
            self.web.close()
        if self.telemetry is not None:
            self.telemetry.close()

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

    # -- the page (web.PanelSource) -----------------------------------------------------
    def panel(self) -> tuple[int, dict[str, Any]]:
        return self.board.snapshot()

    def wait_panel(self, version: int, timeout: float) -> tuple[int, dict[str, Any]]:
        return self.board.wait(version, timeout)

    def tables(self) -> list[dict[str, Any]]:
        """Every table on the broker, problems first (empty without MQTT)."""
        if self.room is None:
            return []
        return [row.to_dict() for row in self.room.book.sorted_rows()]

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
            return {"ok": False, "error": {
                "kind": "bad_request", "exit": EXIT_USAGE,
                "message": "version: a score change from the page names the score's version"}}
        request = {**body, "cmd": action}  # a body's own cmd never wins
        reply = self.service.submit(request, PAGE)
        # another phone's score change holds the machine a moment: wait for it, so this
        # one is judged against its version (``stale_score``: the score changed, and the
        # page shows it), not told a pass is running when none is
        deadline = time.monotonic() + SCORE_WAIT_S
        while (versioned and _busy(reply) and time.monotonic() < deadline
               and self.board.snapshot()[1]["phase"] not in ("dealing", "stack")):
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
                return {"ok": False, "error": {"kind": kind, "message": why,
                                               "exit": EXIT_FAULT}}

    # -- MQTT ---------------------------------------------------------------------------
    def remote_command(self, command: dict[str, Any]) -> dict[str, Any]:
        """Run a remote command (from telemetry's worker thread, never MQTT's network
        thread) through the deciding loop; a dealer's touch waiting for the machine goes
        first."""
        deadline = time.monotonic() + 10
        while self.service.touch_waiting and time.monotonic() < deadline:
            time.sleep(0.02)
        request = {"cmd": command["cmd"]}
        if command.get("first_dealer"):
            request["first_dealer"] = command["first_dealer"]
        if command["cmd"] == "new_game":
            # from across the room: a game in progress is replaced only by naming its version
            request["replace"] = command.get("version") is not None
            request["version"] = command.get("version")
        return self.service.submit(request, MQTT)


def _busy(reply: dict[str, Any]) -> bool:
    return not reply.get("ok") and (reply.get("error") or {}).get("kind") == "busy"

