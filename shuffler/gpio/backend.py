"""The ``gpio`` backend's registration (``--device gpio``, the Pi's own machine): it
opens :class:`~shuffler.gpio.device.GpioDevice` on the pin factory gpiozero chooses,
after recording the pins ``shuffler-safe`` must make safe. Named in pyproject.toml's
``shuffler.devices`` entry points; the device's module is imported only when opened."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import TYPE_CHECKING

from shuffler.device.contract import ShufflerDevice
from shuffler.device.registry import Backend
from shuffler.errors import DeviceError
from shuffler.logs import get_logger

if TYPE_CHECKING:
    from shuffler.config import Config

log = get_logger("shuffler.gpio")


def open_gpio(config: Config) -> ShufflerDevice:
    """The pins through the factory gpiozero chooses (``GPIOZERO_PIN_FACTORY`` honoured).
    Any failure to open them is one line with its real cause (exit 3): a missing pin
    library, lgpio's "GPIO busy" or "can not open gpiochip", and the reasons gpiozero
    recorded for each library it fell back from."""
    import warnings

    from shuffler.gpio.device import GpioDevice
    from shuffler.gpio.safe_pins import is_pin_error, open_pin_factory, pin_failure

    factory, fell_back = open_pin_factory()
    record_driven(config)
    for reason in fell_back:
        log.warning("gpiozero fell back from a pin library", reason=reason)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            device = GpioDevice(config.gpio, limits=config.mechanism.limits,
                                feed=config.mechanism.feed, pin_factory=factory,
                                timings=config.engine.timings())
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
        where = record(config.gpio, state_dir=config.state_dir)
    except OSError as e:  # the config's pins are the backstop's next choice
        log.warning("cannot record the driven pins for shuffler-safe", error=str(e))
    else:
        log.debug("driven pins recorded", path=str(where))


def chip_identity(_argument: str | None) -> tuple[Path, bool] | None:
    """The machine is the first GPIO chip: every process picks the same one."""
    chips = sorted(glob.glob("/dev/gpiochip*"))
    return (Path(chips[0]), False) if chips else None


GPIO = Backend("gpio", lambda o: open_gpio(o.config), "the real machine on a Raspberry Pi",
               identity=chip_identity)
