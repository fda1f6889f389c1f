"""The touch sensor's gestures, read from its edges as a finger makes them. Pure.

A finger bounces on both edges. A gesture starts at the first press edge and ends
once the sensor has stayed released for ``settle`` seconds (a press again within that
is bounce: the same gesture). It then counts by how long it was held, from its first
press to its last release: under ``long_press_s`` a touch, at least that a long press
(the dealer's clear, stamped with the time the press *began*, so that a press begun
before a fault cannot clear it). A long press is never a touch: nothing is reported
on its leading edge.

    >>> g = TouchGesture(settle=0.3, long_press_s=2.0)
    >>> g.edge(True, 1.0), g.edge(False, 1.001), g.edge(True, 1.002)   # bounce
    ([], [], [])
    >>> g.edge(False, 1.1), g.poll(1.3), g.poll(1.4)
    ([], [], [('touch', 1.0)])
    >>> g.edge(True, 5.0), g.edge(False, 7.5), g.poll(7.9)
    ([], [], [('long_press', 5.0)])
"""

from __future__ import annotations

import math


class TouchGesture:
    def __init__(self, settle: float, long_press_s: float) -> None:
        self.settle, self.long_press_s = settle, long_press_s
        self.pressed_at: float | None = None  # the gesture's first press edge
        self.released_at: float | None = None  # its last release edge, while settling

    @property
    def deadline(self) -> float:
        """When a gesture now settling ends (inf: none)."""
        return math.inf if self.released_at is None else self.released_at + self.settle

    def edge(self, pressed: bool, at: float) -> list[tuple[str, float]]:
        out = self.poll(at)
        if pressed:
            if self.pressed_at is None:
                self.pressed_at = at
            self.released_at = None  # pressed again while settling: bounce
        elif self.pressed_at is not None:
            self.released_at = at
        return out

    def poll(self, at: float) -> list[tuple[str, float]]:
        """The gesture that has settled by ``at``, if any: (kind, when it began)."""
        if self.pressed_at is None or self.released_at is None or at < self.deadline:
            return []
        held = self.released_at - self.pressed_at
        began, self.pressed_at, self.released_at = self.pressed_at, None, None
        return [("long_press" if held >= self.long_press_s else "touch", began)]
