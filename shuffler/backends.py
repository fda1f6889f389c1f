"""Opening a device by name through the registry (:mod:`shuffler.device.registry`: ``sim``,
the default, ``sim-gpio``, ``sim-serial``, ``sim-avr``, ``gpio``, ``serial:PORT`` and any
backend registered by name), and the ``gpio`` backend, the Pi's own. Backends are
imported only when chosen."""

from __future__ import annotations

import random

from shuffler.config import Config
from shuffler.core.planning import RandomSource, system_random
from shuffler.device.contract import ShufflerDevice
from shuffler.device.registry import DEFAULT_SIM_SPEED, Backend, Opening, SimOptions, find
from shuffler.errors import BadInputError, DeviceError
from shuffler.logs import get_logger

__all__ = ["DEFAULT_SIM_SPEED", "GPIO", "SimOptions", "open_device", "plan_source"]

log = get_logger("shuffler.backends")


def open_device(
    name: str, config: Config, *, cards: int, sim: SimOptions | None = None
) -> ShufflerDevice:
    """The device called ``name``, loaded with ``cards`` cards if it is simulated."""
    sim = sim or SimOptions()
    backend, argument = find(name)
    if not backend.simulated and sim.given:
        raise BadInputError(
            f"--sim-seed, --sim-fault, --sim-dealer and --sim-uptime apply only to a simulated "
            f"device, not to {name!r}"
        )
    return backend.open(Opening(config, cards, sim, argument))


def _gpio(config: Config) -> ShufflerDevice:
    """The pins through the factory gpiozero chooses (``GPIOZERO_PIN_FACTORY`` honoured).
    Any failure to open them is one line with its real cause (exit 3): a missing pin
    library, lgpio's "GPIO busy" or "can not open gpiochip", and the reasons gpiozero
    recorded for each library it fell back from."""
    import warnings

    from shuffler.gpio.backend import GpioDevice
    from shuffler.gpio.safe_pins import is_pin_error, open_pin_factory, pin_failure

    factory, fell_back = open_pin_factory()
    record_driven(config)
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


def record_driven(config: Config) -> None:
    """Before any output is driven: which pins ``shuffler-safe`` must make safe."""
    from shuffler.gpio.safe_pins import record_driven as record

    try:
        where = record(config.gpio)
    except OSError as e:  # the config's pins are the backstop's next choice
        log.warning("cannot record the driven pins for shuffler-safe", error=str(e))
    else:
        log.debug("driven pins recorded", path=str(where))


GPIO = Backend("gpio", lambda o: _gpio(o.config), "the real machine on a Raspberry Pi")


def plan_source(device: ShufflerDevice, seed: int | None) -> RandomSource:
    """Plans come from the OS CSPRNG; only a simulated device takes a seed."""
    if seed is None:
        return system_random()
    if not device.info.accepts_seed:
        raise BadInputError(f"the {device.info.kind} device refuses a random seed")
    return random.Random(f"plans:{seed}")
