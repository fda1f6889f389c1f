"""The dealer's page: a small web server inside ``shuffler serve``.

Off by default; on loopback when on; on the LAN only when the config says so. Built on
the standard library's ``http.server`` (no framework: on a Pi Zero 2 W every
megabyte counts, and the page needs only a few routes and one event stream)::

    GET  /               the page (one HTML file, no external assets)
    GET  /api/panel      what the page shows, as JSON
    GET  /api/events     server-sent events: the panel each time it changes
    GET  /api/tables     every table on the MQTT broker, problems first
    POST /api/<action>   clear, pass, score, undo, new_game (JSON body)

Reading needs nothing. An action must be a JSON POST (an HTML form cannot send one
across origins without the browser asking first, and we never answer that), from this
page's own origin when the browser says where it comes from, and, from anywhere but
loopback, carry the pairing code (``X-Pairing-Code``; ``shuffler pair`` prints it).
Nothing here ever sends a plan or the card order: the panel is built from the same
reports the CLI prints.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from .logs import get_logger

log = get_logger("shuffler.web")

ACTIONS = ("clear", "pass", "score", "undo", "new_game")
MAX_BODY = 4096
MAX_STREAMS = 16  # open event streams; more get 503
KEEPALIVE_S = 15.0


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


def pairing_code(folder: Path) -> tuple[str, bool]:
    """The table's pairing code (created on first use, mode 0600) and whether it is new."""
    path = Path(folder) / "pairing-code"
    try:
        code = path.read_text(encoding="ascii").strip()
        if len(code) == 6 and code.isdigit():
            return code, False
    except (OSError, UnicodeDecodeError):
        pass
    return new_pairing_code(folder), True


def new_pairing_code(folder: Path) -> str:
    from .state import atomic_write

    code = f"{secrets.randbelow(10**6):06d}"
    path = Path(folder) / "pairing-code"
    atomic_write(path, (code + "\n").encode())
    path.chmod(0o600)
    return code


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebServer:
    """Serves the page for ``source`` on ``host:port`` in its own threads."""

    def __init__(self, source: PanelSource, host: str, port: int, code: str,
                 page: Callable[[], bytes] | None = None) -> None:
        self.source = source
        self.code = code
        self.streams = threading.BoundedSemaphore(MAX_STREAMS)
        self.stopping = threading.Event()
        self._page = page or _default_page
        self.httpd = _Server((host, port), _handler_for(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="web",
                                       daemon=True)

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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 32


def _default_page() -> bytes:
    return resources.files("shuffler").joinpath("page.html").read_bytes()


def _handler_for(web: WebServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "shuffler"
        sys_version = ""
        timeout = 30  # a silent client is dropped

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("web request", client=self.client_address[0], line=format % args)

        # -- answers ---------------------------------------------------------------
        def send_json(self, status: int, obj: dict[str, Any]) -> None:
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def refuse(self, status: int, kind: str, message: str) -> None:
            log.info("web request refused", client=self.client_address[0], kind=kind,
                     path=self.path)
            self.send_json(status, {"ok": False, "error": {"kind": kind, "message": message,
                                                           "exit": 2}})

        # -- reading -----------------------------------------------------------------
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/":
                body = web._page()
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
                self.send_json(HTTPStatus.OK, web.source.panel()[1])
            elif path == "/api/tables":
                self.send_json(HTTPStatus.OK, {"tables": web.source.tables()})
            elif path == "/api/events":
                self.stream()
            elif path == "/favicon.ico":
                self.send_response(HTTPStatus.NO_CONTENT)
                self.end_headers()
            else:
                self.refuse(HTTPStatus.NOT_FOUND, "not_found", f"no page at {path}")

        def stream(self) -> None:
            if not web.streams.acquire(blocking=False):
                self.refuse(HTTPStatus.SERVICE_UNAVAILABLE, "too_many_clients",
                            "too many pages open; close one")
                return
            try:
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                version = -1
                while not web.stopping.is_set():
                    new, panel = web.source.wait_panel(version, KEEPALIVE_S)
                    if new == version:
                        self.wfile.write(b": keep-alive\n\n")
                    else:
                        version = new
                        self.wfile.write(b"data: " + json.dumps(panel).encode() + b"\n\n")
                    self.wfile.flush()
            except OSError:
                pass  # the page went away
            finally:
                web.streams.release()

        # -- acting --------------------------------------------------------------------
        def do_POST(self) -> None:
            action = urlsplit(self.path).path.removeprefix("/api/")
            if action not in ACTIONS:
                self.refuse(HTTPStatus.NOT_FOUND, "not_found", f"no action {action!r}")
                return
            why = self.forbidden()
            if why:
                self.refuse(HTTPStatus.FORBIDDEN, "forbidden", why)
                return
            body = self.json_body()
            if body is None:
                return
            reply = web.source.act(action, body)
            self.send_json(HTTPStatus.OK if reply.get("ok") else HTTPStatus.CONFLICT, reply)

        def forbidden(self) -> str | None:
            """Why this request may not act, or None."""
            ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return "actions are JSON requests from the dealer's page"
            origin = self.headers.get("Origin")
            host = self.headers.get("Host")
            if origin is not None and (host is None or urlsplit(origin).netloc != host):
                return f"cross-origin request from {origin} refused"
            if not is_loopback(self.client_address[0]):
                given = self.headers.get("X-Pairing-Code", "")
                if not hmac.compare_digest(given.encode(), web.code.encode()):
                    return ("pairing code missing or wrong: enter the code from "
                            "`shuffler pair`")
            return None

        def json_body(self) -> dict[str, Any] | None:
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                self.refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_long",
                            f"a request body is at most {MAX_BODY} bytes")
                return None
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError, RecursionError):
                body = None
            if not isinstance(body, dict):
                self.refuse(HTTPStatus.BAD_REQUEST, "bad_request", "send one JSON object")
                return None
            return body

    return Handler
