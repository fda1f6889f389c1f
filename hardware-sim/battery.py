"""The simulated 9 V battery: the makers' curves, sag under load, recovery at rest.

It follows the same discharge curves the controller reads charge from
(:mod:`shuffler.core.battery`): at rest the rest curve, under a pass's current the
load curve (in between, in proportion to the current), less a small
polarisation that builds while the motor runs and fades at rest. It counts
everything on the 9 V side: a pass draws the whole mechanism's current (motor,
driver, servo, IR emitter, divider), and a machine switched on between passes
still draws the idle current (the power budget in docs/hardware.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shuffler.core.battery import CURVES, DischargeCurve


@dataclass
class SimBattery:
    chemistry: str = "alkaline"
    charge: float = 1.0  # fraction left
    capacity_scale: float = 1.0  # shrink to drain a battery quickly in tests
    polarisation: float = 0.0  # volts
    polarisation_max: float = 0.12
    tau_load: float = 3.0  # seconds for the polarisation to build
    tau_rest: float = 20.0  # seconds for it to fade
    excess: float = 0.0  # volts above the curve's full block: a 12 V supply, 8 NiMH cells
    curve: DischargeCurve = field(init=False)

    def __post_init__(self) -> None:
        self.curve = CURVES[self.chemistry]

    @classmethod
    def at_volts(cls, volts: float, **kwargs) -> SimBattery:
        """A battery that reads ``volts`` at rest: above its curve's full block, a full one
        with the rest as :attr:`excess` (what the driver's limit must refuse)."""
        battery = cls(**kwargs)
        battery.charge = battery.curve.charge_at(volts, under_load=False)
        battery.excess = max(0.0, volts - battery.curve.volts(1.0, under_load=False))
        return battery

    def starting_at(self, volts: float | None) -> SimBattery:
        """This kind of battery, charged to read ``volts`` at rest (``--sim-fault
        battery:VOLTS``); itself when no voltage is given."""
        if not volts:
            return self
        return SimBattery.at_volts(volts, chemistry=self.chemistry,
                                   capacity_scale=self.capacity_scale)

    @property
    def pass_amps(self) -> float:
        return self.curve.pass_amps

    def volts(self, under_load: bool, amps: float | None = None) -> float:
        rest = self.curve.volts(self.charge, under_load=False) + self.excess
        if not under_load:
            return max(0.0, rest - self.polarisation)
        load = self.curve.volts(self.charge, under_load=True) + self.excess
        share = (self.pass_amps if amps is None else amps) / self.pass_amps
        return max(0.0, rest - (rest - load) * share - self.polarisation)

    def _use(self, amp_seconds: float) -> None:
        capacity = self.curve.capacity_mah * 3.6 * self.capacity_scale
        self.charge = max(0.0, self.charge - amp_seconds / capacity)

    def draw(self, seconds: float, amps: float | None = None) -> None:
        """Run the mechanism for ``seconds``: charge goes, polarisation builds."""
        self._use((self.pass_amps if amps is None else amps) * seconds)
        self.polarisation += (self.polarisation_max - self.polarisation) * (
            1 - math.exp(-seconds / self.tau_load))

    def rest(self, seconds: float) -> None:
        """Switched on but still: the idle current flows, the polarisation fades."""
        self._use(self.curve.idle_amps * seconds)
        self.polarisation *= math.exp(-seconds / self.tau_rest)
