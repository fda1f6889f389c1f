"""The ``serial:PORT`` backend (a shuffler behind its microcontroller), registered by
name in pyproject.toml's ``shuffler.devices`` entry points."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shuffler.device.contract import ShufflerDevice
from shuffler.device.registry import Backend, Opening

if TYPE_CHECKING:
    from shuffler.config import Config

    from .device import Timings


def timings_of(config: Config) -> Timings:
    """The machine's own timings a microcontroller needs with the limits."""
    from .device import timings_of as of

    return of(config)


def open_serial(o: Opening) -> ShufflerDevice:
    from .device import SerialDevice

    mech = o.config.mechanism
    assert o.argument is not None  # the registry requires PORT
    return SerialDevice(o.argument, limits=mech.limits, feed=mech.feed,
                        card_rate=mech.card_rate, timings=timings_of(o.config))


SERIAL = Backend("serial", open_serial, "a machine with a microcontroller, PORT a device "
                 "path or any pyserial URL", argument="PORT")
