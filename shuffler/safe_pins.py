"""``shuffler-safe``: drive the motor and diverter pins to their safe levels, and nothing else.

What runs no Python cannot stop a motor: a SIGKILL, the watchdog's abort, a crash.
A Raspberry Pi kernel keeps a released output at its last level, so the feed motor
would keep turning. systemd runs this command after the service has gone, whatever
way it went (``ExecStopPost=`` in docs/deploy/shuffler.service); a person can run it
too. It reads only the config's pins, opens the pin factory gpiozero would choose
(``GPIOZERO_PIN_FACTORY`` honoured), drives every motor input, the diverter and the
buzzer low and leaves them driven. It starts no service and touches no state.

The pin-factory opening here is also what ``--device gpio`` uses, so a factory that
cannot load is one line naming the real cause (exit 3) in both places.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from .config import GpioConfig, discovered_config_paths, load_config, load_configs
from .errors import ConfigError, DeviceError

#: outputs that move something or make noise; low is safe for every one of them
SAFE_LOW = ("motor", "motor_backward", "diverter", "buzzer")

HINTS = {
    "No module named 'lgpio'": "install it: sudo apt install python3-lgpio; "
                               "off a Pi use --device sim-gpio",
    "GPIO busy": "another program holds the pin: is a second shuffler running?",
    "can not open gpiochip": "is this user in the gpio group, and is there a /dev/gpiochip*?",
}


def _fallbacks(caught: list[warnings.WarningMessage]) -> list[str]:
    """gpiozero's recorded reasons for each pin library it skipped."""
    from gpiozero.exc import PinFactoryFallback

    return [str(w.message) for w in caught if issubclass(w.category, PinFactoryFallback)]


def _cause(error: BaseException) -> str:
    text = str(error)
    if not text:  # gpiozero raises some errors bare: its docstring says what they mean
        doc = (type(error).__doc__ or "").strip().splitlines()
        text = f"{type(error).__name__}: {doc[0]}" if doc else type(error).__name__
    if type(error).__module__.startswith("lgpio") and not text.startswith("lgpio"):
        text = f"lgpio: {text}"
    hint = next((h for key, h in HINTS.items() if key in text), None)
    return f"{text} ({hint})" if hint else text


def pin_failure(error: BaseException, fell_back: Sequence[str] = ()) -> str:
    """One line: what failed, and the reasons gpiozero recorded on the way."""
    chosen = os.environ.get("GPIOZERO_PIN_FACTORY")
    where = f"GPIOZERO_PIN_FACTORY={chosen}: " if chosen else ""
    line = f"cannot open the GPIO pins: {where}{_cause(error)}"
    if fell_back:
        line += "; " + "; ".join(_cause(Exception(r)) for r in fell_back)
    return line


def is_pin_error(error: BaseException) -> bool:
    """An error from opening pins, as opposed to a bug."""
    from gpiozero.exc import GPIOZeroError

    return (isinstance(error, GPIOZeroError | OSError | ImportError)
            or type(error).__module__.startswith("lgpio"))


def open_pin_factory() -> tuple[Any, list[str]]:
    """The pin factory gpiozero chooses, and the fallback reasons it recorded.
    Raises :class:`DeviceError` with one line naming the cause when none loads."""
    from gpiozero import Device

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            Device.ensure_pin_factory()
        except Exception as e:
            if not is_pin_error(e):
                raise
            reasons = _fallbacks(caught)
            if reasons and "Unable to load any default pin factory" in str(e):
                raise DeviceError("cannot open the GPIO pins: no pin library loaded: "
                                  + "; ".join(_cause(Exception(r)) for r in reasons)) from None
            raise DeviceError(pin_failure(e, reasons)) from None
    return Device.pin_factory, _fallbacks(caught)


def make_safe(gpio: GpioConfig, factory) -> list[str]:
    """Drive every pin in :data:`SAFE_LOW` low and leave it driven; say which."""
    done = []
    for role, number in gpio.pins().items():
        if role in SAFE_LOW:
            pin = factory.pin(number)
            pin.output_with_state(False)
            done.append(f"{role} GPIO{number}")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="shuffler-safe",
        description="Drive the shuffler's motor, diverter and buzzer pins low, without "
                    "starting anything. Exit 0 done, 2 bad config, 3 the pins cannot be "
                    "opened.")
    parser.add_argument("--config", default=os.environ.get("SHUFFLER_CONFIG") or None,
                        help="TOML config file (default: /etc/shuffler/config.toml, then "
                             "the user's over it)")
    parser.add_argument("--device", default=None,
                        help="override the config's device; only gpio has pins to drive")
    args = parser.parse_args(argv)
    try:
        config = (load_config(args.config) if args.config
                  else load_configs(discovered_config_paths()))
    except ConfigError as e:
        print(f"shuffler-safe: {e}", file=sys.stderr)
        return 2
    device = args.device or config.device
    if device != "gpio":
        print(f"shuffler-safe: the device is {device}: no GPIO pins to drive", file=sys.stderr)
        return 0
    try:
        factory, _ = open_pin_factory()
        try:
            done = make_safe(config.gpio, factory)
        except Exception as e:
            if not is_pin_error(e):
                raise
            raise DeviceError(pin_failure(e)) from None
    except DeviceError as e:
        print(f"shuffler-safe: {e}", file=sys.stderr)
        return 3
    from gpiozero import Device

    # Not closed: closing would hand the pins back as floating inputs; left driven, the
    # kernel keeps them low after this process ends.
    Device.pin_factory = None
    print(f"shuffler-safe: low: {', '.join(done)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
