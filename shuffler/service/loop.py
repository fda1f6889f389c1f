"""``shuffler serve``: the service that owns the machine all evening, and its deciding
loop.

One loop (the main thread) decides: it runs what clients ask and what the dealer's
touch starts, one pass at a time. Clients talk JSON lines over a Unix socket
(:mod:`~shuffler.service.protocol`; listening: :mod:`~shuffler.service.listening`); each
connection gets its own thread (:mod:`~shuffler.service.connections`), which only
parses, validates and hands work to the loop, so a bad or slow client never stops the
machine. systemd hears it through :mod:`~shuffler.service.systemd`.

Limits, each answered with an error reply and never a traceback: ``[service]
max_clients`` connections at once (the listen backlog holds that many arriving
together); a connection that sends no request within
:data:`~shuffler.service.connections.FIRST_REQUEST_SECONDS` (5 s), or none for
:data:`~shuffler.service.connections.IDLE_SECONDS` after its last, is told ``idle`` and
closed; at the limit the connection idle the longest is closed to make room (told
``idle``), and a newcomer is told ``too_many_clients`` (exit 3) only when every place is
busy answering; a line longer than :data:`~shuffler.service.protocol.MAX_LINE` bytes is
``too_long`` (then closed), nesting deeper than
:data:`~shuffler.service.protocol.MAX_DEPTH` is ``too_deep``. A second service on the
same socket is refused (``already_running``, exit 2); an existing path is replaced only
when it is a socket nobody answers on.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import queue
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shuffler import __version__
from shuffler.control.hand import device_now, too_soon
from shuffler.control.scorebook import handle as score_request
from shuffler.control.session import Session
from shuffler.control.signals import ENDINGS, SUSPEND, suspend_after
from shuffler.device.clock import Clock, EventClock, RealClock
from shuffler.device.contract import EventKind, InputEvent, Signal, Status
from shuffler.errors import ShufflerError, error_kind
from shuffler.logs import get_logger
from shuffler.service.connections import (
    FIRST_REQUEST_SECONDS,
    IDLE_SECONDS,
    Conversation,
    Places,
)
from shuffler.service.hub import Face, Hub, NoFaces, Publisher
from shuffler.service.listening import Listener
from shuffler.service.protocol import PROTOCOL, SCHEMA, error_reply, parse_request
from shuffler.service.request import RequestError
from shuffler.service.systemd import Watchdog, sd_notify, watchdog_interval
from shuffler.store.lock import MachineLock

SCORE_COMMANDS = ("score", "undo", "redo", "new_game")
#: requests that run in the deciding loop, one at a time
CLAIMED = ("pass", "hand", "clear", *SCORE_COMMANDS)
#: requests that may turn the motor: a stop while one is accepted or running stops it
MOVING = ("pass", "hand")
TOUCH_WAIT_S = 5.0  # how long a touch waits for a client's short job to end
log = get_logger("shuffler.service")


def score_read(req: dict[str, Any]) -> bool:
    """A score request that only reads (no service loop needed)."""
    return req["cmd"] == "score" and not req.get("delete") and all(
        req.get(k) is None for k in ("makers", "target", "names"))


@dataclass
class Job:
    request: dict[str, Any]
    replies: queue.Queue = field(default_factory=queue.Queue)  # events, then the answer


# -- the service ---------------------------------------------------------------------

class Service(Publisher):
    """Owns the device; see the module notes."""

    SNAPSHOT_EVERY = 2.0  # seconds between status refreshes while idle

    def __init__(self, session: Session, socket_path: Path, *, group: str | None = None,
                 max_clients: int = 32, lock: MachineLock | None = None,
                 clock: Clock | None = None, watchdog: float | None = None,
                 idle_seconds: float = IDLE_SECONDS,
                 faces: Callable[[Hub], Face] = NoFaces) -> None:
        super().__init__()
        self.session = session
        self.clock = clock or RealClock()
        #: pinged between jobs and through ``on_tick`` while one runs; ``watchdog``: seconds
        #: between pings (half of systemd's WatchdogSec, its default); None: no watchdog
        self.watchdog = Watchdog(watchdog if watchdog is not None else watchdog_interval(),
                                 self.clock, session.device)
        # one owner of the machine: the CLI passes the lock it took before opening the device
        self.lock = lock or MachineLock(session.controller.store.folder)
        session.controller.guard = self.lock.verify  # checked again before every pass
        self.socket_path = Path(socket_path)
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.claim = threading.Lock()  # held while a pass, hand or clear runs
        self.stopping = threading.Event()
        self.snapshot: dict[str, Any] = {}
        converse = Conversation(Places(max_clients), idle_seconds, self.greeting, self._answer,
                                self.stopping)
        #: the socket (bound by :meth:`run`), a thread per connection running ``converse``
        self.listener = Listener(self.socket_path, converse, group=group, backlog=max_clients,
                                 first_timeout=min(FIRST_REQUEST_SECONDS, idle_seconds))
        self._last_snapshot = -1e9
        self._shown = Status(Signal.READY)  # the light the device shows (told again)
        self._job_ended = -1e9  # when the last pass or hand ended (the touch lock-out)
        self._lifts: list[InputEvent] = []  # piles lifted since (hand.too_soon)
        self.notice: str | None = None  # why the last touch started nothing
        self._touch_at: float | None = None  # a touch waiting for a client's short job
        session.controller.on_show = self._shown_to_dealer
        #: the page and telemetry (shuffler.faces.router, built by the CLI), subscribed to us
        self.faces = faces(self)
        #: called once listening with :meth:`where` (the CLI prints it on a terminal)
        self.announce: Callable[[dict[str, str]], None] | None = None

    def _shown_to_dealer(self, status: Status) -> None:
        """Each light and beep shown to the dealer (the controller's ``on_show``), to the
        faces as well; the last one not merely told again is the one a touch recalls."""
        if not status.told:
            self._shown = status
        self.publish("signal", status)

    def where(self) -> dict[str, str]:
        """What a builder needs at start: the device, the socket, the page, the state."""
        page = self.faces.page or "off ([web] enabled = false)"
        return {"device": self.session.device.info.kind, "socket": str(self.socket_path),
                "page": page, "state": str(self.session.controller.store.folder)}

    # -- the loop (main thread) -------------------------------------------------------
    def run(self) -> None:
        self.lock.acquire("shuffler serve")
        settled = self.session.controller.recover()
        if settled:
            log.warning("settled a pass left in flight", id=settled.get("id"),
                        interrupted=bool(settled.get("interrupted")))
        self.refresh()
        self.listener.start()
        self.faces.start()
        sd_notify("READY=1\nSTATUS=waiting for a touch")
        where = self.where()
        log.info("serving", **where)
        if self.announce is not None:
            self.announce(where)
        try:
            while not self.stopping.is_set():
                self.step(0.05)
        finally:
            self.close()

    def step(self, wait: float) -> None:
        """One turn of the deciding loop: the dealer's touch first (a stream of clients'
        jobs never starves it), then a client's job, then the watchdog. ``wait`` is how
        long (real time) to wait for a job. A lock file removed or replaced meanwhile
        ends the service (``lock_lost``, exit 3): another process may believe it owns the
        machine."""
        self.lock.verify()
        self._idle()
        try:
            job = self.jobs.get(timeout=0 if self._touch_at is not None
                                else self._device_wait(wait))
        except queue.Empty:
            job = None
        if job is not None:
            self._run_job(job)
        self.watchdog.tick(health=True)

    @property
    def touch_waiting(self) -> bool:
        """Whether a touch waits for the machine: remote commands hold back until then."""
        return self._touch_at is not None

    def _device_wait(self, wait: float) -> float:
        """A simulated machine on its own paced clock (sim-gpio) lives only while someone
        waits on that clock: between jobs the loop waits there, so the rig's dealer goes
        on restacking and touching. What is left of ``wait`` is waited for a job."""
        clock = getattr(self.session.device, "clock", None)
        if isinstance(clock, EventClock) and clock.speed:
            clock.sleep(wait * clock.speed)
            return 0.001
        return wait

    def _idle(self) -> None:
        events = self.session.device.drain_events()
        for ev in events:
            if ev.kind is EventKind.TOUCH:
                self._touched(ev)
            elif ev.kind is EventKind.PILE_LIFTED:
                self._lifts.append(ev)  # a serial MCU's stamps: its clock (the lock-out)
            elif ev.kind is EventKind.LONG_PRESS:
                self._long_press(ev.at)
        if self._touch_at is not None and not any(e.kind is EventKind.TOUCH for e in events):
            self._touched()
        if self.clock.now() - self._last_snapshot >= self.SNAPSHOT_EVERY:
            self.refresh()

    def _long_press(self, began: float | None = None) -> None:
        """The dealer's clear: a latched fault goes once the machine sees itself clear;
        if it does not, the jam pattern answers (the fault stays). With nothing latched
        it answers "nothing to clear" (the ready light again, and the page says so); a
        press that began before the last pass ended (``began``, device time) clears
        nothing: the dealer was not answering the fault."""
        try:
            latched = self.session.controller.latched_fault()
        except ShufflerError as e:  # a damaged state file: clear says what to do
            log.warning("long press: cannot read the state", error=str(e))
            return
        if latched is None:
            log.info("long press: no fault to clear")
            self._touch_ignored("nothing to clear: no fault is latched", Status(Signal.READY))
            return
        if began is not None and began < self._job_ended:
            log.warning("long press: it began before the fault; not a clear")
            self._touch_ignored("that press began before the fault: hold the sensor again "
                                "to clear it", Status(Signal.FAULT))
            return
        if not self.claim.acquire(blocking=False):
            return
        try:
            result = self.session.do_clear()
            if result["cleared"]:
                log.info("long press: fault cleared", kind=result["cleared_fault"]["kind"])
            else:
                log.warning("long press: the machine still sees a fault; not cleared")
                self.session.controller.show(Status(Signal.FAULT))
            self.publish("result", result)
        finally:
            self.claim.release()
            self.refresh()

    def _touched(self, touch: InputEvent | None = None) -> None:
        """The dealer's touch between hands: the next pass of the hand, unless the dealer
        is still restacking or the tray is empty. While a client's short job (a clear, a
        score, a remote command) holds the machine the touch waits for it, up to
        :data:`TOUCH_WAIT_S`, and then says why it started nothing (``touch`` None: the
        touch that waits)."""
        if touch is not None and too_soon(self.session.device, touch, self._job_ended,
                                          self._lifts):
            log.debug("touch ignored", why="the dealer is restacking")
            self._touch_ignored("touch ignored: the last pass has only just ended; stack the "
                                "piles, then touch again")
            return
        if not self.session.device.health().tray_loaded:
            self.notice = "touch ignored: the tray is empty; load the cards, then touch"
            log.warning(self.notice)
            sd_notify(f"STATUS={self.notice}")
            self._touch_ignored(self.notice)
            self.refresh()
            return
        if not self.claim.acquire(blocking=False):
            now = self.clock.now()
            if self._touch_at is None:
                self._touch_at = now
            elif now - self._touch_at > TOUCH_WAIT_S:
                self._touch_at = None
                self.notice = "touch ignored: a client's request held the machine; touch again"
                log.warning(self.notice)
                self._touch_ignored(self.notice)
                self.refresh()
            return
        self._touch_at = None
        log.info("touch: starting a pass of the hand")
        self.session.controller.begin_job()
        try:
            self._execute(Job({"cmd": "hand", "cards": None, "passes": None, "mode": None}))
        finally:
            self.claim.release()

    def _touch_ignored(self, why: str, light: Status | None = None) -> None:
        """Tell the dealer and the faces that a touch started nothing, and why: the event
        (the page shows it) and ``light``, else the light last shown again with one short
        beep, as a hand tells a touch it did not take between its passes."""
        self.publish("event", {"event": "touch_ignored", "why": why})
        if light is None:
            light = replace(self._shown, told=True)
            if light.signal is Signal.STACK and light.next_pass is None:
                light = Status(Signal.READY, told=True)  # the hand is over: no pile to ask for
        self.session.controller.show(light)

    def _run_job(self, job: Job) -> None:
        cmd = job.request["cmd"]
        # what the client hears if the service stops (SIGTERM, a restart) in the middle
        final: dict[str, Any] = {"ok": False, "error": {
            "kind": "service_stopped", "exit": 3,
            "message": f"the service stopped in the middle of the {cmd}; a pass it was "
                       "running is latched `interrupted`: put every card back in the tray, "
                       "then `shuffler status` and `shuffler clear`"}}
        try:
            final = self._execute(job)
        finally:  # free before answering: the client's next request must not find it busy
            if job.request["cmd"] in CLAIMED:
                self.claim.release()
            job.replies.put(final)

    def _execute(self, job: Job) -> dict[str, Any]:
        """Run the job, its progress events to its client; returns the final answer."""
        req = job.request

        def put(msg: dict[str, Any]) -> None:
            job.replies.put(msg)
            self.publish("event", msg)

        self.notice = None
        try:
            result = self._run(req, put)
            fault = (result.get("pass") or result.get("hand") or {}).get("fault")
            if fault:  # journald: faults at warning (the pass lines are info)
                log.warning("fault", kind=fault["kind"], message=fault["message"])
            self.publish("result", result)
            return {"ok": True, "result": result}
        except ShufflerError as e:
            log.warning("refused", cmd=req["cmd"], kind=error_kind(e), message=str(e))
            return error_reply(e)
        except Exception as e:  # a bug: the machine stops, the service goes on
            self.session.device.stop()
            log.exception("request failed")
            return {"ok": False, "error": {"kind": "internal", "message": str(e), "exit": 1}}
        finally:
            self.session.controller.end_job()
            if req["cmd"] in MOVING:  # touches made while it ran start nothing
                self._job_ended, self._touch_at = device_now(self.session.device), None
                self._lifts = []
                self.session.device.drain_events()
            self.refresh()

    def _run(self, req: dict[str, Any], put: Callable[[dict[str, Any]], None]) -> dict:
        cmd, s = req["cmd"], self.session
        if cmd == "pass":
            return s.do_pass(req["cards"], req["mode"], on_event=put, on_tick=self.watchdog.tick)
        if cmd == "hand":
            return s.do_hand(req["passes"], req["cards"], req["mode"], on_event=put,
                             on_tick=self.watchdog.tick)
        if cmd in SCORE_COMMANDS:
            return score_request(s.scores, req)
        return s.do_clear()

    def submit(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run ``request`` (checked as a socket request would be) as a client would, and
        return the final answer: for the page and remote commands."""
        try:
            req = parse_request(json.dumps(request).encode())
        except RequestError as e:
            return error_reply(e)
        replies: list[dict[str, Any]] = []
        self._answer(req, replies.append)
        return replies[-1]

    def refresh(self) -> None:
        """Status and battery for clients, taken between passes (never during one)."""
        try:
            self.snapshot = {"status": {**self.session.status(), "notice": self.notice},
                             "battery": self.session.battery()}
        except ShufflerError as e:
            log.warning("status refresh failed", error=str(e))
        else:
            self.publish("status", self.snapshot["status"])
            self.publish("battery", self.snapshot["battery"])
        self._last_snapshot = self.clock.now()

    def greeting(self) -> dict[str, Any]:
        """What a new connection hears first."""
        return {"shuffler": __version__, "protocol": PROTOCOL, "schema": SCHEMA,
                "device": self.session.device.info.kind}

    def _answer(self, req: dict[str, Any], send) -> None:
        cmd = req["cmd"]
        # `serve -v` (and the journal) shows every request answered; never its plan
        log.info("request", cmd=cmd, **{k: v for k, v in req.items()
                                         if k in ("cards", "passes", "mode", "id")})
        if cmd == "status":
            send({"ok": True, "result": self.snapshot.get("status")})
        elif cmd == "battery":
            send({"ok": True, "result": self.snapshot.get("battery")})
        elif cmd == "stop":
            # at once, from this thread (the contract allows it); the job keeps the stop, so
            # a pass about to start never starts and a hand ends between its passes
            send({"ok": True, "result": {"stopped": self.session.controller.request_stop()}})
        elif score_read(req):  # reading: no need to wait
            try:
                send({"ok": True, "result": self.session.score()})
            except ShufflerError as e:
                send(error_reply(e))
        elif not self.claim.acquire(blocking=False):
            send(error_reply(RequestError("busy: a pass is running; try again when it ends",
                                          "busy"), exit_code=3))
        else:
            if cmd in MOVING:
                self.session.controller.begin_job()  # accepted: a stop from now on counts
            job = Job(req)
            self.jobs.put(job)
            while True:
                msg = job.replies.get()
                with contextlib.suppress(OSError):  # a client that left: the pass goes on
                    send(msg)
                if "ok" in msg:
                    return

    def close(self) -> None:
        self.stopping.set()
        sd_notify("STOPPING=1")
        self.session.device.stop()
        self.faces.close()
        self.listener.close()
        self.lock.release()


def install_signal_handlers(service: Service) -> None:
    """SIGTERM, SIGINT, SIGHUP (the SSH session that started it dropped), SIGQUIT and
    SIGUSR1/2: the loop unwinds at once, through the pass's ``finally`` that stops the
    motor and :meth:`Service.close`, and the process exits 0. The handler touches no pin
    (it may have interrupted the main thread inside one). SIGTSTP stops the job (the
    motor first, from a thread), then suspends the process. Leaving the interpreter any
    other way stops the motor too (shuffler/control/signals.py has the table)."""
    def stop(signum, frame):
        raise SystemExit(0)

    for sig in ENDINGS:
        signal.signal(sig, stop)
    signal.signal(SUSPEND, suspend_after(service.session.controller.request_stop))
    atexit.register(service.session.device.stop)
