"""The touch sensor's gestures, read from its edges as a finger makes them. Pure.

A touch is continuous contact. A contact starts at a press edge and ends once the
sensor has stayed released ``bounce`` seconds (``[gpio] touch_debounce_s``, a few
hundredths: contact bounce, never a person's tap); a press again within that is
bounce, the same contact. A contact then counts by how long it was held, from its
press to its last release: under ``long_press_s`` a touch, ``long_press_s`` or longer
a long press (the dealer's clear, stamped with the time the press *began*, so that a
press begun before a fault cannot clear it). A long press is never a touch: nothing is
reported on its leading edge. Quick taps stay taps: each release between them lasts
longer than the bounce, so each is a contact of its own, a touch; they never add up to
a long press however fast a person taps (8 a second leaves about 60 ms between taps).

    >>> g = TouchGesture(bounce=0.02, long_press_s=2.0)
    >>> g.edge(True, 1.0), g.edge(False, 1.001), g.edge(True, 1.002)   # bounce
    ([], [], [])
    >>> g.edge(False, 1.1), g.poll(1.11), g.poll(1.12)
    ([], [], [('touch', 1.0)])
    >>> [g.edge(True, 2.0 + k * 0.125) + g.edge(False, 2.06 + k * 0.125) for k in range(3)]
    [[], [('touch', 2.0)], [('touch', 2.125)]]
    >>> g.edge(True, 5.0), g.edge(False, 7.0), g.poll(7.02)
    ([('touch', 2.25)], [], [('long_press', 5.0)])
"""

from __future__ import annotations

import math

#: edges are stamped in device time, a float: a release ``long_press_s`` after its press
#: (or a gap of exactly ``bounce``) must not fall short by a rounding error
EPS = 1e-9


class TouchGesture:
    def __init__(self, bounce: float, long_press_s: float) -> None:
        self.bounce, self.long_press_s = bounce, long_press_s
        self.pressed_at: float | None = None  # the contact's press edge
        self.released_at: float | None = None  # its last release edge, while it settles

    @property
    def deadline(self) -> float:
        """When a contact now released ends (inf: none)."""
        return math.inf if self.released_at is None else self.released_at + self.bounce

    def edge(self, pressed: bool, at: float) -> list[tuple[str, float]]:
        out = self.poll(at)
        if pressed:
            if self.pressed_at is None:
                self.pressed_at = at
            self.released_at = None  # pressed again within the bounce: the same contact
        elif self.pressed_at is not None:
            self.released_at = at
        return out

    def poll(self, at: float) -> list[tuple[str, float]]:
        """The contact that has ended by ``at``, if any: (kind, when it began)."""
        if self.pressed_at is None or self.released_at is None or at < self.deadline - EPS:
            return []
        held = self.released_at - self.pressed_at
        began, self.pressed_at, self.released_at = self.pressed_at, None, None
        return [("long_press" if held >= self.long_press_s - EPS else "touch", began)]
