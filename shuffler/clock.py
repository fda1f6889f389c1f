"""Clocks, injected so that tests run in virtual time.

>>> clock = VirtualClock()
>>> clock.sleep(2.5); clock.now()
2.5
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


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
    """

    def __init__(self, speed: float) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        self.speed = speed
        self._virtual = VirtualClock()

    def now(self) -> float:
        return self._virtual.now()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._virtual.sleep(seconds)
            time.sleep(seconds / self.speed)


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
