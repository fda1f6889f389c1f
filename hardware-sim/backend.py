"""The simulated backends, registered by name in pyproject.toml's ``shuffler.devices``
entry points: ``sim`` (the physics alone), ``sim-gpio`` (the real GpioDevice on mock
pins), ``sim-serial`` (the real SerialDevice and a virtual microcontroller on a
pseudo-terminal) and ``sim-avr`` (the real firmware in simavr). Each module they need is
imported only when its device is opened."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffler.device.clock import EventClock, ScaledClock
from shuffler.device.contract import ShufflerDevice
from shuffler.device.registry import Backend, Opening, SimOptions
from shuffler.errors import BadInputError

from .battery import SimBattery
from .device import SimDevice, beam_filter
from .motor_log import MOTOR_LOG_ENV

if TYPE_CHECKING:
    from .faults import FaultPlan


def _dealer(sim: SimOptions) -> dict[str, Any]:
    """The simulated dealer's habit (``--sim-dealer``) and whether it listens to the
    warning (not ``--sim-ignores``)."""
    from .dealer import DealerHabit

    return {"habit": DealerHabit(sim.habit), "listens": not sim.ignores}


def _hears_or_refuse(sim: SimOptions, device: str) -> None:
    """The firmware harness's dealer (firmware/harness) always hears the warning: a deaf
    one is not there to run."""
    if sim.ignores:
        raise BadInputError(f"--sim-ignores on --device {device}: the firmware harness's "
                            "dealer always puts the pile back when warned; try --device "
                            "sim, sim-gpio or sim-serial")


#: the simulated battery's charge between in-process runs, in the state folder: a real
#: battery is not new each time a command runs
KEPT_BATTERY = "sim-battery.json"
#: a kept battery this flat is changed for a new one (the simulated dealer changes it)
CHANGED_BELOW = 0.1


class KeptBatterySim(SimDevice):
    """The simulator whose battery's charge is read from the state folder as it opens
    and written back as it closes, when it changed and the folder is there (not a
    battery a ``battery:VOLTS`` fault put in)."""

    kept_at: Path | None = None
    charge_at_open = 1.0

    def close(self) -> None:
        super().close()
        if (self.kept_at is not None and self.kept_at.parent.is_dir()
                and self.mechanism.battery.charge != self.charge_at_open):
            import contextlib
            import json

            from shuffler.files import atomic_write

            charge = {"charge": self.mechanism.battery.charge}
            with contextlib.suppress(OSError):  # a read-only folder keeps no charge
                atomic_write(self.kept_at, json.dumps(charge).encode())


def kept_battery(path: Path) -> SimBattery:
    """The battery the last run left (new if none, or unreadable, or flat)."""
    import json

    from shuffler.errors import ShufflerError
    from shuffler.files import read_limited

    try:
        charge = json.loads(read_limited(path, "simulated battery", follow=False) or b"{}")
        charge = float(charge.get("charge", 1.0))
    except (ShufflerError, ValueError, TypeError, AttributeError):
        charge = 1.0
    return SimBattery(charge=charge if CHANGED_BELOW <= charge <= 1.0 else 1.0)


def open_sim(o: Opening) -> SimDevice:
    """The simulated shuffler, on its own physics; its battery kept in the state folder
    from one run to the next (:data:`KEPT_BATTERY`)."""
    from .faults import parse_fault_specs
    from .physics import MechanismSpec

    mech = o.config.mechanism
    faults = parse_fault_specs(o.sim.faults)
    kept = (Path(o.config.state_dir) / KEPT_BATTERY
            if o.config.state_dir is not None and not faults.battery_volts else None)
    device = KeptBatterySim.for_cards(
        o.cards,
        battery=kept_battery(kept) if kept is not None else None,
        faults=faults,
        spec=MechanismSpec(feed=mech.feed, card_rate=mech.card_rate),
        rng=random.Random(o.sim.seed),
        **_dealer(o.sim),
        clock=o.sim.clock or ScaledClock(o.sim.speed, start=o.sim.uptime),
        limits=mech.limits,
        timings=beam_filter(o.config.engine),
    )
    assert isinstance(device, KeptBatterySim)
    device.kept_at, device.charge_at_open = kept, device.mechanism.battery.charge
    return device


def no_stuck_card(plan: FaultPlan, device: str) -> None:
    """``jam:CARD:stuck`` keeps a card in the simulated throat through a clear: the
    simulator's physics do it (sim, sim-serial); the pins' rig and the firmware's
    harness have no such card, so there it is refused rather than never happen."""
    if plan.stuck_clears:
        raise BadInputError(f"--sim-fault jam:CARD:stuck runs on --device sim and "
                            f"sim-serial, not {device} (its jam frees when cleared)")


def open_sim_serial(o: Opening) -> ShufflerDevice:
    """SerialDevice on a pseudo-terminal, talking to the virtual microcontroller."""
    from firmware_bridge.backend import timings_of
    from firmware_bridge.device import SerialDevice

    from .virtual_mcu import VirtualMCU

    sim_device = open_sim(o)
    if motor_log := os.environ.get(MOTOR_LOG_ENV):  # tests: the MCU's motor line
        from .motor_log import log_motor

        log_motor(sim_device, motor_log)
    mcu = VirtualMCU(sim_device, seed=o.sim.seed or 0)
    mech = o.config.mechanism
    try:
        device = SerialDevice(mcu.path, limits=mech.limits, feed=mech.feed,
                              card_rate=mech.card_rate, timings=timings_of(o.config),
                              kind="sim-serial", accepts_seed=True, on_close=mcu.close)
    except BaseException:
        mcu.close()
        raise
    return device


#: the habits firmware/harness/harness.c's dealer has (--dealer) and runs here: it does not
#: hear the warning of the other pile lifted first, so only the one that never needs it
SIM_AVR_DEALERS = ("instructed",)


def open_sim_avr(o: Opening) -> ShufflerDevice:
    """SerialDevice on the firmware running in simavr. The chip runs in real time, so
    the speed factor quickens the machine's cards instead; the firmware gets the
    configured limits unchanged."""
    from firmware_bridge.backend import timings_of

    from .faults import parse_fault_specs
    from .sim_avr import SIM_AVR_MAX_RATE, SimAvr, serial_on

    sim = o.sim
    _hears_or_refuse(sim, "sim-avr")
    plan = parse_fault_specs(sim.faults)  # bad specs: a clear error before anything starts
    no_stuck_card(plan, "sim-avr")
    if sim.habit not in SIM_AVR_DEALERS:
        raise BadInputError(f"--sim-dealer {sim.habit}: the simavr harness's dealer knows "
                            f"{', '.join(SIM_AVR_DEALERS)} (it does not hear the warning of "
                            "the other pile lifted first); the other habits run on --device "
                            "sim, sim-gpio or sim-serial")
    mech = o.config.mechanism
    rate = min(mech.card_rate * sim.speed, SIM_AVR_MAX_RATE)
    quicker = mech.card_rate / rate  # the machine's times shrink with its card rate
    args = [f"--cards={o.cards}", f"--card-rate={rate}", f"--spinup={0.2 * quicker}",
            f"--flap-travel={mech.flap_travel_s * quicker}", f"--frame-scale={min(quicker, 1)}",
            f"--feed={mech.feed.value}", f"--dealer={sim.habit}", f"--seed={sim.seed or 0}",
            f"--uptime={sim.uptime}",
            *(f"--fault={spec}" for spec in sim.faults if not spec.startswith("dropout:"))]
    if plan.dropout_s is not None:  # machine time, quickened with the cards (and the filter)
        args.append(f"--fault=dropout:{plan.dropout_s * 1000 * quicker!r}")
    return serial_on(SimAvr(*args), mech.limits, mech.feed, mech.card_rate,
                     timings_of(o.config).quickened(quicker))


def open_sim_gpio(o: Opening) -> ShufflerDevice:
    """The real GpioDevice on mock pins driven by the simulated mechanism, on the rig's
    own clock paced ``speed`` times faster than real time (instant on a test's clock)."""
    from shuffler.gpio.backend import record_driven

    from .faults import parse_fault_specs
    from .gpio_rig import GpioRig, RiggedGpioDevice
    from .physics import MechanismSpec

    sim, config = o.sim, o.config
    mech = config.mechanism
    clock = (sim.clock if isinstance(sim.clock, EventClock)
             else EventClock(start=sim.uptime, speed=sim.speed))
    faults = parse_fault_specs(sim.faults)
    no_stuck_card(faults, "sim-gpio")
    rig = GpioRig.for_cards(
        o.cards, faults=faults, gpio=config.gpio, **_dealer(sim), rng=random.Random(sim.seed),
        spec=MechanismSpec(feed=mech.feed, card_rate=mech.card_rate), clock=clock)
    if kept := os.environ.get("SHUFFLER_KEPT_PINS"):  # tests: levels outlive a SIGKILL
        from shuffler.gpio.safe_pins import safe_pins

        from .kept_pins import keep_levels

        record_driven(config)  # as on a Pi: the backstop finds the pins this run drives
        keep_levels(rig.factory, kept, list(safe_pins(config.gpio).values()))
    return RiggedGpioDevice(rig, limits=mech.limits, feed=mech.feed,
                            timings=config.engine.timings())


SIM = Backend("sim", open_sim, "the simulated shuffler (the default)", simulated=True)
def kept_pins_identity(_argument: str | None) -> tuple[Path, bool] | None:
    """The file the pins are kept in when they outlive the process (``SHUFFLER_KEPT_PINS``):
    a lock file beside it (that file is replaced on every change); else private."""
    kept = os.environ.get("SHUFFLER_KEPT_PINS")
    return (Path(kept + ".lock"), True) if kept else None


SIM_GPIO = Backend("sim-gpio", open_sim_gpio, "the real gpiozero backend on mock pins",
                   simulated=True, identity=kept_pins_identity)
SIM_SERIAL = Backend("sim-serial", open_sim_serial, "the serial bridge against a virtual "
                     "microcontroller on a pseudo-terminal", simulated=True)
SIM_AVR = Backend("sim-avr", open_sim_avr, "the real firmware in simavr", simulated=True)
