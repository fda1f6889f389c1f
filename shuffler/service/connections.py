"""The control socket's places: who may connect, and who is closed to make room.

The service answers at most ``[service] max_clients`` connections at once. A connection
must send its first request within :data:`FIRST_REQUEST_SECONDS` (then it may stay idle
for the service's idle limit between requests). When every place is taken, the
connection idle the longest (connected or last answered the earliest, and not waiting
for an answer) is closed to make room, told ``idle``; only when every place is busy
answering is a newcomer told ``too_many_clients``. So idle connections, however many,
never lock the dealer out of ``shuffler status``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass

#: seconds a new connection has to send its first request
FIRST_REQUEST_SECONDS = 5.0
#: how long a newcomer waits for an idle connection to give up its place
ROOM_WAIT_SECONDS = 2.0


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

    def __len__(self) -> int:
        with self._changed:
            return len(self._open)
