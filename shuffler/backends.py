"""Opening a device by name: ``sim`` (default), ``sim-gpio``, ``sim-serial``,
``sim-avr``, ``serial:PORT``, ``gpio``. Backends are imported only when chosen."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .clock import Clock, ScaledClock
from .config import Config
from .device import ShufflerDevice
from .errors import BadInputError, DeviceError
from .logs import get_logger
from .planning import RandomSource, system_random

#: the default --sim-speed: a 24-card hand of four passes takes about two seconds
DEFAULT_SIM_SPEED = 20.0

if TYPE_CHECKING:  # imported only when a simulated device is chosen
    from hardware_sim import SimDevice

log = get_logger("shuffler.backends")


@dataclass(frozen=True)
class SimOptions:
    speed: float = DEFAULT_SIM_SPEED
    seed: int | None = None
    faults: tuple[str, ...] = ()
    habit: str = "instructed"
    #: the device starts as if powered this long (seconds): its clocks past their wraps
    uptime: float = 0.0
    clock: Clock | None = field(default=None, compare=False)  # tests inject a virtual clock

    @property
    def given(self) -> bool:
        return (self.seed is not None or bool(self.faults) or self.habit != "instructed"
                or self.uptime > 0)


def is_simulated(name: str) -> bool:
    return name == "sim" or name.startswith("sim-")


def open_device(
    name: str, config: Config, *, cards: int, sim: SimOptions | None = None
) -> ShufflerDevice:
    """The device called ``name``, loaded with ``cards`` cards if it is simulated."""
    sim = sim or SimOptions()
    if not is_simulated(name) and sim.given:
        raise BadInputError(
            f"--sim-seed, --sim-fault, --sim-dealer and --sim-uptime apply only to a simulated "
            f"device, not to {name!r}"
        )
    if name == "sim":
        return _sim(config, cards, sim)
    if name == "sim-gpio":
        return _sim_gpio(config, cards, sim)
    if name == "gpio":
        return _gpio(config)
    if name == "sim-serial":
        return _sim_serial(config, cards, sim)
    if name == "sim-avr":
        return _sim_avr(config, cards, sim)
    if name.startswith("serial:") and len(name) > 7:
        from firmware_bridge.device import SerialDevice

        return SerialDevice(name[7:], limits=config.mechanism.limits, feed=config.mechanism.feed,
                            card_rate=config.mechanism.card_rate, timings=timings_of(config))
    raise BadInputError(
        f"unknown device {name!r}: expected sim, sim-gpio, sim-serial, sim-avr, gpio or "
        "serial:PORT"
    )


def timings_of(config: Config):
    """The machine's own timings a microcontroller needs with the limits."""
    from firmware_bridge.device import Timings

    return Timings(soft_start_s=config.gpio.soft_start_s,
                   flap_travel_s=config.mechanism.flap_travel_s,
                   min_blocked_s=config.gpio.beam_min_blocked_s,
                   min_gap_s=config.gpio.beam_min_gap_s)


def _gpio(config: Config) -> ShufflerDevice:
    """The pins through the factory gpiozero chooses (``GPIOZERO_PIN_FACTORY`` honoured).
    Any failure to open them is one line with its real cause (exit 3): a missing pin
    library, lgpio's "GPIO busy" or "can not open gpiochip", and the reasons gpiozero
    recorded for each library it fell back from."""
    import warnings

    from .gpio import GpioDevice
    from .safe_pins import is_pin_error, open_pin_factory, pin_failure

    factory, fell_back = open_pin_factory()
    _record_driven(config)
    for reason in fell_back:
        log.warning("gpiozero fell back from a pin library", reason=reason)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            device = GpioDevice(config.gpio, limits=config.mechanism.limits,
                                feed=config.mechanism.feed, pin_factory=factory)
    except Exception as e:
        if not is_pin_error(e):
            raise
        raise DeviceError(pin_failure(e, fell_back)) from None
    for w in caught:
        log.info("gpiozero", warning=str(w.message))
    return device


def _record_driven(config: Config) -> None:
    """Before any output is driven: which pins ``shuffler-safe`` must make safe."""
    from .safe_pins import record_driven

    try:
        where = record_driven(config.gpio)
    except OSError as e:  # the config's pins are the backstop's next choice
        log.warning("cannot record the driven pins for shuffler-safe", error=str(e))
    else:
        log.debug("driven pins recorded", path=str(where))


def _sim(config: Config, cards: int, sim: SimOptions) -> SimDevice:
    """The simulated shuffler, on its own physics."""
    from hardware_sim import DealerHabit, SimDevice, parse_fault_specs
    from hardware_sim.physics import MechanismSpec

    mech = config.mechanism
    return SimDevice.for_cards(
        cards,
        faults=parse_fault_specs(sim.faults),
        spec=MechanismSpec(feed=mech.feed, card_rate=mech.card_rate),
        rng=random.Random(sim.seed),
        habit=DealerHabit(sim.habit),
        clock=sim.clock or ScaledClock(sim.speed, start=sim.uptime),
        limits=mech.limits,
    )


def _sim_serial(config: Config, cards: int, sim: SimOptions) -> ShufflerDevice:
    """SerialDevice on a pseudo-terminal, talking to the virtual microcontroller."""
    from firmware_bridge.device import SerialDevice
    from hardware_sim.virtual_mcu import VirtualMCU

    sim_device = _sim(config, cards, sim)
    if motor_log := os.environ.get("SHUFFLER_MOTOR_LOG"):  # tests: the MCU's motor line
        from hardware_sim.kept_pins import log_motor

        log_motor(sim_device, motor_log)
    mcu = VirtualMCU(sim_device, seed=sim.seed or 0)
    try:
        device = SerialDevice(mcu.path, limits=config.mechanism.limits,
                              feed=config.mechanism.feed, card_rate=config.mechanism.card_rate,
                              timings=timings_of(config))
    except BaseException:
        mcu.close()
        raise
    device.on_close = mcu.close
    device._info = replace(device.info, kind="sim-serial", accepts_seed=True)
    return device


#: the habits firmware/harness/harness.c's dealer has (--dealer)
SIM_AVR_DEALERS = ("instructed", "other", "both")


def _sim_avr(config: Config, cards: int, sim: SimOptions) -> ShufflerDevice:
    """SerialDevice on the firmware running in simavr. The chip runs in real time, so
    the speed factor quickens the machine's cards instead; the firmware gets the
    configured limits unchanged."""
    from hardware_sim import parse_fault_specs

    from .sim_avr import SIM_AVR_MAX_RATE, SimAvr, serial_on

    parse_fault_specs(sim.faults)  # bad specs: a clear error before anything starts
    if sim.habit not in SIM_AVR_DEALERS:
        raise BadInputError(f"--sim-dealer {sim.habit}: the simavr harness's dealer knows "
                            f"{', '.join(SIM_AVR_DEALERS)}; the habits that look at the cards "
                            "run on --device sim or sim-gpio")
    mech = config.mechanism
    rate = min(mech.card_rate * sim.speed, SIM_AVR_MAX_RATE)
    quicker = mech.card_rate / rate  # the machine's times shrink with its card rate
    args = [f"--cards={cards}", f"--card-rate={rate}", f"--spinup={0.2 * quicker}",
            f"--flap-travel={mech.flap_travel_s * quicker}", f"--frame-scale={min(quicker, 1)}",
            f"--feed={mech.feed.value}", f"--dealer={sim.habit}", f"--seed={sim.seed or 0}",
            f"--uptime={sim.uptime}", *(f"--fault={spec}" for spec in sim.faults)]
    return serial_on(SimAvr(*args), mech.limits, mech.feed, mech.card_rate,
                     timings_of(config).quickened(quicker))


def _sim_gpio(config: Config, cards: int, sim: SimOptions) -> ShufflerDevice:
    """The real GpioDevice on mock pins driven by the simulated mechanism, on the rig's
    own clock paced ``speed`` times faster than real time (instant on a test's clock)."""
    from hardware_sim import DealerHabit, parse_fault_specs
    from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
    from hardware_sim.physics import MechanismSpec

    from .clock import EventClock

    mech = config.mechanism
    clock = (sim.clock if isinstance(sim.clock, EventClock)
             else EventClock(start=sim.uptime, speed=sim.speed))
    rig = GpioRig.for_cards(
        cards, faults=parse_fault_specs(sim.faults), gpio=config.gpio,
        habit=DealerHabit(sim.habit), rng=random.Random(sim.seed),
        spec=MechanismSpec(feed=mech.feed, card_rate=mech.card_rate), clock=clock)
    if kept := os.environ.get("SHUFFLER_KEPT_PINS"):  # tests: levels outlive a SIGKILL
        from hardware_sim.kept_pins import keep_levels

        from .safe_pins import safe_pins

        _record_driven(config)  # as on a Pi: the backstop finds the pins this run drives
        keep_levels(rig.factory, kept, list(safe_pins(config.gpio).values()))
    return RiggedGpioDevice(rig, limits=mech.limits, feed=mech.feed)


def plan_source(device: ShufflerDevice, seed: int | None) -> RandomSource:
    """Plans come from the OS CSPRNG; only a simulated device takes a seed."""
    if seed is None:
        return system_random()
    if not device.info.accepts_seed:
        raise BadInputError(f"the {device.info.kind} device refuses a random seed")
    return random.Random(f"plans:{seed}")
