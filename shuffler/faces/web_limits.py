"""The limits that keep the dealer's page server bounded (see :mod:`shuffler.faces.web`): how
many connections and event streams, how big and how slow a request may be, and which
host names the page answers to; shared by the server's threads.

No slow client can hold the server: a connection waits at most :data:`IDLE_S` for a
request's first byte; from that byte the whole request, head and body, has
:data:`REQUEST_S` (the body, at most 4 KiB, :data:`BODY_S` of it once the head is in);
an answer is written within :data:`WRITE_TIMEOUT_S`. And no address can take another's
room: a connection waiting for a request may be closed to make room for a fresh phone
(:class:`Connections`), and a client's oldest event stream for its newest
(:class:`Streams`)."""

from __future__ import annotations

import collections
import contextlib
import http.client
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

MAX_HEAD = 8192  # request line and headers
IDLE_S = 10.0  # for a request's first byte (a new connection, or between requests)
REQUEST_S = 10.0  # from its first byte, for the whole request: head and body
BODY_S = 3.0  # for the body (at most web.MAX_BODY bytes) once the head is in
WRITE_TIMEOUT_S = 10.0  # for each write of an answer (a client that does not read)
MAX_CONNECTIONS = 48  # one thread each
MAX_PER_CLIENT = 12
WAITING_PER_CLIENT = 8  # connections of one address waiting for or reading a request
MAX_STREAMS = 24
STREAMS_PER_CLIENT = 4
#: an address whose connection was closed for room before it had asked anything makes no
#: room for itself this long: its reconnects are turned away, not let take another's
SUSPECT_S = 10.0
SUSPECTS_KEPT = 4096  # addresses remembered as suspects, at most


def host_name(value: str) -> str:
    """The name part of a ``Host`` header (no port, no brackets), lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def own_names(extra: tuple[str, ...] = ()) -> frozenset[str]:
    """The names this machine answers to: ``localhost``, its host name (plain, ``.local``
    and fully qualified) and ``extra``."""
    name = socket.gethostname().lower()
    names = {"localhost", name, f"{name}.local", *extra}
    with contextlib.suppress(OSError):
        names.add(socket.getfqdn().lower())
    return frozenset(n for n in names if n)


class Connection:
    """One open connection as :class:`Connections` keeps it."""

    __slots__ = ("asked", "client", "closed", "sock", "waiting")

    def __init__(self, client: str, sock: socket.socket | None) -> None:
        self.client, self.sock = client, sock
        self.waiting = True  # waiting for or reading a request (may be closed for room)
        self.closed = False  # closed for room: no longer counted
        self.asked = False  # a request of its own has been answered (or is being)

    def hung_up(self) -> bool:
        """Whether its client has closed it (nothing left to read but the end)."""
        if self.sock is None:
            return False
        try:  # never a wait: a socket with a timeout would wait in recv for input
            poll = select.poll()
            poll.register(self.sock, select.POLLIN)
            if not poll.poll(0):
                return False
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        """Wake its thread (a wait on the socket ends at once) and hang up."""
        self.closed = True
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)


class Connections:
    """The open connections, in all and per client address. A client past its own share
    (:data:`MAX_PER_CLIENT` open, :data:`WAITING_PER_CLIENT` of them waiting) is turned
    away (503). Past the total a new one takes the room of a *waiting* connection (one
    waiting for or reading a request, never one being answered or streaming): the
    oldest of the address holding the most, if it holds more than the newcomer's, or
    the newcomer's own that its client has closed and its thread not yet counted out
    (a phone's last request, just ended); else it is turned away. A suspect (an address
    whose connection was closed for room before it asked anything, within
    :data:`SUSPECT_S`) takes no one's room."""

    def __init__(self, total: int, per_client: int,
                 waiting_per_client: int = WAITING_PER_CLIENT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.per_client = total, per_client
        self.waiting_per_client = waiting_per_client
        self.clock = clock
        self.conns: list[Connection] = []  # oldest first
        self.lock = threading.Lock()
        self.suspects: dict[str, float] = {}  # address -> when it became one (oldest first)

    def enter(self, client: str, sock: socket.socket | None = None) -> Connection | None:
        """Count a new connection from ``client`` (None: no room, turn it away)."""
        with self.lock:
            mine = [c for c in self.conns if c.client == client]
            if len(mine) >= self.per_client or \
                    sum(c.waiting for c in mine) >= self.waiting_per_client:
                return None  # its own share is full: it makes no room for itself
            if len(self.conns) >= self.total:
                if self._suspect(client):
                    return None  # it was cut for room a moment ago: it takes no one's
                count = collections.Counter(c.client for c in self.conns)
                victims = [c for c in self.conns if c.waiting and
                           count[c.client] > len(mine)]
                if not victims:  # its own connection its client has closed still counts?
                    victims = [c for c in mine if c.hung_up()][:1]
                if not victims:
                    return None
                most = max(count[c.client] for c in victims)
                self._close(next(c for c in victims if count[c.client] == most))
            conn = Connection(client, sock)
            self.conns.append(conn)
            return conn

    def _close(self, conn: Connection) -> None:
        self.conns.remove(conn)
        conn.close()
        if not conn.asked:
            self.suspects.pop(conn.client, None)
            self.suspects[conn.client] = self.clock()
            if len(self.suspects) > SUSPECTS_KEPT:
                del self.suspects[next(iter(self.suspects))]

    def _suspect(self, client: str) -> bool:
        since = self.suspects.get(client)
        if since is None:
            return False
        if self.clock() - since < SUSPECT_S:
            return True
        del self.suspects[client]
        return False

    def busy(self, conn: Connection, busy: bool = True) -> None:
        """``conn`` is being answered (or streams): not to be closed for room; or waits
        again (``busy=False``, a kept-alive connection between requests)."""
        with self.lock:
            conn.waiting = not busy
            conn.asked = conn.asked or busy

    def leave(self, conn: Connection) -> None:
        with self.lock:
            if conn in self.conns:
                self.conns.remove(conn)


class Streams:
    """The open event streams, oldest first; adding one past a cap closes the oldest
    of that client (or, past the total, of the client holding the most)."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total, self.per_client = total, per_client
        self.open: list[tuple[str, threading.Event]] = []
        self.lock = threading.Lock()

    def add(self, client: str) -> threading.Event:
        closed = threading.Event()
        with self.lock:
            mine = [s for s in self.open if s[0] == client]
            if len(mine) >= self.per_client:
                self._drop(mine[0])
            elif len(self.open) >= self.total:
                count = collections.Counter(c for c, _ in self.open)
                greedy = count.most_common(1)[0][0]
                self._drop(next(s for s in self.open if s[0] == greedy))
            self.open.append((client, closed))
        return closed

    def _drop(self, stream: tuple[str, threading.Event]) -> None:
        self.open.remove(stream)
        stream[1].set()

    def remove(self, closed: threading.Event) -> None:
        with self.lock:
            self.open = [s for s in self.open if s[1] is not closed]


class RequestReader:
    """The connection's input, with one deadline for the whole request: armed before a
    request, it waits :data:`IDLE_S` for the first byte, then gives the head (at most
    :data:`MAX_HEAD` bytes) and the body together :data:`REQUEST_S` from that byte, the
    body at most :data:`BODY_S` of it; every wait on the socket gets only what is left."""

    def __init__(self, raw: Any, sock: socket.socket,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.raw, self.sock, self.clock = raw, sock, clock
        self.budget: int | None = None
        self.deadline = 0.0
        self.started = False  # the request's first byte is in

    def arm(self) -> None:
        self.budget, self.started = MAX_HEAD, False
        self.deadline = self.clock() + IDLE_S

    def head_done(self) -> None:
        """The head is in: the body has what is left of the request's time, at most
        :data:`BODY_S`."""
        self.budget = None
        self.deadline = min(self.deadline, self.clock() + BODY_S)

    def _wait(self, what: str) -> None:
        left = self.deadline - self.clock()
        if left <= 0:
            raise TimeoutError(what)
        self.sock.settimeout(left)

    def _first(self) -> None:
        if not self.started:
            self.started = True
            self.deadline = self.clock() + REQUEST_S

    def readline(self, size: int = -1) -> bytes:
        if self.budget is None:
            return bytes(self.raw.readline(size))
        out = bytearray()
        while not out.endswith(b"\n") and (size < 0 or len(out) < size):
            self._wait("the request head took too long")
            chunk = self.raw.peek(1)  # at most one wait on the socket
            if not chunk:
                break
            self._first()
            cut = chunk.find(b"\n")
            take = len(chunk) if cut < 0 else cut + 1
            if size >= 0:
                take = min(take, size - len(out))
            if take > self.budget:
                raise http.client.LineTooLong(f"a request head is at most {MAX_HEAD} bytes")
            self.budget -= take
            out += self.raw.read(take)
        return bytes(out)

    def read_body(self, size: int) -> bytes:
        """``size`` bytes of body within the request's deadline (fewer: the client hung
        up), else TimeoutError."""
        out = bytearray()
        while len(out) < size:
            self._wait("the request body took too long")
            chunk = self.raw.read1(size - len(out))  # at most one wait on the socket
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.raw.close()


BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\n"
        b"Connection: close\r\n\r\n")
