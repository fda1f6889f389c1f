"""The simulated backends, registered by name in pyproject.toml's ``shuffler.devices``
entry points: ``sim`` (the physics alone), ``sim-gpio`` (the real GpioDevice on mock
pins), ``sim-serial`` (the real SerialDevice and a virtual microcontroller on a
pseudo-terminal) and ``sim-avr`` (the real firmware in simavr). Each module they need is
imported only when its device is opened."""

from __future__ import annotations

import os
import random
from dataclasses import replace

from shuffler.device.clock import EventClock, ScaledClock
from shuffler.device.contract import ShufflerDevice
from shuffler.device.registry import Backend, Opening
from shuffler.errors import BadInputError

from .device import SimDevice


def open_sim(o: Opening) -> SimDevice:
    """The simulated shuffler, on its own physics."""
    from .dealer import DealerHabit
    from .faults import parse_fault_specs
    from .physics import MechanismSpec

    mech = o.config.mechanism
    return SimDevice.for_cards(
        o.cards,
        faults=parse_fault_specs(o.sim.faults),
        spec=MechanismSpec(feed=mech.feed, card_rate=mech.card_rate),
        rng=random.Random(o.sim.seed),
        habit=DealerHabit(o.sim.habit),
        clock=o.sim.clock or ScaledClock(o.sim.speed, start=o.sim.uptime),
        limits=mech.limits,
    )


def open_sim_serial(o: Opening) -> ShufflerDevice:
    """SerialDevice on a pseudo-terminal, talking to the virtual microcontroller."""
    from firmware_bridge.backend import timings_of
    from firmware_bridge.device import SerialDevice

    from .virtual_mcu import VirtualMCU

    sim_device = open_sim(o)
    if motor_log := os.environ.get("SHUFFLER_MOTOR_LOG"):  # tests: the MCU's motor line
        from .kept_pins import log_motor

        log_motor(sim_device, motor_log)
    mcu = VirtualMCU(sim_device, seed=o.sim.seed or 0)
    mech = o.config.mechanism
    try:
        device = SerialDevice(mcu.path, limits=mech.limits, feed=mech.feed,
                              card_rate=mech.card_rate, timings=timings_of(o.config))
    except BaseException:
        mcu.close()
        raise
    device.on_close = mcu.close
    device._info = replace(device.info, kind="sim-serial", accepts_seed=True)
    return device


#: the habits firmware/harness/harness.c's dealer has (--dealer)
SIM_AVR_DEALERS = ("instructed", "other", "both")


def open_sim_avr(o: Opening) -> ShufflerDevice:
    """SerialDevice on the firmware running in simavr. The chip runs in real time, so
    the speed factor quickens the machine's cards instead; the firmware gets the
    configured limits unchanged."""
    from firmware_bridge.backend import timings_of

    from .faults import parse_fault_specs
    from .sim_avr import SIM_AVR_MAX_RATE, SimAvr, serial_on

    sim = o.sim
    parse_fault_specs(sim.faults)  # bad specs: a clear error before anything starts
    if sim.habit not in SIM_AVR_DEALERS:
        raise BadInputError(f"--sim-dealer {sim.habit}: the simavr harness's dealer knows "
                            f"{', '.join(SIM_AVR_DEALERS)}; the habits that look at the cards "
                            "run on --device sim or sim-gpio")
    mech = o.config.mechanism
    rate = min(mech.card_rate * sim.speed, SIM_AVR_MAX_RATE)
    quicker = mech.card_rate / rate  # the machine's times shrink with its card rate
    args = [f"--cards={o.cards}", f"--card-rate={rate}", f"--spinup={0.2 * quicker}",
            f"--flap-travel={mech.flap_travel_s * quicker}", f"--frame-scale={min(quicker, 1)}",
            f"--feed={mech.feed.value}", f"--dealer={sim.habit}", f"--seed={sim.seed or 0}",
            f"--uptime={sim.uptime}", *(f"--fault={spec}" for spec in sim.faults)]
    return serial_on(SimAvr(*args), mech.limits, mech.feed, mech.card_rate,
                     timings_of(o.config).quickened(quicker))


def open_sim_gpio(o: Opening) -> ShufflerDevice:
    """The real GpioDevice on mock pins driven by the simulated mechanism, on the rig's
    own clock paced ``speed`` times faster than real time (instant on a test's clock)."""
    from shuffler.backends import record_driven

    from .dealer import DealerHabit
    from .faults import parse_fault_specs
    from .gpio_rig import GpioRig, RiggedGpioDevice
    from .physics import MechanismSpec

    sim, config = o.sim, o.config
    mech = config.mechanism
    clock = (sim.clock if isinstance(sim.clock, EventClock)
             else EventClock(start=sim.uptime, speed=sim.speed))
    rig = GpioRig.for_cards(
        o.cards, faults=parse_fault_specs(sim.faults), gpio=config.gpio,
        habit=DealerHabit(sim.habit), rng=random.Random(sim.seed),
        spec=MechanismSpec(feed=mech.feed, card_rate=mech.card_rate), clock=clock)
    if kept := os.environ.get("SHUFFLER_KEPT_PINS"):  # tests: levels outlive a SIGKILL
        from shuffler.gpio.safe_pins import safe_pins

        from .kept_pins import keep_levels

        record_driven(config)  # as on a Pi: the backstop finds the pins this run drives
        keep_levels(rig.factory, kept, list(safe_pins(config.gpio).values()))
    return RiggedGpioDevice(rig, limits=mech.limits, feed=mech.feed)


SIM = Backend("sim", open_sim, "the simulated shuffler (the default)", simulated=True)
SIM_GPIO = Backend("sim-gpio", open_sim_gpio, "the real gpiozero backend on mock pins",
                   simulated=True)
SIM_SERIAL = Backend("sim-serial", open_sim_serial, "the serial bridge against a virtual "
                     "microcontroller on a pseudo-terminal", simulated=True)
SIM_AVR = Backend("sim-avr", open_sim_avr, "the real firmware in simavr", simulated=True)
