"""Opening a device by name: ``sim`` (default), ``sim-gpio``, ``sim-serial``,
``serial:PORT``, ``gpio``. Backends are imported only when chosen."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .clock import Clock, ScaledClock
from .config import Config
from .device import ShufflerDevice
from .errors import BadInputError, UnsupportedError
from .planning import RandomSource, system_random

#: the default --sim-speed: a 24-card hand of four passes takes about two seconds
DEFAULT_SIM_SPEED = 20.0


@dataclass(frozen=True)
class SimOptions:
    speed: float = DEFAULT_SIM_SPEED
    seed: int | None = None
    faults: tuple[str, ...] = ()
    habit: str = "instructed"
    clock: Clock | None = field(default=None, compare=False)  # tests inject a virtual clock

    @property
    def given(self) -> bool:
        return self.seed is not None or bool(self.faults) or self.habit != "instructed"


def is_simulated(name: str) -> bool:
    return name == "sim" or name.startswith("sim-")


def open_device(
    name: str, config: Config, *, cards: int, sim: SimOptions | None = None
) -> ShufflerDevice:
    """The device called ``name``, loaded with ``cards`` cards if it is simulated."""
    sim = sim or SimOptions()
    if not is_simulated(name) and sim.given:
        raise BadInputError(
            f"--sim-seed, --sim-fault and --sim-dealer apply only to a simulated "
            f"device, not to {name!r}"
        )
    if name == "sim":
        from hardware_sim import DealerHabit, SimDevice, parse_fault_specs
        from hardware_sim.physics import MechanismSpec

        mech = config.mechanism
        return SimDevice.for_cards(
            cards,
            faults=parse_fault_specs(sim.faults),
            spec=MechanismSpec(feed=mech.feed, card_rate=mech.card_rate),
            rng=random.Random(sim.seed),
            habit=DealerHabit(sim.habit),
            clock=sim.clock or ScaledClock(sim.speed),
            limits=mech.limits,
        )
    if name in ("sim-gpio", "sim-serial", "gpio") or name.startswith("serial:"):
        raise UnsupportedError(
            f"device {name!r} is not available in this version yet; use --device sim"
        )
    raise BadInputError(
        f"unknown device {name!r}: expected sim, sim-gpio, sim-serial, gpio or serial:PORT"
    )


def plan_source(device: ShufflerDevice, seed: int | None) -> RandomSource:
    """Plans come from the OS CSPRNG; only a simulated device takes a seed."""
    if seed is None:
        return system_random()
    if not device.info.accepts_seed:
        raise BadInputError(f"the {device.info.kind} device refuses a random seed")
    return random.Random(f"plans:{seed}")
