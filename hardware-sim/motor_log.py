"""Tests: a simulated microcontroller's motor line, logged to a file one change a line
(``<host monotonic seconds> on|off``), so a test can read it after a signal. The file is
named by :data:`MOTOR_LOG_ENV`; sim-serial logs its virtual MCU's motor, sim-avr the chip's."""

from __future__ import annotations

import os
from typing import Any

PathLike = str | os.PathLike[str]

#: the variable naming the log's file
MOTOR_LOG_ENV = "SHUFFLER_MOTOR_LOG"


def log_motor_line(path: PathLike, on: bool) -> None:
    import time

    with open(path, "a") as f:
        f.write(f"{time.monotonic():.6f} {'on' if on else 'off'}\n")


def log_motor(sim: object, path: PathLike) -> None:
    """Log every change of ``sim``'s motor (a SimDevice behind the virtual MCU) to ``path``."""
    cls = type(sim)

    def get(self: Any) -> bool:
        return bool(self.__dict__.get("_logged_motor", False))

    def put(self: Any, on: bool) -> None:
        if on != self.__dict__.get("_logged_motor", False):
            log_motor_line(path, on)
        self.__dict__["_logged_motor"] = on

    sim.__class__ = type(f"Logged{cls.__name__}", (cls,), {"_motor_on": property(get, put)})
