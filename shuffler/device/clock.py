"""Clocks, injected so that tests run in virtual time.

>>> clock = VirtualClock()
>>> clock.sleep(2.5); clock.now()
2.5
"""

from __future__ import annotations

import heapq
import itertools
import math
import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


def wait(clock: Clock, q: queue.Queue[T], timeout: float | None) -> T | None:
    """The next item of ``q``, or None after ``timeout`` seconds of ``clock`` time.

    On an :class:`EventClock` the wait moves simulated time (and whatever is
    scheduled on it); on any other clock it is a plain blocking get.
    """
    if isinstance(clock, EventClock):
        return clock.wait(q, timeout)
    try:
        return q.get(timeout=timeout)
    except queue.Empty:
        return None


class RealClock:
    """Wall time (monotonic)."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ScaledClock:
    """Simulated time, paced against the wall clock ``speed`` times faster than real.

    Simulated time moves only when the simulation sleeps (as a :class:`VirtualClock`
    does), so what the simulator reports does not depend on how busy the host is;
    each sleep also waits ``seconds / speed`` of real time so a person can watch.
    :meth:`idle` says how much simulated time a machine standing idle has seen since
    (the simulator's device time goes on by it: shuffler's ``SimDevice.now``).
    """

    #: an idle machine's time moves at most this much (simulated seconds) per look, or the
    #: real time since if longer (never slower than real), so a very fast simulator
    #: never jumps past a 32-bit millisecond stamp's wrap at once
    IDLE_STEP = 60.0

    def __init__(self, speed: float, start: float = 0.0) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        self.speed = speed
        self._virtual = VirtualClock(start)
        self._rested = time.monotonic()  # real time when the simulation last slept

    def now(self) -> float:
        return self._virtual.now()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._virtual.sleep(seconds)
            time.sleep(seconds / self.speed)
        self._rested = time.monotonic()

    def idle(self) -> float:
        """Simulated seconds the machine has stood idle since it last slept (or since the
        last call): real time since, ``speed`` times faster, at most :data:`IDLE_STEP`
        (or the real time itself, if longer)."""
        real = time.monotonic()
        elapsed = max(real - self._rested, 0.0)
        seconds = min(elapsed * self.speed, max(self.IDLE_STEP, elapsed))
        self._rested = real
        return seconds


class VirtualClock:
    """Time that moves only when someone sleeps: instant and deterministic."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            with self._lock:
                self._now += seconds


class EventClock(VirtualClock):
    """Virtual time for a simulated machine that acts on its own (the GPIO rig).

    Parts of the simulation put timed actions on the clock (:meth:`at`) and add
    watchers (:meth:`watch`) that look at the pins whenever time is about to move.
    Time moves only in :meth:`sleep` and :meth:`wait`, through each action in
    order, so a run is the same however busy the host is. With ``speed`` set,
    every step also waits its share of real time (for a person to watch).
    """

    def __init__(self, start: float = 0.0, speed: float | None = None) -> None:
        super().__init__(start)
        self.speed = speed
        self._actions: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._watchers: list[Callable[[], None]] = []
        self._moving = threading.RLock()

    def at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._actions, (when, next(self._order), action))

    def watch(self, watcher: Callable[[], None]) -> None:
        self._watchers.append(watcher)

    def unwatch(self, watcher: Callable[[], None]) -> None:
        if watcher in self._watchers:
            self._watchers.remove(watcher)

    def _look(self) -> None:
        for watcher in list(self._watchers):
            watcher()

    #: with ``speed`` set, time moves in slices this long so a wait sees other threads
    SLICE = 0.02

    def _step(self, limit: float) -> bool:
        """Move towards ``limit``: run the next action due by then, or move time on.
        False once time stands at ``limit`` (or cannot move: nothing is scheduled)."""
        self._look()
        limit_here = min(limit, self._now + self.SLICE) if self.speed else limit
        if not self._actions or self._actions[0][0] > limit_here:
            if math.isfinite(limit_here):
                self._move(limit_here)
            return limit_here < limit
        when, _, action = heapq.heappop(self._actions)
        self._move(max(when, self._now))
        action()
        return True

    def _move(self, to: float) -> None:
        if self.speed and to > self._now and math.isfinite(to):
            time.sleep((to - self._now) / self.speed)
        self._now = max(self._now, to)

    def _end(self, seconds: float) -> float:
        """``now + seconds``, but later than now whenever ``seconds`` > 0: a wait shorter
        than the float's step at this time would otherwise never move the clock, and a
        loop waiting out a timeout on it would spin for ever."""
        end = self._now + max(seconds, 0.0)
        return math.nextafter(end, math.inf) if seconds > 0 and end <= self._now else end

    def sleep(self, seconds: float) -> None:
        with self._moving:
            end = self._end(seconds)
            while self._step(end):
                pass

    def wait(self, q: queue.Queue[T], timeout: float | None) -> T | None:
        with self._moving:
            end = self._end(timeout) if timeout is not None else math.inf
            while q.empty():
                if not self._step(end):
                    break
            try:
                return q.get_nowait()
            except queue.Empty:
                return None
