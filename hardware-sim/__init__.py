"""The simulated shuffler: one physics model behind every simulated backend.

``SimDevice`` implements the device contract directly on the physics. The
virtual microcontroller and the gpiozero mock-pin rig move the same cards.

    >>> from shuffler.device.clock import VirtualClock
    >>> from shuffler.core.planning import coin_plan
    >>> import random
    >>> dev = SimDevice.for_cards(24, clock=VirtualClock(), rng=random.Random(1))
    >>> report = dev.run_pass(coin_plan(24, random.Random(2)))
    >>> report.counted, sum(report.piles)
    (24, 24)
"""

from .battery import SimBattery
from .dealer import DealerHabit, SimDealer
from .device import SimDevice, SimTiming
from .faults import FaultPlan, parse_fault_specs
from .physics import Mechanism

__all__ = [
    "DealerHabit",
    "FaultPlan",
    "Mechanism",
    "SimBattery",
    "SimDealer",
    "SimDevice",
    "SimTiming",
    "parse_fault_specs",
]
