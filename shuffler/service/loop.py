"""``shuffler serve``: the service that owns the machine all evening, and its deciding
loop.

One loop (the main thread) decides: it runs what clients ask and what the dealer's
touch starts, one pass at a time. Each connection gets its own thread, which only
parses, validates and hands work to the loop, so a bad or slow client never stops the
machine. The parts it puts together are listed in :mod:`shuffler.service`; each limit
(answered with an error reply, never a traceback) is kept in its own: the connections'
in :mod:`~shuffler.service.connections`, a line's in :mod:`~shuffler.service.protocol`,
the socket path's in :mod:`~shuffler.service.listening`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import queue
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from shuffler import __version__
from shuffler.constants import EXIT_FAULT, PROTOCOL, SCHEMA
from shuffler.control.events import Progress
from shuffler.control.reports import (
    BatteryReport,
    Cleared,
    HandAnswer,
    LastHand,
    PassAnswer,
    ServiceStatus,
    StatusReport,
)
from shuffler.control.session import Session
from shuffler.control.signals import ENDINGS, SUSPEND, suspend_after
from shuffler.control.touch import (
    PASS_RUNNING,
    RUNNING_NOW,
    STOPPING,
    Answer,
    Clear,
    Ignore,
    Start,
    Wait,
)
from shuffler.control.touch import Machine as Seen  # what the touch policy sees
from shuffler.device.clock import Clock, RealClock
from shuffler.device.contract import EventKind, InputEvent, Signal, Status
from shuffler.errors import ShufflerError, error_kind
from shuffler.logs import get_logger
from shuffler.service.client import ServiceStoppedError
from shuffler.service.connections import (
    FIRST_REQUEST_SECONDS,
    IDLE_SECONDS,
    Conversation,
    Places,
)
from shuffler.service.events import (
    BatteryChanged,
    CardCounted,
    Event,
    FaultChanged,
    HandSummary,
    PassReported,
    PassStarted,
    ScoreChanged,
    SignalShown,
    StateChanged,
    TouchIgnored,
)
from shuffler.service.hub import Face, Hub, NoFaces, Publisher
from shuffler.service.listening import Listener
from shuffler.service.machine import COMMANDS, SOCKET, Command, Machine, admit, reads_score
from shuffler.service.protocol import error_reply, parse_request
from shuffler.service.request import RequestError
from shuffler.service.results import Result
from shuffler.service.systemd import Watchdog, sd_notify, watchdog_interval
from shuffler.store.lock import MachineLock

if TYPE_CHECKING:
    from shuffler.config import Config

log = get_logger("shuffler.service")


@dataclass
class Job:
    request: dict[str, Any]
    replies: queue.Queue = field(default_factory=queue.Queue)  # events, then the answer
    face: str = SOCKET  # who sent it (machine.FACES)


def outcome(cmd: Command, result: Result) -> Event | None:
    """A job's result as the faces hear it: a hand's summary (its passes were told as
    they ended), a lone pass's report, the score after a change; a clear is told by the
    state that follows it."""
    body = result.body
    if cmd.score:
        return ScoreChanged(body.score)  # type: ignore[attr-defined]
    if isinstance(body, HandAnswer):
        return HandSummary(body.hand, LastHand.of(body.hand))
    if isinstance(body, PassAnswer):
        return PassReported(body.pass_)
    return None


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
        #: the commands (shuffler.service.machine), run on this session
        self.machine = Machine(session, tick=self.watchdog.tick)
        # one owner of the machine: the CLI passes the lock it took before opening the device
        self.lock = lock or MachineLock(session.controller.store.folder)
        session.controller.guard = self.lock.verify  # checked again before every pass
        self.socket_path = Path(socket_path)
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.claim = threading.Lock()  # held while a pass, hand or clear runs
        self.stopping = threading.Event()
        #: "status" and "battery", as last taken
        self.snapshot: dict[str, ServiceStatus | BatteryReport] = {}
        converse = Conversation(Places(max_clients), idle_seconds, self.greeting, self._answer,
                                self.stopping)
        #: the socket (bound by :meth:`run`), a thread per connection running ``converse``;
        #: its backlog holds a crowd arriving together (a Unix socket refuses the rest)
        self.listener = Listener(self.socket_path, converse, group=group,
                                 backlog=max(4 * max_clients, 128),
                                 first_timeout=min(FIRST_REQUEST_SECONDS, idle_seconds))
        self._last_snapshot = -1e9
        self._shown = Status(Signal.READY)  # the light the device shows (told again)
        self.notice: str | None = None  # why the last touch started nothing
        #: a touch waiting for a client's short job, since when (``clock``), and the
        #: face's answer it owes (None: the sensor's touch)
        self._waiting: tuple[InputEvent, float, Future[Answer] | None] | None = None
        #: a pass (or a job that moves the machine) runs: a face's touch is answered at once
        self._moving = False
        #: the pass a face's touch started, answered once it starts (or is refused)
        self._starting: Future[Answer] | None = None
        #: a pass's motor runs (not the wait between a hand's passes)
        self._dealing = False
        #: faces' touches between a hand's passes, decided by the hand: answered by the
        #: next pass started or the next touch it told ignored
        self._between: list[Future[Answer]] = []
        session.controller.on_show = self._shown_to_dealer
        #: faces that may take the dealer's touch on the sensor between hands for
        #: themselves (the page's pairing), and the touches made by a face (never theirs:
        #: they come on their own queue, each with the answer it is owed)
        self._touch_claims: list[Callable[[], bool]] = []
        self._face_touches: queue.SimpleQueue[tuple[InputEvent, Future[Answer]]] = \
            queue.SimpleQueue()
        self._touches_lock = threading.Lock()  # stopping and a face's touch, one at a time
        #: the page and telemetry (shuffler.faces.router, built by the CLI), subscribed to us
        self.faces = faces(self)
        #: called once listening with where it serves (the CLI prints it on a terminal)
        self.announce: Callable[[dict[str, str]], None] | None = None
        #: SIGHUP's check that the config on disk loads (raises its error if not): the
        #: CLI's; None: SIGHUP ends the service as the other ending signals do
        self.reload_check: Callable[[], object] | None = None
        #: a SIGHUP came: acted on between jobs (:meth:`_reload`)
        self.hangup = False
        #: the loop ended to start again on a config that loads (the CLI re-executes)
        self.reloading = False

    def _shown_to_dealer(self, status: Status) -> None:
        """Each light and beep shown to the dealer (the controller's ``on_show``), to the
        faces as well; the last one not merely told again is the one a touch recalls."""
        if not status.told:
            self._shown = status
        self.publish(SignalShown(status))

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
        self.listener.ready()
        sd_notify("READY=1\nSTATUS=waiting for a touch")
        # what a builder needs at start: the device, the socket, the page, the state
        where = {"device": self.session.device.info.kind, "socket": str(self.socket_path),
                 "page": self.faces.page or "off ([web] enabled = false)",
                 "state": str(self.state_folder)}
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
            # between jobs the device rests (a simulator lives only while waited on)
            job = self.jobs.get(timeout=0 if self._waiting is not None
                                else self.session.device.idle(wait))
        except queue.Empty:
            job = None
        if job is not None:
            self._run_job(job)
        if self.hangup:
            self._reload()
        self.watchdog.tick(health=True)

    def _reload(self) -> None:
        """SIGHUP, between jobs: a config on disk that does not load is logged and the one
        running is kept; one that loads ends the loop as a stop does, for the CLI to start
        the process again in place on it (:func:`restart_in_place`)."""
        self.hangup = False
        if self.reload_check is None:
            return
        try:
            self.reload_check()
        except ShufflerError as e:
            log.warning("SIGHUP: the config on disk does not load; keeping the one running",
                        error=str(e))
            sd_notify(f"STATUS=reload refused: {str(e)[:200]}")
            return
        log.info("SIGHUP: the config loads; starting again in place on it")
        sd_notify("RELOADING=1\nSTATUS=reloading the config")
        self.reloading = True
        self.stopping.set()

    # -- the faces' port (hub.Hub): what they may see of the service --------------------
    @property
    def config(self) -> Config:
        return self.session.config

    @property
    def state_folder(self) -> Path:
        return self.session.controller.store.folder

    def score(self) -> dict[str, Any]:
        return self.session.scores.show().to_json()

    @property
    def touch_waiting(self) -> bool:
        """Whether a touch waits for the machine: remote commands hold back until then."""
        return self._waiting is not None

    def _idle(self) -> None:
        events = self.session.device.drain_events()
        for ev in events:
            if ev.kind is EventKind.TOUCH and self._claimed(ev):
                continue
            if ev.kind in (EventKind.TOUCH, EventKind.LONG_PRESS):
                self._decide(ev)
        faced = False
        while not self._face_touches.empty():
            event, answer = self._face_touches.get()
            faced = True
            self._decide(event, answer)
        if self._waiting is not None and not faced and \
                not any(e.kind is EventKind.TOUCH for e in events):
            self._decide(self._waiting[0], self._waiting[2])
        if self.clock.now() - self._last_snapshot >= self.SNAPSHOT_EVERY:
            self.refresh()

    def touch(self) -> Future[Answer]:
        """A face's touch (:meth:`Hub.touch`), decided on the deciding loop's next turn
        (while a pass runs, at once). Safe from any thread."""
        device = self.session.device
        event = InputEvent(EventKind.TOUCH, device.now())
        answer: Future[Answer] = Future()
        with self._touches_lock:
            if self.stopping.is_set():
                answer.set_result(STOPPING)
            elif self._moving and self._dealing:
                decided = self.session.controller.touch.decide(event, Seen(running=True))
                answer.set_result(decided if isinstance(decided, Ignore) else RUNNING_NOW)
            elif self._moving:  # between a hand's passes: the hand decides, as the sensor's
                self._between.append(answer)
                device.events.put(event)
            else:
                self._face_touches.put((event, answer))
        return answer

    def _between_told(self) -> list[Future[Answer]]:
        """The faces' touches the hand has decided since (taken off the list)."""
        with self._touches_lock:
            told, self._between = self._between, []
        return told

    def on_touch(self, claim: Callable[[], bool]) -> None:  # Hub.on_touch
        self._touch_claims.append(claim)

    def _claimed(self, event: InputEvent) -> bool:
        for claim in self._touch_claims:
            try:
                taken = claim()
            except Exception:
                log.exception("a face's touch claim failed")
                continue
            if taken:
                log.info("touch taken by a face (pairing)")
                self.session.controller.show(replace(self._shown, told=True))
                return True
        return False

    def _decide(self, event: InputEvent, answer: Future[Answer] | None = None) -> None:
        """The dealer's touch or long press between hands, through the one policy
        (:mod:`shuffler.control.touch` says what each does; a touch waits for a client's
        short job). ``answer``: a face's touch's, resolved with the decision (a start: once
        the pass has started)."""
        controller = self.session.controller
        try:
            latched = (controller.latched_fault() is not None
                       if event.kind is EventKind.LONG_PRESS else False)
        except ShufflerError as e:  # a damaged state file: clear says what to do
            log.warning("long press: cannot read the state", error=str(e))
            return
        tray = event.kind is not EventKind.TOUCH or self.session.device.health().tray_loaded
        busy = self.claim.locked()
        waited = (self.clock.now() - self._waiting[1]
                  if self._waiting is not None and self._waiting[0] is event else 0.0)
        decision = controller.touch.decide(event, Seen(tray, latched, busy, waited))
        if not isinstance(decision, Wait):
            if self._waiting is not None and self._waiting[0] is not event:
                # another touch decided meanwhile: the waiting one's answer is its
                answer = _also(answer, self._waiting[2])
            self._waiting = None
        match decision:
            case Ignore():
                self._touch_ignored(decision)
                _settle(answer, decision)
            case Wait():
                if self._waiting is None:
                    self._waiting = (event, self.clock.now(), answer)
                elif self._waiting[0] is not event:  # one waits already: this one with it
                    self._waiting = (*self._waiting[:2], _also(self._waiting[2], answer))
            case Clear():
                self._clear()
            case Start():
                self._start_hand(event, answer)

    def _clear(self) -> None:
        """The dealer's clear: a latched fault goes once the machine sees itself clear;
        if it does not, the jam pattern answers (the fault stays)."""
        if not self.claim.acquire(blocking=False):
            return
        try:
            result = self.machine.run({"cmd": "clear"}).body
            assert isinstance(result, Cleared)
            if result.cleared:
                log.info("long press: fault cleared", kind=result.cleared_fault.kind.value
                         if result.cleared_fault else None)
            else:
                log.warning("long press: the machine still sees a fault; not cleared")
                self.session.controller.show(Status(Signal.FAULT))
        finally:
            self.claim.release()
            self.refresh()

    def _start_hand(self, touch: InputEvent, answer: Future[Answer] | None) -> None:
        if not self.claim.acquire(blocking=False):  # taken since: the touch waits again
            self._waiting = (touch, self.clock.now(), answer)
            return
        log.info("touch: starting a pass of the hand")
        self.session.controller.begin_job()
        self._starting = answer
        try:
            final = self._execute(Job({"cmd": "hand", "cards": None, "passes": None,
                                       "mode": None}))
        finally:
            self.claim.release()
            self._starting = None
        if final["ok"]:
            _settle(answer, Start())
        else:  # refused before its pass started (a latched fault, the battery)
            # the machine's own sentence and error kind
            _settle(answer, Ignore(final["error"]["message"], kind=final["error"]["kind"]))

    def _touch_ignored(self, ignored: Ignore) -> None:
        """Tell the dealer and the faces that a touch started nothing, and why: the event
        (the page shows it) and its light, else the light last shown again with one
        short beep, as a hand tells a touch it did not take between its passes."""
        log.info("touch ignored", why=ignored.why)
        if ignored.notice:  # what the machine waits for: in the status too
            self.notice = ignored.why
            sd_notify(f"STATUS={self.notice}")
        self.publish(TouchIgnored(ignored.why))
        # its light, else the last one again (at the last stack too: its pile, again)
        self.session.controller.show(ignored.light or replace(self._shown, told=True))
        if self.notice == ignored.why:
            self.refresh()

    def _run_job(self, job: Job) -> None:
        cmd = job.request["cmd"]
        # what the client hears if the service stops (SIGTERM, a restart) in the middle
        final = error_reply(ServiceStoppedError(
            f"the service stopped in the middle of the {cmd}; a pass it was running is "
            "latched `interrupted`: put every card back in the tray, then `shuffler "
            "status` and `shuffler clear`"))
        try:
            final = self._execute(job)
        finally:  # free before answering: the client's next request must not find it busy
            self.claim.release()  # every queued job holds it (:meth:`_answer`)
            job.replies.put(final)

    def _execute(self, job: Job) -> dict[str, Any]:
        """Run the job, its progress events to its client; returns the final answer."""
        req = job.request

        def put(event: Progress) -> None:
            job.replies.put(event.to_json())
            if event.event in ("pass_start", "stack", "pass"):  # the motor, or not
                self._dealing = isinstance(event, PassStarted)
            # not a pile to stack (the faces see its light), nor a resumed hand (told only
            # to the client that asked)
            if isinstance(event, PassStarted | CardCounted | PassReported | TouchIgnored):
                self.publish(event)
            match event:
                case PassStarted():  # the face's touch that started it, or was between
                    _settle(self._starting, Start())
                    for answer in self._between_told():
                        _settle(answer, Start())
                case TouchIgnored(why):  # the hand's words, from touch.py
                    for answer in self._between_told():
                        _settle(answer, Ignore(why))

        self.notice = None
        self._moving = COMMANDS[req["cmd"]].moves
        try:
            result = self.machine.run(req, put, job.face)
            body = result.body
            fault = (body.pass_.fault if isinstance(body, PassAnswer) else
                     body.hand.fault if isinstance(body, HandAnswer) else None)
            if fault:  # journald: faults at warning (the pass lines are info)
                log.warning("fault", kind=fault.kind.value, message=fault.message)
            if (told := outcome(COMMANDS[req["cmd"]], result)) is not None:
                self.publish(told)
            return {"ok": True, "result": result.to_json()}
        except ShufflerError as e:
            log.warning("refused", cmd=req["cmd"], kind=error_kind(e), message=str(e))
            return error_reply(e)
        except Exception as e:  # a bug: the machine stops, the service goes on
            self.session.device.stop()
            log.exception("request failed")
            return error_reply(ShufflerError(str(e)))  # internal, exit 1
        finally:
            self.session.controller.end_job()
            if COMMANDS[req["cmd"]].moves:  # touches made while it ran start nothing
                self.session.controller.touch.pass_ended(self.session.device.now())
                if self._waiting is not None:
                    _settle(self._waiting[2], RUNNING_NOW)
                self._waiting = None
                self.session.device.drain_events()
                self._moving = self._dealing = False
                for answer in self._between_told():  # the hand ended before deciding it
                    _settle(answer, PASS_RUNNING)
            self.refresh()

    def submit(self, request: dict[str, Any], face: str) -> dict[str, Any]:  # Hub.submit
        try:
            req = parse_request(json.dumps(request).encode())
        except RequestError as e:
            return error_reply(e)
        replies: list[dict[str, Any]] = []
        self._answer(req, replies.append, face)
        return replies[-1]

    def refresh(self) -> None:
        """Status and battery for clients, taken between passes (never during one)."""
        try:
            status = self.machine.run({"cmd": "status"}).body
            battery = self.machine.run({"cmd": "battery"}).body
            assert isinstance(status, StatusReport) and isinstance(battery, BatteryReport)
            told = ServiceStatus(**vars(status), notice=self.notice)
        except ShufflerError as e:
            log.warning("status refresh failed", error=str(e))
        else:  # the state to the faces, and the fault and the battery when they changed
            # since the last snapshot (the one place a change is detected; the first: both)
            before, self.snapshot = self.snapshot, {"status": told, "battery": battery}
            self.publish(StateChanged(told))
            last = before.get("status")
            if not isinstance(last, ServiceStatus) or last.fault != told.fault:
                self.publish(FaultChanged(told.fault))
            if battery != before.get("battery"):
                self.publish(BatteryChanged(battery))
        self._last_snapshot = self.clock.now()

    def greeting(self) -> dict[str, Any]:
        """What a new connection hears first."""
        return {"shuffler": __version__, "protocol": PROTOCOL, "schema": SCHEMA,
                "device": self.session.device.info.kind}

    def _answer(self, req: dict[str, Any], send, face: str = SOCKET) -> None:
        """Answer one checked request from ``face``: from the snapshot, at once (a stop, a
        look at the score), or as a job of the deciding loop when its command is claimed
        (one at a time: else ``busy``)."""
        cmd = req["cmd"]
        # `serve -v` (and the journal) shows every request answered; never its plan
        log.info("request", cmd=cmd, **{k: v for k, v in req.items()
                                         if k in ("cards", "passes", "mode", "id")})
        try:
            command = admit(cmd, face)
        except ShufflerError as e:
            send(error_reply(e))
            return
        cached = self.snapshot.get(cmd)
        # the battery for another load than the snapshot's reads the device: a job
        live = isinstance(cached, BatteryReport) and req.get("cards") not in (None, cached.cards)
        if command.cached and not live:
            send({"ok": True, "result": None if cached is None else cached.to_json()})
        elif (not command.claimed and not live) or reads_score(req):  # no need to wait
            try:
                send({"ok": True, "result": self.machine.run(req, face=face).to_json()})
            except ShufflerError as e:
                send(error_reply(e))
        elif not self.claim.acquire(blocking=False):
            send(error_reply(RequestError("busy: a pass is running; try again when it ends",
                                          "busy"), exit_code=EXIT_FAULT))
        else:
            if command.moves:
                self.session.controller.begin_job()  # accepted: a stop from now on counts
            job = Job(req, face=face)
            self.jobs.put(job)
            while True:
                msg = job.replies.get()
                with contextlib.suppress(OSError):  # a client that left: the pass goes on
                    send(msg)
                if "ok" in msg:
                    return

    def close(self) -> None:
        with self._touches_lock:  # from now on a face's touch is answered at once
            self.stopping.set()
            owed = [self._face_touches.get()[1] for _ in range(self._face_touches.qsize())]
        waiting = self._waiting[2] if self._waiting is not None else None
        for answer in (*owed, waiting, self._starting, *self._between_told()):
            _settle(answer, STOPPING)  # a face's touch never waits on a stopped service
        sd_notify("STOPPING=1")
        self.session.device.stop()
        self.faces.close()
        self.listener.close()
        self.lock.release()


def _settle(answer: Future[Answer] | None, decision: Answer) -> None:
    """Answer a face's touch (once: the first answer stands)."""
    if answer is not None and not answer.done():
        with contextlib.suppress(Exception):  # answered meanwhile (stopping): it stands
            answer.set_result(decision)


def _also(first: Future[Answer] | None,
          second: Future[Answer] | None) -> Future[Answer] | None:
    """Two faces' touches owed one decision: the second answered as the first is."""
    if first is None or second is None:
        return first or second
    first.add_done_callback(lambda done: _settle(second, done.result()))
    return first


def install_signal_handlers(service: Service) -> None:
    """SIGTERM, SIGINT, SIGQUIT and SIGUSR1/2: the loop unwinds at once, through the
    pass's ``finally`` that stops the motor and :meth:`Service.close`, and the process
    exits 0. SIGHUP is the daemon's reload when the service has a ``reload_check``
    (systemd's ``ExecReload``; :meth:`Service._reload`, once the running pass or hand has
    ended), else an ending like the others. The handler touches no pin (it may have
    interrupted the main thread inside one). SIGTSTP stops the job (the motor first,
    from a thread), then suspends the process. Leaving the interpreter any other way
    stops the motor too (shuffler/control/signals.py has the table)."""
    def stop(signum, frame):
        raise SystemExit(0)

    def hangup(signum, frame):
        service.hangup = True  # only a flag: the loop acts on it between jobs

    for sig in ENDINGS:
        signal.signal(sig, stop)
    if service.reload_check is not None:
        signal.signal(signal.SIGHUP, hangup)
    signal.signal(SUSPEND, suspend_after(service.session.controller.request_stop))
    atexit.register(service.session.device.stop)


def restart_in_place() -> NoReturn:
    """Execute this very command line again (the same pid: systemd's ``MAINPID`` and its
    notify socket stay, and the new process says ``READY=1``), after the service has
    closed: the SIGHUP reload. Every descriptor Python opened is close-on-exec."""
    import os
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
