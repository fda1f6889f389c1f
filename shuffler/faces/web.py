"""The dealer's page: a small web server inside ``shuffler serve``.

Off by default; on loopback when on; on the LAN only when the config says so. Built on
the standard library's ``http.server`` (no framework: on a Pi Zero 2 W every
megabyte counts, and the page needs only a few routes and one event stream)::

    GET  /               the page (one HTML file, no external assets)
    GET  /api/panel      what the page shows, as JSON
    GET  /api/events     server-sent events: the panel each time it changes
    GET  /api/tables     every table on the MQTT broker, problems first
    GET  /tables         the tournament board (one HTML file): standings, the round clock
    GET  /api/board      the board as JSON (shuffler.faces.tables.board)
    GET  /api/results.csv  the standings as CSV, to print or keep
    POST /api/pair       {"touch": true}: ask to pair; the page polls {"request": ID} for
                         the token once the sensor is touched (shuffler.faces.pairing);
                         {"code": "123456"}: a token for the code `shuffler pair` made
    POST /api/<action>   clear, pass, score, undo, redo, new_game (JSON body)

Every request must name this machine in ``Host`` (its host name, the address it was
reached on, ``localhost`` or a name in ``[web] hosts``), or it is refused with 421: a
web page whose name an attacker points at this machine (DNS rebinding) gets nothing.
Reading needs nothing more. An action must be a JSON POST (an HTML form cannot send one
across origins without the browser asking first, and we never answer that), from this
page's own origin when the browser says where it comes from, and, from anywhere but
loopback, carry a paired phone's token (``X-Pairing-Token``).

The server is bounded (:mod:`shuffler.faces.web_limits`) so that no client can starve
another or the Pi's memory: a request has 10 s from its first byte for its head (at
most 8 KiB, else 431) and its body (at most 4 KiB, else 413) together, the body 3 s of
it once the head is in (else 408 and closed); a connection waits at most 10 s for a
request. At most 48 connections (12 from one address, 8 of them waiting for or sending
a request): a new one past a cap takes the room of the oldest waiting connection of
the address holding the most, so a phone that has none is always let in (503 only when
every connection is being answered, or to an address cut for room a moment ago). At
most 4 event streams per address (24 in all): a new stream closes that client's oldest,
so a page that reconnects always gets through.
Nothing here ever sends a plan or the card order: the panel is built from the same
reports the CLI prints.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import math
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from shuffler.constants import EXIT_USAGE
from shuffler.faces import web_limits
from shuffler.faces.pairing import TOUCH_WINDOW_S, Pairing, Throttle, TouchPairing
from shuffler.faces.web_limits import (
    BUSY,
    MAX_CONNECTIONS,
    MAX_HEAD,
    MAX_PER_CLIENT,
    MAX_STREAMS,
    STREAMS_PER_CLIENT,
    Connection,
    Connections,
    RequestReader,
    Streams,
    host_name,
    own_names,
)
from shuffler.logs import Burst, get_logger
from shuffler.service.listening import STOP_POLL_SECONDS
from shuffler.service.machine import PAGE, sent_by

log = get_logger("shuffler.web")

MAX_BODY = 4096
KEEPALIVE_S = 15.0
STREAM_SLICE_S = 1.0  # a closed stream notices within this


class PanelSource(Protocol):
    """What the web server needs from the service."""

    def panel(self) -> tuple[int, dict[str, Any]]:
        """(version, panel) now."""
        ...

    def wait_panel(self, version: int, timeout: float) -> tuple[int, dict[str, Any]]:
        """The panel once its version is past ``version``, or the same after ``timeout``."""
        ...

    def act(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """Carry out an action; returns ``{"ok": ..., "result"|"error": ...}``."""
        ...

    def tables(self) -> list[dict[str, Any]]:
        """Every table on the broker (the tournament view), or none."""
        ...

    def tournament(self) -> dict[str, Any]:
        """The tournament board (shuffler.faces.tables.board); empty without MQTT."""
        ...


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebServer:
    """Serves the page for ``source`` on ``host:port`` in its own threads. ``folder``
    holds the pairing files (:class:`shuffler.faces.pairing.Pairing`)."""

    def __init__(self, source: PanelSource, host: str, port: int, folder: Path, *,
                 hosts: tuple[str, ...] = (), page: Callable[[], bytes] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.pairing = Pairing(folder)
        self.throttle = Throttle()
        self.throttle_lock = threading.Lock()
        self.asking = TouchPairing()
        self.names = own_names(hosts)
        self.clock = clock
        self.streams = Streams(MAX_STREAMS, STREAMS_PER_CLIENT)
        self.stopping = threading.Event()
        self._page = page or _default_page
        self.httpd = _Server((host, port), self)
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       args=(STOP_POLL_SECONDS,), name="web", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> WebServer:
        self.thread.start()
        log.info("dealer page", url=f"http://{self.address[0]}:{self.address[1]}/")
        return self

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def touched(self) -> bool:
        """The dealer touched the sensor between hands (the service's touch claim): True
        if it was for pairing (a phone asks), and then no pass starts."""
        with self.throttle_lock:
            taken = self.asking.touched(self.clock())
        if taken:
            log.info("touch for pairing")
        return taken

    def ask(self, client: str, agent: str) -> tuple[int, dict[str, Any]]:
        """A phone asks to pair with a touch: (status, reply)."""
        phase = self.source.panel()[1].get("phase")
        if phase in ("dealing", "stack"):
            return HTTPStatus.CONFLICT, _error(
                "pairing_busy", "a hand is being dealt (a touch now starts its next pass): pair "
                "after its last pass")
        with self.throttle_lock:
            rid = self.asking.ask(client, agent, self.clock())
        log.info("a phone asks to pair by touch", client=client)
        return HTTPStatus.ACCEPTED, {"ok": True, "result": {
            "request": rid, "state": "asking", "left_s": TOUCH_WINDOW_S,
            "message": f"touch the sensor on the machine to pair (within "
                       f"{TOUCH_WINDOW_S:.0f} s)"}}

    def answer(self, client: str, rid: str) -> tuple[int, dict[str, Any]]:
        """Where a touch pairing stands for request ``rid``: (status, reply)."""
        with self.throttle_lock:
            state, left, asked = self.asking.answer(rid, self.clock())
        if state == "asking":
            return HTTPStatus.ACCEPTED, {"ok": True, "result": {
                "request": rid, "state": "asking", "left_s": round(left, 1),
                "message": f"touch the sensor on the machine to pair ({left:.0f} s left)"}}
        if state == "both":
            return HTTPStatus.CONFLICT, _error(
                "pairing_ambiguous", "two devices asked to pair at the same moment, so "
                "the touch paired neither: ask again and touch, or enter a code from "
                "`shuffler pair`")
        if state != "confirmed" or asked is None or asked.client != client:
            return HTTPStatus.GONE, _error(
                "pairing_expired", f"no touch within {TOUCH_WINDOW_S:.0f} s: ask again, "
                "then touch the sensor")
        try:
            phone, token = self.pairing.add(client, asked.agent)
        except OSError as e:
            return self._unusable(e)
        with self.throttle_lock:
            self.throttle.succeeded(client)
        log.info("phone paired", phone=phone.id, client=client, by="touch")
        return HTTPStatus.OK, {"ok": True, "result": {"phone": phone.id, "token": token}}

    def _unusable(self, e: OSError) -> tuple[int, dict[str, Any]]:
        log.warning("pairing files unusable", folder=str(self.pairing.folder), error=str(e))
        return (HTTPStatus.SERVICE_UNAVAILABLE, _error(
            "file_access", f"the machine cannot use its pairing files: {e.strerror}"))

    def pair(self, client: str, given: str, agent: str) -> tuple[int, dict[str, Any], float]:
        """Judge a pairing code from ``client``: (status, reply, seconds to wait)."""
        now = self.clock()
        with self.throttle_lock:
            wait = self.throttle.wait(client, now)
            if wait > 0:
                if self.throttle.first_of_burst(client):
                    log.warning("pairing attempts throttled", client=client,
                                retry_after_s=math.ceil(wait))
                return (HTTPStatus.TOO_MANY_REQUESTS, _error(
                    "throttled", f"too many wrong codes: wait {math.ceil(wait)} s"), wait)
            try:
                found = self.pairing.redeem(given, client, agent)
            except OSError as e:
                return (*self._unusable(e), 0.0)
            if found is None:
                wait = self.throttle.failed(client, now)
                log.debug("pairing code wrong", client=client)
                return (HTTPStatus.FORBIDDEN, _error(
                    "forbidden", "wrong or expired code: run `shuffler pair` for the code, "
                    "or pair with a touch on the machine"),
                        wait)
            self.throttle.succeeded(client)
        phone, token = found
        log.info("phone paired", phone=phone.id, client=client)
        return HTTPStatus.OK, {"ok": True, "result": {"phone": phone.id, "token": token}}, 0.0


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": kind, "message": message, "exit": EXIT_USAGE}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    #: the listen backlog: a phone's SYN waits behind the connections not yet taken, never
    #: dropped (a dropped SYN is tried again a second later, then three)
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], web: WebServer) -> None:
        self.web = web
        self.gate = Connections(MAX_CONNECTIONS, MAX_PER_CLIENT)
        self.turned_away = 0
        self._conns: dict[int, Connection] = {}  # by the request socket's id
        self._busy_log = Burst(log, "dealer page connections turned away (over the caps)")
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        client = str(client_address[0])
        conn = self.gate.enter(client, request)
        if conn is None:
            self.turned_away += 1
            self._busy_log.note(client=client)
            with contextlib.suppress(OSError):  # never wait on it: this is the accept loop
                request.setblocking(False)
                request.send(BUSY)
            self.shutdown_request(request)
            return
        self._conns[id(request)] = conn
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._conns.pop(id(request), None)
            self.gate.leave(conn)
            raise

    def connection(self, request: Any) -> Connection:
        """The count kept of ``request`` (its handler's)."""
        return self._conns[id(request)]

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            conn = self._conns.pop(id(request), None)
            if conn is not None:
                self.gate.leave(conn)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("web connection failed", client=client_address[0], exc_info=True)


def _default_page() -> bytes:
    return resources.files("shuffler.faces").joinpath("page.html").read_bytes()


def _board_page() -> bytes:
    return resources.files("shuffler.faces").joinpath("tables.html").read_bytes()


class Handler(BaseHTTPRequestHandler):
    """One connection to the page's server (``self.server.web`` is the :class:`WebServer`)."""

    server: _Server
    server_version = "shuffler"
    sys_version = ""
    timeout = web_limits.WRITE_TIMEOUT_S
    reader: RequestReader
    counted: Connection

    @property
    def web(self) -> WebServer:
        return self.server.web

    @property
    def client(self) -> str:
        return str(self.client_address[0])

    def setup(self) -> None:
        super().setup()
        self.counted = self.server.connection(self.request)
        self.reader = RequestReader(self.rfile, self.connection, self.web.clock)
        self.rfile = self.reader  # type: ignore[assignment]

    def handle_one_request(self) -> None:
        """One request: the head and body within their limits, then the method."""
        self.server.gate.busy(self.counted, False)
        if self.counted.closed:  # closed for room meanwhile
            self.close_connection = True
            return
        self.reader.arm()
        try:
            try:
                self.raw_requestline = self.rfile.readline(MAX_HEAD + 1)
            except http.client.LineTooLong:
                self.requestline, self.request_version, self.command = "", "", ""
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                self.close_connection = True
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():  # reads the headers (431 past the budget)
                self.close_connection = True
                return
            self.reader.head_done()
            method = getattr(self, f"do_{self.command}", None)
            if method is None:
                self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"unsupported method {self.command}")
                return
            if not self.host_allowed():
                self.refuse(HTTPStatus.MISDIRECTED_REQUEST, "wrong_host",
                            "this page answers only to the machine's own name or address")
                self.close_connection = True
                return
            if self.command != "POST":
                self.answering()
            method()
            self.wfile.flush()
        except TimeoutError as e:
            self.close_connection = True
            if self.reader.budget is None and not self.counted.closed:  # past the head
                with contextlib.suppress(OSError):
                    self.connection.settimeout(1.0)
                    self.refuse(HTTPStatus.REQUEST_TIMEOUT, "too_slow", f"{e}: send the "
                                f"whole request within {web_limits.REQUEST_S:g} s")
        except (ConnectionError, OSError):
            self.close_connection = True

    def answering(self) -> None:
        """The request is in: being answered, its connection is not closed for room,
        and every write gets :data:`~shuffler.faces.web_limits.WRITE_TIMEOUT_S`."""
        self.server.gate.busy(self.counted)
        self.connection.settimeout(web_limits.WRITE_TIMEOUT_S)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("web request", client=self.client, line=format % args)

    def host_allowed(self) -> bool:
        """Whether ``Host`` names this machine: one of its names, or the address the
        client reached it on."""
        host = self.headers.get("Host")
        if not host:
            return False
        name = host_name(host)
        if name in self.web.names:
            return True
        local = self.connection.getsockname()[0]
        try:
            return ipaddress.ip_address(name) == ipaddress.ip_address(local)
        except ValueError:
            return False

    # -- answers ---------------------------------------------------------------
    def send_json(self, status: int, obj: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def refuse(self, status: int, kind: str, message: str,
               headers: dict[str, str] | None = None) -> None:
        log.debug("web request refused", client=self.client, kind=kind, path=self.path)
        self.send_json(status, _error(kind, message), headers)

    # -- reading -----------------------------------------------------------------
    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path in ("/", "/tables"):
            body = self.web._page() if path == "/" else _board_page()
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy",
                             "default-src 'self'; style-src 'unsafe-inline'; "
                             "script-src 'unsafe-inline'; frame-ancestors 'none'")
            self.send_header("X-Frame-Options", "DENY")
            self.end_headers()
            self.wfile.write(body)
        elif path == "/api/panel":
            self.send_json(HTTPStatus.OK, self.web.source.panel()[1])
        elif path == "/api/tables":
            self.send_json(HTTPStatus.OK, {"tables": self.web.source.tables()})
        elif path == "/api/board":
            self.send_json(HTTPStatus.OK, self.web.source.tournament())
        elif path == "/api/results.csv":
            from shuffler.faces.tables import results_csv

            sheet = results_csv(self.web.source.tournament()["standings"]).encode("utf-8")
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/csv; charset=utf-8")
            self.send_header("Content-Disposition", 'attachment; filename="results.csv"')
            self.send_header("Content-Length", str(len(sheet)))
            self.end_headers()
            self.wfile.write(sheet)
        elif path == "/api/events":
            self.stream()
        elif path == "/favicon.ico":
            self.send_response(HTTPStatus.NO_CONTENT)
            self.end_headers()
        else:
            self.refuse(HTTPStatus.NOT_FOUND, "not_found", f"no page at {path}")

    def stream(self) -> None:
        """The panel each time it changes, until the page goes, the server stops, or this
        client opens more streams than its share (the oldest goes)."""
        web = self.web
        closed = web.streams.add(self.client)
        self.close_connection = True
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            version, quiet = -1, 0.0
            while not (web.stopping.is_set() or closed.is_set()):
                new, panel = web.source.wait_panel(version, STREAM_SLICE_S)
                if new != version:
                    version, quiet = new, 0.0
                    self.wfile.write(b"data: " + json.dumps(panel).encode() + b"\n\n")
                elif (quiet := quiet + STREAM_SLICE_S) >= KEEPALIVE_S:
                    quiet = 0.0
                    self.wfile.write(b": keep-alive\n\n")
                else:
                    continue
                self.wfile.flush()
        except OSError:
            pass  # the page went away
        finally:
            web.streams.remove(closed)

    # -- acting --------------------------------------------------------------------
    def do_POST(self) -> None:
        action = urlsplit(self.path).path.removeprefix("/api/")
        # the page's own actions, beside the commands it may send: pairing a phone, and
        # Start pass, which is the dealer's touch (never a pass run for the page)
        if action not in ("pair", "pass") and action not in sent_by(PAGE):
            self.refuse_unread(HTTPStatus.NOT_FOUND, "not_found", f"no action {action!r}")
            return
        why = self.cross_site()
        if why is None and action != "pair":
            why = self.unpaired()
        if why:
            self.refuse_unread(HTTPStatus.FORBIDDEN, "forbidden", why)
            return
        body = self.json_body()
        if body is None:
            return
        if action == "pair":
            self.do_pair(body)
            return
        reply = self.web.source.act(action, body)
        self.send_json(HTTPStatus.OK if reply.get("ok") else HTTPStatus.CONFLICT, reply)

    def do_pair(self, body: dict[str, Any]) -> None:
        if body.get("touch") is True:
            self.send_json(*self.web.ask(self.client, self.headers.get("User-Agent", "")))
            return
        rid = body.get("request")
        if isinstance(rid, str) and len(rid) <= 64:
            self.send_json(*self.web.answer(self.client, rid))
            return
        given = body.get("code")
        if not isinstance(given, str) or len(given) > 16:
            self.refuse(HTTPStatus.BAD_REQUEST, "bad_request",
                        'send {"touch": true}, {"request": ID} or {"code": "123456"}')
            return
        status, reply, wait = self.web.pair(self.client, given.strip(),
                                            self.headers.get("User-Agent", ""))
        headers = {"Retry-After": str(math.ceil(wait))} if wait > 0 else None
        self.send_json(status, reply, headers)

    def refuse_unread(self, status: int, kind: str, message: str) -> None:
        """Refuse a request whose body is not read: the connection is spent."""
        self.answering()
        self.close_connection = True
        self.refuse(status, kind, message)

    def cross_site(self) -> str | None:
        """Why this request is not the page's own JSON request, or None."""
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return "actions are JSON requests from the dealer's page"
        origin = self.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc.lower() != \
                self.headers.get("Host", "").lower():
            return f"cross-origin request from {origin} refused"
        if self.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return "cross-site request refused"
        return None

    def unpaired(self) -> str | None:
        """Why this client may not act (not on loopback, and no paired phone's token)."""
        if is_loopback(self.client):
            return None
        if self.web.pairing.known(self.headers.get("X-Pairing-Token", "")):
            return None
        return "this phone is not paired: pair it by touch, or with the code from `shuffler pair`"

    def json_body(self) -> dict[str, Any] | None:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.refuse_unread(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_long",
                               f"a request body is at most {MAX_BODY} bytes")
            return None
        raw = self.reader.read_body(length) if length else b"{}"
        self.answering()
        if len(raw) < length:
            self.close_connection = True
            self.refuse(HTTPStatus.BAD_REQUEST, "bad_request", "the body ended early")
            return None
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            body = None
        if not isinstance(body, dict):
            self.refuse(HTTPStatus.BAD_REQUEST, "bad_request", "send one JSON object")
            return None
        return body
