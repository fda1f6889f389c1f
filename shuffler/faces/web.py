"""The dealer's page: a small web server inside ``shuffler serve`` (the standard library's
``http.server``: on a Pi Zero 2 W every megabyte counts). Off by default; on loopback when
on; on the LAN only when the config says so::

    GET  /               the page (one HTML file, no external assets)
    GET  /api/panel      what the page shows, as JSON
    GET  /api/events     server-sent events: the panel each time it changes
    GET  /api/tables     every table on the MQTT broker, problems first
    GET  /tables         the tournament board (one HTML file): standings, the round clock
    GET  /api/board      the board as JSON (shuffler.faces.tables.board)
    GET  /api/results.csv  the standings as CSV, to print or keep
    POST /api/pair       {"touch": true}, then {"request": ID}; or {"code": "123456"}
                         (shuffler.faces.pairing)
    POST /api/<action>   clear, pass, score, undo, redo, new_game (JSON body)

Every request must name this machine in ``Host`` (else 421: DNS rebinding gets nothing).
Reading needs nothing more. An action must be a JSON POST, from this page's own origin
when the browser says where it comes from, and, from anywhere but loopback, carry a
paired phone's token (``X-Pairing-Token``). No client can starve another or the Pi's
memory (:mod:`shuffler.faces.web_limits`). Nothing here ever sends a plan or the card
order.
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
from typing import Any
from urllib.parse import urlsplit

from shuffler.faces import web_limits
from shuffler.faces.pairing import PagePairing
from shuffler.faces.panel import DEALING, Panel
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
from shuffler.service.protocol import error_reply
from shuffler.service.request import RequestError

log = get_logger("shuffler.web")

MAX_BODY = 4096
KEEPALIVE_S = 15.0
STREAM_SLICE_S = 1.0  # a closed stream notices within this


class WebServer:
    """Serves ``board`` (the panel) on ``host:port`` in its own threads; ``act(action,
    body)`` answers the page's actions (shuffler.faces.router.Faces.act) and
    ``tournament()`` the board of the room. ``folder`` holds the pairing files."""

    def __init__(self, board: Panel, act: Callable[[str, dict[str, Any]], dict[str, Any]],
                 tournament: Callable[[], dict[str, Any]], host: str, port: int,
                 folder: Path, *, hosts: tuple[str, ...] = (),
                 page: Callable[[], bytes] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.board, self.act, self.tournament = board, act, tournament
        self.pairing = PagePairing(folder)
        self.names = own_names(hosts)
        self.clock = clock
        self.streams = Streams(MAX_STREAMS, STREAMS_PER_CLIENT)
        self.stopping = threading.Event()
        self._page = page or (lambda: _html("page.html"))
        self.httpd = _Server((host, port), self)
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       args=(STOP_POLL_SECONDS,), name="web", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        return f"http://{self.address[0]}:{self.address[1]}/"

    def start(self) -> WebServer:
        self.thread.start()
        log.info("dealer page", url=self.url)
        return self

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def touched(self) -> bool:
        """The service's touch claim (Hub.on_touch): True if the touch pairs a phone."""
        return self.pairing.touched(self.clock())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    #: the listen backlog: a phone's SYN waits behind the connections not yet taken, never
    #: dropped (a dropped SYN is tried again a second later, then three)
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], web: WebServer) -> None:
        self.web = web
        self.gate = Connections(MAX_CONNECTIONS, MAX_PER_CLIENT)
        self.conns: dict[int, Connection] = {}  # by the request socket's id
        self._busy_log = Burst(log, "dealer page connections turned away (over the caps)")
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        client = str(client_address[0])
        conn = self.gate.enter(client, request)
        if conn is None:
            self._busy_log.note(client=client)
            with contextlib.suppress(OSError):  # never wait on it: this is the accept loop
                request.setblocking(False)
                request.send(BUSY)
            self.shutdown_request(request)
            return
        self.conns[id(request)] = conn
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.conns.pop(id(request), None)
            self.gate.leave(conn)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            conn = self.conns.pop(id(request), None)
            if conn is not None:
                self.gate.leave(conn)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("web connection failed", client=client_address[0], exc_info=True)


def _html(name: str) -> bytes:
    return resources.files("shuffler.faces").joinpath(name).read_bytes()


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
        self.counted = self.server.conns[id(self.request)]
        self.reader = RequestReader(self.rfile, self.connection, self.web.clock)
        self.rfile = self.reader  # type: ignore[assignment]

    def handle_one_request(self) -> None:
        """One request: the head and body within their limits, then the method."""
        self.server.gate.busy(self.counted, False)
        self.close_connection = True  # unless the request's head keeps it (parse_request)
        if self.counted.closed:  # closed for room meanwhile
            return
        self.reader.arm()
        try:
            try:
                self.raw_requestline = self.rfile.readline(MAX_HEAD + 1)
            except http.client.LineTooLong:
                self.requestline, self.request_version, self.command = "", "", ""
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return
            # parse_request reads the headers (431 past the budget)
            if not self.raw_requestline or not self.parse_request():
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
    def send_body(self, status: int, ctype: str, body: bytes,
                  headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, obj: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
        self.send_body(status, "application/json", json.dumps(obj).encode(),
                       {"Cache-Control": "no-store", **(headers or {})})

    def refuse(self, status: int, kind: str, message: str,
               headers: dict[str, str] | None = None) -> None:
        log.debug("web request refused", client=self.client, kind=kind, path=self.path)
        self.send_json(status, error_reply(RequestError(message, kind)), headers)

    # -- reading -----------------------------------------------------------------
    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path in ("/", "/tables"):
            self.send_body(HTTPStatus.OK, "text/html; charset=utf-8",
                           self.web._page() if path == "/" else _html("tables.html"),
                           {"Content-Security-Policy": "default-src 'self'; style-src "
                            "'unsafe-inline'; script-src 'unsafe-inline'; frame-ancestors "
                            "'none'", "X-Frame-Options": "DENY"})
        elif path == "/api/panel":
            self.send_json(HTTPStatus.OK, self.web.board.snapshot()[1])
        elif path == "/api/tables":
            self.send_json(HTTPStatus.OK, {"tables": self.web.tournament()["tables"]})
        elif path == "/api/board":
            self.send_json(HTTPStatus.OK, self.web.tournament())
        elif path == "/api/results.csv":
            from shuffler.faces.tables import results_csv

            self.send_body(HTTPStatus.OK, "text/csv; charset=utf-8", results_csv(
                self.web.tournament()["standings"]).encode("utf-8"),
                {"Content-Disposition": 'attachment; filename="results.csv"'})
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
                new, panel = web.board.wait(version, STREAM_SLICE_S)
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
        reply = self.web.act(action, body)
        self.send_json(HTTPStatus.OK if reply.get("ok") else HTTPStatus.CONFLICT, reply)

    def do_pair(self, body: dict[str, Any]) -> None:
        pairing, now = self.web.pairing, self.web.clock()
        agent = self.headers.get("User-Agent", "")
        if body.get("touch") is True:
            dealing = self.web.board.snapshot()[1]["phase"] in DEALING
            self.send_json(*pairing.ask(self.client, agent, dealing, now))
            return
        rid = body.get("request")
        if isinstance(rid, str) and len(rid) <= 64:
            self.send_json(*pairing.answer(self.client, rid, now))
            return
        given = body.get("code")
        if not isinstance(given, str) or len(given) > 16:
            self.refuse(HTTPStatus.BAD_REQUEST, "bad_request",
                        'send {"touch": true}, {"request": ID} or {"code": "123456"}')
            return
        status, reply, wait = pairing.pair(self.client, given.strip(), agent, now)
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
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(self.client).is_loopback:
                return None
        if self.web.pairing.files.known(self.headers.get("X-Pairing-Token", "")):
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
