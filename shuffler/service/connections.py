"""The control socket's connections: who may connect, who is closed to make room, and
one connection's conversation under the limits.

The service answers at most ``[service] max_clients`` connections at once. A connection
must send its first request within :data:`FIRST_REQUEST_SECONDS` (then it may stay idle
for the service's idle limit between requests). When every place is taken, the
connection idle the longest (connected or last answered the earliest, and not waiting
for an answer) is closed to make room, told ``idle``; only when every place is busy
answering is a newcomer told ``too_many_clients``. So idle connections, however many,
never lock the dealer out of ``shuffler status``.

A connection that sends nothing for the idle limit is told ``idle`` and closed; a line
past :data:`~shuffler.service.protocol.MAX_LINE` is ``too_long`` (then closed); a bad
line is answered with its error and the connection stays.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shuffler.constants import EXIT_FAULT
from shuffler.service.protocol import MAX_LINE, error_reply, parse_request
from shuffler.service.request import RequestError

#: seconds a new connection has to send its first request
FIRST_REQUEST_SECONDS = 5.0
#: seconds a connection may then send nothing before it is closed (``Service`` default)
IDLE_SECONDS = 60.0
#: how long a newcomer waits for an idle connection to give up its place
ROOM_WAIT_SECONDS = 2.0

Send = Callable[[dict[str, Any]], None]


@dataclass(eq=False)
class Place:
    sock: socket.socket
    since: float  # connected, or its last answer sent
    busy: bool = False  # a request is being answered: never closed for room
    evicted: bool = False  # closed to make room: told so, then it goes


class Places:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: list[Place] = []
        self._changed = threading.Condition()
        #: connections closed to make room, since the start
        self.evicted = 0

    def admit(self, sock: socket.socket) -> Place | None:
        """A place for ``sock``; at the limit the oldest idle connection is closed to
        make room. None when every place is busy answering."""
        deadline = time.monotonic() + ROOM_WAIT_SECONDS
        with self._changed:
            while len(self._open) >= self.limit:
                if not any(p.evicted for p in self._open):
                    idle = [p for p in self._open if not p.busy]
                    if not idle:
                        return None
                    victim = min(idle, key=lambda p: p.since)
                    victim.evicted = True
                    self.evicted += 1
                    with contextlib.suppress(OSError):  # its read ends; it says why and goes
                        victim.sock.shutdown(socket.SHUT_RD)
                left = deadline - time.monotonic()
                if left <= 0 or not self._changed.wait(left):
                    return None
            place = Place(sock, time.monotonic())
            self._open.append(place)
            return place

    def leave(self, place: Place) -> None:
        with self._changed:
            if place in self._open:
                self._open.remove(place)
            self._changed.notify_all()

    def busy(self, place: Place, busy: bool) -> None:
        with self._changed:
            place.busy = busy
            place.since = time.monotonic()


class Conversation:
    """What each connection's thread runs: the greeting, then requests line by line,
    each checked and handed to ``answer(request, send)``, until the client goes, breaks
    a limit or ``stopping`` is set."""

    def __init__(self, places: Places, idle_seconds: float, greeting: Callable[[], dict],
                 answer: Callable[[dict[str, Any], Send], None],
                 stopping: threading.Event) -> None:
        self.places, self.idle_seconds = places, idle_seconds
        self.greeting, self.answer, self.stopping = greeting, answer, stopping

    def __call__(self, rfile, wfile, sock: socket.socket) -> None:
        def send(obj: dict[str, Any]) -> None:
            wfile.write((json.dumps(obj) + "\n").encode())
            wfile.flush()

        limit = self.places.limit
        place = self.places.admit(sock)
        if place is None:
            with contextlib.suppress(OSError):
                send(error_reply(RequestError(f"too many clients: all {limit} places are "
                                              "busy answering; try again",
                                              "too_many_clients"), EXIT_FAULT))
            return
        try:
            send(self.greeting())
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
                            f"closed to make room: all {limit} places were taken "
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
                    self.answer(req, send)
                finally:
                    self.places.busy(place, False)
        except OSError:  # the client went away mid-reply, or timed out on a write
            return
        finally:
            self.places.leave(place)
