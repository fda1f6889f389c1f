"""A simple 9 V battery: open-circuit voltage by charge, sag under load."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

# open-circuit volts by state of charge for an alkaline 9 V block (shape of the
# makers' discharge curves at light load; the battery model proper lives in
# shuffler.battery)
_OCV = ((0.0, 5.4), (0.05, 6.4), (0.1, 7.0), (0.2, 7.5), (0.5, 8.2), (0.8, 8.9), (1.0, 9.5))


def _interp(x: float, pts: tuple[tuple[float, float], ...]) -> float:
    xs = [p[0] for p in pts]
    i = min(max(bisect_left(xs, x), 1), len(pts) - 1)
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    return y0 + (y1 - y0) * (min(max(x, x0), x1) - x0) / (x1 - x0)


@dataclass
class SimBattery:
    """Voltage falls with charge and sags by I·R under load; R climbs as the cell empties."""

    capacity_as: float = 550 * 3.6  # 550 mAh
    charge: float = 1.0  # fraction left
    internal_ohms: float = 1.8  # fresh
    exhausted_ohms: float = 8.0  # extra resistance of an empty battery
    motor_amps: float = 0.35

    @classmethod
    def at_volts(cls, volts: float, **kwargs) -> SimBattery:
        """A battery whose open-circuit voltage is ``volts`` (clamped to the curve)."""
        inverse = tuple((v, c) for c, v in _OCV)
        return cls(charge=_interp(volts, inverse), **kwargs)

    def open_volts(self) -> float:
        return _interp(self.charge, _OCV)

    def volts(self, under_load: bool) -> float:
        sag = self.motor_amps * self.resistance() if under_load else 0.0
        return max(0.0, self.open_volts() - sag)

    def resistance(self) -> float:
        return self.internal_ohms + self.exhausted_ohms * (1.0 - self.charge) ** 4

    def draw(self, seconds: float, amps: float | None = None) -> None:
        used = (self.motor_amps if amps is None else amps) * seconds
        self.charge = max(0.0, self.charge - used / self.capacity_as)
