"""The control socket's listening side: the path made (mode 0660 once the service is
ready, owned by ``[service] group``), a thread per connection, and the one service per path.

While the service starts the socket also carries its owner's execute bit (0760, which
means nothing to a socket): a socket left with it is from a start that never finished
(the process killed or crashed before it was ready), one without it from a service
that ran; the client's "not running" message tells them apart. A start that fails in
Python removes the socket it made. A connection made while the service starts gets its
greeting once it is ready.

An existing path is replaced only when it is a socket nobody answers on (left by a
crash); a socket that answers is another service (``already_running``, exit 2), and
anything else is refused and left alone. ``backlog`` connections arriving together wait
to be accepted, not refused."""

from __future__ import annotations

import grp
import os
import socket
import socketserver
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shuffler.errors import BadInputError
from shuffler.files import make_folder
from shuffler.logs import get_logger

#: how often a server's accept loop looks whether it is asked to stop: ``close()`` (the
#: service's stop, SIGTERM's) returns within it (socketserver's default is half a second)
STOP_POLL_SECONDS = 0.05

#: the socket's mode while the service starts, and once it is ready (the module's notes)
STARTING_MODE, READY_MODE = 0o760, 0o660

#: ``converse(rfile, wfile, sock)``: one connection, from its accepting to its end
Converse = Callable[[Any, Any, socket.socket], None]
log = get_logger("shuffler.service")


class ServiceRunningError(BadInputError):
    """A second ``serve`` on the same socket (exit 2: it is the command that is wrong)."""

    kind = "already_running"


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.request.settimeout(self.server.first_timeout)  # the first request must come soon

    def handle(self) -> None:
        self.server.ready.wait(self.server.first_timeout)  # greeted once the service is up
        self.server.converse(self.rfile, self.wfile, self.request)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, converse: Converse, backlog: int,
                 first_timeout: float) -> None:
        self.converse, self.first_timeout = converse, first_timeout
        self.ready = threading.Event()
        self.request_queue_size = backlog  # listen()'s backlog, read as the server binds
        super().__init__(path, _Handler)

    def handle_error(self, request, client_address) -> None:
        log.error("a client connection failed", error=repr(sys.exc_info()[1]))


class Listener:
    """Listens at ``path``; each connection runs ``converse`` on its own thread, with
    ``first_timeout`` seconds to send its first request."""

    def __init__(self, path: Path, converse: Converse, *, group: str | None,
                 backlog: int, first_timeout: float) -> None:
        self.path, self.converse, self.group = path, converse, group
        self.backlog, self.first_timeout = backlog, first_timeout
        self.server: _Server | None = None

    def start(self) -> None:
        self.bind()
        assert self.server is not None
        threading.Thread(target=self.server.serve_forever, args=(STOP_POLL_SECONDS,),
                         name="socket", daemon=True).start()

    def bind(self) -> None:
        """Make the listening socket (see the module notes for an existing path)."""
        path = self.path
        try:
            make_folder(path.parent)
        except OSError as e:
            raise BadInputError(f"{path.parent}: cannot create the socket's folder: "
                                f"{e.strerror or e}") from None
        _remove_stale_socket(path)
        old = os.umask(0o017)  # the socket is born 0760: starting (the module's notes)
        try:
            self.server = _Server(str(path), self.converse, self.backlog, self.first_timeout)
            os.chmod(path, STARTING_MODE)
            if self.group:
                os.chown(path, -1, grp.getgrnam(self.group).gr_gid)
        except KeyError:
            self._unmake()  # a start that failed leaves no socket for the next command
            raise BadInputError(f"[service] group: no group called {self.group!r}") from None
        except OSError as e:
            self._unmake()
            raise BadInputError(f"{path}: cannot listen there: {e.strerror or e}") from None
        finally:
            os.umask(old)

    def _unmake(self) -> None:
        """The socket made here, gone (never another's file: only once the server was
        made here, so a bind that failed half-way leaves no socket either)."""
        if self.server is not None:
            self.server.server_close()
            self.server = None
            self.path.unlink(missing_ok=True)

    def ready(self) -> None:
        """The service is up: the socket's mode is 0660, and connections are greeted."""
        if self.server is not None:
            os.chmod(self.path, READY_MODE)
            self.server.ready.set()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
        self._unmake()


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
