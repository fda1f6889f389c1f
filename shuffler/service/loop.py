"""``shuffler serve``: the service that owns the machine all evening.

One loop (the main thread) decides: it runs what clients ask and what the dealer's
touch starts, one pass at a time. Clients talk JSON lines over a Unix socket
(mode 0660); each connection gets its own thread, which only parses, validates and
hands work to the loop, so a bad or slow client never stops the machine.

Protocol (version 1), one JSON object per line each way::

    <- {"shuffler": "0.1.0", "protocol": 1, "device": "sim"}        greeting
    -> {"cmd": "status"} | {"cmd": "battery", "cards": 24}
       {"cmd": "pass", "cards": 24, "mode": "planned"}
       {"cmd": "hand", "passes": 5, "cards": 24, "mode": "coin"}
       {"cmd": "clear"} | {"cmd": "stop"}
       {"cmd": "score"} | {"cmd": "score", "makers": 0, "tricks": 5, "alone": true}
       {"cmd": "score", "version": 7, "makers": 1, "tricks": 3, "renege": 0, "hand": 2}
       {"cmd": "undo", "version": 8} | {"cmd": "redo", "version": 9}
       {"cmd": "new_game", "first_dealer": "East", "target": 11, "version": 10}
    <- {"event": "card", "counted": 3, "expected": 24}               while a pass runs
    <- {"ok": true, "result": {...}}  or  {"ok": false, "error": {"kind": "busy", ...}}

Limits, each answered with an error reply and never a traceback: ``[service]
max_clients`` connections at once (the listen backlog holds that many arriving together);
a connection that sends no request within
:data:`~shuffler.service.connections.FIRST_REQUEST_SECONDS` (5 s), or none for
:data:`IDLE_SECONDS` after its last, is told ``idle`` and closed; at the limit the
connection idle the longest is closed to make room (told ``idle``), and a newcomer is
told ``too_many_clients`` (exit 3) only when every place is busy answering
(:mod:`shuffler.service.connections`); a line longer than :data:`MAX_LINE` bytes is
``too_long`` (then
closed), nesting deeper than :data:`MAX_DEPTH` is ``too_deep``. A second service on the
same socket is refused (``already_running``, exit 2); an existing path is replaced only
when it is a socket nobody answers on.
"""

from __future__ import annotations

import atexit
import contextlib
import grp
import json
import math
import os
import queue
import signal
import socket
import socketserver
import stat
import sys
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
from shuffler.errors import BadInputError, ShufflerError, error_kind
from shuffler.files import make_folder
from shuffler.logs import get_logger
from shuffler.service.connections import FIRST_REQUEST_SECONDS, Places
from shuffler.service.events import Event, Translator
from shuffler.service.hub import Face, Hub, NoFaces
from shuffler.service.request import RequestError
from shuffler.service.request import check as check_request
from shuffler.store.lock import MachineLock

PROTOCOL = 1
SCHEMA = 1  # the JSON schema version of every reply and event (docs/json.md)
SCORE_COMMANDS = ("score", "undo", "redo", "new_game")
#: requests that run in the deciding loop, one at a time
CLAIMED = ("pass", "hand", "clear", *SCORE_COMMANDS)
#: requests that may turn the motor: a stop while one is accepted or running stops it
MOVING = ("pass", "hand")
TOUCH_WAIT_S = 5.0  # how long a touch waits for a client's short job to end
MAX_LINE = 64 * 1024  # bytes in one request line
MAX_DEPTH = 4  # nesting of a request: a flat object is 1; deeper is never a request
IDLE_SECONDS = 60.0  # a connection that sends nothing for this long is closed
log = get_logger("shuffler.service")


# -- systemd ------------------------------------------------------------------------

def sd_notify(message: str) -> bool:
    """Tell systemd (Type=notify) something; a no-op outside systemd."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return False
    if path.startswith("@"):
        path = "\0" + path[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(path)
            s.sendall(message.encode())
        return True
    except OSError:
        return False


def watchdog_interval() -> float | None:
    """Half of WATCHDOG_USEC, if systemd asked for a watchdog for this process."""
    usec, pid = os.environ.get("WATCHDOG_USEC"), os.environ.get("WATCHDOG_PID")
    if not usec or (pid and int(pid) != os.getpid()):
        return None
    return int(usec) / 2e6


# -- requests (declared in shuffler.service.request) ------------------------------------------

def _depth(line: bytes) -> int:
    """The deepest nesting of brackets and braces outside strings, without parsing
    (the parser recurses: a deep enough line would exhaust the stack)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in line:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def parse_request(line: bytes) -> dict[str, Any]:
    """Check one request line; the error says what is wrong with it."""
    if _depth(line) > MAX_DEPTH:
        raise RequestError(f"nested deeper than {MAX_DEPTH} levels: a request is one flat "
                           "JSON object", "too_deep")
    try:
        req = json.loads(line)
    except (ValueError, UnicodeDecodeError) as e:
        if "integer string conversion" in str(e):  # Python's digit limit (4300)
            raise RequestError("a number with thousands of digits: no value a request "
                               "takes is that long") from None
        raise RequestError("not a JSON object: send one JSON object per line") from None
    return check_request(req)


def score_read(req: dict[str, Any]) -> bool:
    """A score request that only reads (no service loop needed)."""
    return req["cmd"] == "score" and not req.get("delete") and all(
        req.get(k) is None for k in ("makers", "target", "names"))


@dataclass
class Job:
    request: dict[str, Any]
    replies: queue.Queue = field(default_factory=queue.Queue)  # events, then the answer


# -- the service ---------------------------------------------------------------------

class Service:
    """Owns the device; see the module notes for the protocol."""

    SNAPSHOT_EVERY = 2.0  # seconds between status refreshes while idle

    def __init__(self, session: Session, socket_path: Path, *, group: str | None = None,
                 max_clients: int = 32, lock: MachineLock | None = None,
                 clock: Clock | None = None, watchdog: float | None = None,
                 idle_seconds: float = IDLE_SECONDS,
                 faces: Callable[[Hub], Face] = NoFaces) -> None:
        self.session = session
        self.clock = clock or RealClock()
        #: seconds between watchdog pings (half of systemd's WatchdogSec); None: no watchdog
        self.watchdog = watchdog if watchdog is not None else watchdog_interval()
        # one owner of the machine: the CLI passes the lock it took before opening the device
        self.lock = lock or MachineLock(session.controller.store.folder)
        session.controller.guard = self.lock.verify  # checked again before every pass
        self.socket_path = Path(socket_path)
        self.group = group
        self.places = Places(max_clients)
        self.clients_max = max_clients
        self.idle_seconds = idle_seconds
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.claim = threading.Lock()  # held while a pass, hand or clear runs
        self.stopping = threading.Event()
        self.snapshot: dict[str, Any] = {}
        self._server: socketserver.UnixStreamServer | None = None
        self._last_snapshot = -1e9
        self._last_ping = -1e9
        self._pinged_at_device = -math.inf  # the device's time at the last ping
        self._shown = Status(Signal.READY)  # the light the device shows (told again)
        self._job_ended = -1e9  # when the last pass or hand ended (the touch lock-out)
        self._lifts: list[InputEvent] = []  # piles lifted since (hand.too_soon)
        self.notice: str | None = None  # why the last touch started nothing
        self._touch_at: float | None = None  # a touch waiting for a client's short job
        self.listeners: list[Callable[[str, Any], None]] = []
        session.controller.on_show = self._shown_to_dealer
        #: the page and telemetry (shuffler.faces.router, built by the CLI), subscribed to us
        self.faces = faces(self)
        #: called once listening with :meth:`where` (the CLI prints it on a terminal)
        self.announce: Callable[[dict[str, str]], None] | None = None

    # -- what the service publishes to its faces (page, telemetry) ----------------------
    def subscribe(self, callback: Callable[[str, Any], None]) -> None:
        """``callback(kind, body)`` for everything the service does, from its own
        threads: ``signal`` (a :class:`~shuffler.device.contract.Status`), ``event`` (pass
        progress), ``result`` (a pass, hand or score result), ``status`` (the snapshot),
        ``score``, ``battery``. Never a plan. A callback must not block; one that raises
        is logged."""
        self.listeners.append(callback)

    def subscribe_events(self, callback: Callable[[Event], None]) -> None:
        """``callback(event)`` with the typed events of :mod:`shuffler.service.events`: pass
        started, card counted, pass report, hand summary, state, fault and battery."""
        translate = Translator()

        def typed(kind: str, body: Any) -> None:
            for event in translate(kind, body):
                callback(event)

        self.subscribe(typed)

    def _shown_to_dealer(self, status: Status) -> None:
        """Each light and beep shown to the dealer (the controller's ``on_show``), to the
        faces as well; the last one not merely told again is the one a touch recalls."""
        if not status.told:
            self._shown = status
        self.publish("signal", status)

    def publish(self, kind: str, body: Any) -> None:
        for callback in self.listeners:
            try:
                callback(kind, body)
            except Exception:
                log.exception("a listener failed", kind=kind)

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
        self._listen()
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
        self.tick(health=True)

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

    def tick(self, health: bool = False) -> None:
        """Pet systemd's watchdog when it is due, from the deciding loop only: between
        jobs (and only while the device answers its health check, so a hung device gets
        restarted), and from inside a pass or a hand's wait for a touch through
        ``on_tick``. A loop wedged anywhere stops the pings, and so does one that spins
        without getting anywhere: inside a job a ping needs the device's clock to have
        moved since the last one (a pass or a wait that goes on calling ``on_tick`` while
        its machine's time stands still proves nothing); between jobs the loop's turn and
        the device's health check are the progress (an idle simulator's clock rests)."""
        if not self.watchdog or self.clock.now() - self._last_ping < self.watchdog:
            return
        moved = device_now(self.session.device)
        if not health and moved <= self._pinged_at_device:  # inside a job: on_tick
            log.error("no progress since the last watchdog ping: not pinging", device_time=moved)
            return
        if health:
            try:
                self.session.device.health()
            except Exception:
                log.error("device health check failed: not pinging the watchdog")
                return
        sd_notify("WATCHDOG=1")
        self._last_ping, self._pinged_at_device = self.clock.now(), moved

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
            return s.do_pass(req["cards"], req["mode"], on_event=put, on_tick=self.tick)
        if cmd == "hand":
            return s.do_hand(req["passes"], req["cards"], req["mode"], on_event=put,
                             on_tick=self.tick)
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

    # -- the socket ---------------------------------------------------------------------
    def _listen(self) -> None:
        self._bind()
        assert self._server is not None
        threading.Thread(target=self._server.serve_forever, name="socket", daemon=True).start()

    def _bind(self) -> None:
        """Make the listening socket. An existing path is removed only when it is a socket
        nobody answers on (left by a crash); anything else is refused and left alone."""
        path = self.socket_path
        try:
            make_folder(path.parent)
        except OSError as e:
            raise BadInputError(f"{path.parent}: cannot create the socket's folder: "
                                f"{e.strerror or e}") from None
        _remove_stale_socket(path)
        service = self

        class Handler(socketserver.StreamRequestHandler):
            # the first request must come soon; later ones within the idle limit
            timeout = min(FIRST_REQUEST_SECONDS, service.idle_seconds)

            def handle(self) -> None:
                service._client(self.rfile, self.wfile, self.request)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True
            # a burst of every client at once waits to be accepted, not refused
            request_queue_size = self.clients_max

            def handle_error(self, request, client_address) -> None:
                log.error("a client connection failed", error=repr(sys.exc_info()[1]))

        old = os.umask(0o117)  # the socket is born 0660
        try:
            self._server = Server(str(path), Handler)
            os.chmod(path, 0o660)
            if self.group:
                os.chown(path, -1, grp.getgrnam(self.group).gr_gid)
        except KeyError:
            raise BadInputError(f"[service] group: no group called {self.group!r}") from None
        except OSError as e:
            raise BadInputError(f"{path}: cannot listen there: {e.strerror or e}") from None
        finally:
            os.umask(old)

    def _client(self, rfile, wfile, sock: socket.socket) -> None:
        def send(obj: dict[str, Any]) -> None:
            wfile.write((json.dumps(obj) + "\n").encode())
            wfile.flush()

        place = self.places.admit(sock)
        if place is None:
            with contextlib.suppress(OSError):
                send({"ok": False, "error": {
                    "kind": "too_many_clients", "exit": 3,
                    "message": f"too many clients: all {self.clients_max} places are busy "
                               "answering; try again"}})
            return
        try:
            send({"shuffler": __version__, "protocol": PROTOCOL, "schema": SCHEMA,
                  "device": self.session.device.info.kind})
            waited = min(FIRST_REQUEST_SECONDS, self.idle_seconds)
            while not self.stopping.is_set():
                try:
                    line = rfile.readline(MAX_LINE + 1)
                except TimeoutError:
                    send(error_reply(RequestError(
                        f"no request for {waited:g} s: closing the connection", "idle")))
                    return
                if not line:
                    if place.evicted:
                        send(error_reply(RequestError(
                            f"closed to make room: all {self.clients_max} places were taken "
                            "and this connection was idle the longest", "idle")))
                    return  # the client went away (half a line is simply dropped)
                if len(line) > MAX_LINE:
                    send(error_reply(RequestError(f"request longer than {MAX_LINE} bytes",
                                                  "too_long")))
                    return  # the rest of the line cannot be trusted: close
                if not line.strip():
                    continue
                sock.settimeout(self.idle_seconds)
                waited = self.idle_seconds
                try:
                    req = parse_request(line)
                except RequestError as e:
                    send(error_reply(e))
                    continue
                self.places.busy(place, True)
                try:
                    self._answer(req, send)
                finally:
                    self.places.busy(place, False)
        except OSError:  # the client went away mid-reply, or timed out on a write
            return
        finally:
            self.places.leave(place)

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
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
            self.socket_path.unlink(missing_ok=True)
        self.lock.release()


def _remove_stale_socket(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise BadInputError(f"{path}: cannot use it as the socket: {e.strerror or e}") from None
    if not stat.S_ISSOCK(mode):
        raise BadInputError(f"{path}: exists and is not a socket; not touching it (choose "
                            "another --socket, or remove it yourself)")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink(missing_ok=True)  # a socket nobody answers on: left by a crash
        return
    finally:
        probe.close()
    raise ServiceRunningError(f"{path}: a shuffler service is already running there")


class ServiceRunningError(BadInputError):
    """A second ``serve`` on the same socket (exit 2: it is the command that is wrong)."""

    kind = "already_running"


def error_reply(error: ShufflerError, exit_code: int | None = None) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": error_kind(error), "message": str(error),
                                   "exit": error.exit_code if exit_code is None else exit_code}}


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
