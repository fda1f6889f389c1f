"""The limits that keep the dealer's page server bounded (see :mod:`shuffler.faces.web`): how
many connections and event streams, how big and how slow a request head may be, and
which host names the page answers to; shared by the server's threads."""

from __future__ import annotations

import collections
import contextlib
import http.client
import socket
import threading
import time
from typing import Any

MAX_HEAD = 8192  # request line and headers
HEAD_TIMEOUT_S = 10.0  # to send them (and the wait between requests on one connection)
IO_TIMEOUT_S = 30.0  # any other wait on a client
MAX_CONNECTIONS = 48  # one thread each
MAX_PER_CLIENT = 12
MAX_STREAMS = 24
STREAMS_PER_CLIENT = 4


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


class Gate:
    """Counts open connections, in all and per client address."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total, self.per_client = total, per_client
        self.open: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    def enter(self, client: str) -> bool:
        with self.lock:
            if sum(self.open.values()) >= self.total or self.open[client] >= self.per_client:
                return False
            self.open[client] += 1
            return True

    def leave(self, client: str) -> None:
        with self.lock:
            self.open[client] -= 1
            if self.open[client] <= 0:
                del self.open[client]


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

    def count(self) -> int:
        with self.lock:
            return len(self.open)


class HeadReader:
    """The connection's input: while a request's head is read, at most :data:`MAX_HEAD`
    bytes and :data:`HEAD_TIMEOUT_S` seconds in all (every wait on the socket gets only
    what is left); the body and anything else read straight through."""

    def __init__(self, raw: Any, sock: socket.socket) -> None:
        self.raw, self.sock = raw, sock
        self.budget: int | None = None
        self.deadline = 0.0

    def arm(self) -> None:
        self.budget, self.deadline = MAX_HEAD, time.monotonic() + HEAD_TIMEOUT_S

    def disarm(self) -> None:
        self.budget = None
        self.sock.settimeout(IO_TIMEOUT_S)

    def readline(self, size: int = -1) -> bytes:
        if self.budget is None:
            return bytes(self.raw.readline(size))
        out = bytearray()
        while not out.endswith(b"\n") and (size < 0 or len(out) < size):
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request head took too long")
            self.sock.settimeout(left)
            chunk = self.raw.peek(1)  # at most one wait on the socket
            if not chunk:
                break
            cut = chunk.find(b"\n")
            take = len(chunk) if cut < 0 else cut + 1
            if size >= 0:
                take = min(take, size - len(out))
            if take > self.budget:
                raise http.client.LineTooLong(f"a request head is at most {MAX_HEAD} bytes")
            self.budget -= take
            out += self.raw.read(take)
        return bytes(out)

    def read(self, size: int = -1) -> bytes:
        return bytes(self.raw.read(size))

    def close(self) -> None:
        self.raw.close()


BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\n"
        b"Connection: close\r\n\r\n")
