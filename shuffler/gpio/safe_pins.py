"""``shuffler-safe``: drive the motor and diverter pins to their safe levels, and nothing else.

What runs no Python cannot stop a motor: a SIGKILL, the watchdog's abort, a crash.
A Raspberry Pi kernel keeps a released output at its last level, so the feed motor
would keep turning. systemd runs this command after the service has gone, whatever
way it went (``ExecStopPost=`` in docs/deploy/shuffler.service); a person can run it
too. It opens the pin factory gpiozero would choose (``GPIOZERO_PIN_FACTORY``
honoured), drives every motor input, the diverter and the buzzer low and leaves them
driven. It starts no service and touches no state.

It never gives up for want of a config. The pins come from, in order:

1. the pins the service drove: a GPIO backend records its output pins in
   ``driven-pins.json`` (:func:`driven_pins_path`: ``$RUNTIME_DIRECTORY``, else
   ``$XDG_RUNTIME_DIR/shuffler``, else the state folder the command used: ``--state-dir``
   or the config's ``state_dir``, else the default) before it drives any output,
   so a pin changed in the config while the service ran is still the one made safe;
2. else the config (``--config``, or the system's and the user's);
3. else, when the config cannot be read (a TOML error, a pin clash, a missing file),
   the documented default pin map (docs/hardware.md), with a warning.

It exits 0 when it drove the pins, and says which and from where; 3 when the pins
cannot be opened at all (2 a usage error: its command line is ``shuffler_cli.safe``,
click's like ``shuffler``'s). The pin-factory opening here is also what ``--device gpio``
uses, so a factory that cannot load is one line naming the real cause in both places.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shuffler.config import Config, GpioConfig, discovered_config_paths, load_config, load_configs
from shuffler.errors import ConfigError, DeviceError
from shuffler.files import atomic_write, default_state_dir

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


#: the file a GPIO backend writes before it drives an output (see the module notes)
DRIVEN = "driven-pins.json"


def driven_pins_path(state_dir: Path | None = None) -> Path:
    """Where the pins the service drives are recorded: the unit's runtime folder
    (``RuntimeDirectory=``, kept across restarts), else the user's, else the state folder
    (``state_dir``: the one the command was given; else the default one)."""
    runtime = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    if runtime:
        return Path(runtime) / DRIVEN
    if xdg := os.environ.get("XDG_RUNTIME_DIR"):
        return Path(xdg) / "shuffler" / DRIVEN
    return Path(state_dir or default_state_dir()) / DRIVEN


def safe_pins(gpio: GpioConfig) -> dict[str, int]:
    """The outputs of ``gpio`` that :data:`SAFE_LOW` names, by role."""
    return {role: n for role, n in gpio.pins().items() if role in SAFE_LOW}


def record_driven(gpio: GpioConfig, path: Path | None = None, *,
                  state_dir: Path | None = None) -> Path:
    """Record the outputs about to be driven (before any is): the backstop drives these
    even if the config changes or breaks while the service runs. Raises OSError."""
    where = path or driven_pins_path(state_dir)
    body = {"pins": safe_pins(gpio), "pid": os.getpid()}
    atomic_write(where, (json.dumps(body) + "\n").encode())
    return where


def read_driven(path: Path | None = None) -> dict[str, int] | None:
    """The recorded pins, or None when there is no record or it cannot be read."""
    where = path or driven_pins_path()
    try:
        pins = json.loads(where.read_text()).get("pins")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(pins, dict) or not pins:
        return None
    ok = {r: n for r, n in pins.items()
          if r in SAFE_LOW and type(n) is int and 0 <= n <= 27}
    return ok or None


def make_safe(pins: GpioConfig | Mapping[str, int], factory) -> list[str]:
    """Drive every pin in :data:`SAFE_LOW` low and leave it driven; say which."""
    roles = safe_pins(pins) if isinstance(pins, GpioConfig) else pins
    done = []
    for role, number in roles.items():
        pin = factory.pin(number)
        pin.output_with_state(False)
        done.append(f"{role} GPIO{number}")
    return done


def _warn(text: str) -> None:
    print(f"shuffler-safe: warning: {text}", file=sys.stderr)


def choose_pins(config_path: str | None, device: str | None,
                state_dir: str | None = None) -> tuple[dict[str, int] | None, str]:
    """The pins to drive and where they came from (None: no GPIO device to make safe).
    The record is looked for in the state folder ``state_dir`` names, else the config's."""
    if device is not None and device != "gpio":
        return None, f"the device is {device}"
    try:
        config: Config | None = (load_config(config_path) if config_path
                                 else load_configs(discovered_config_paths()))
        broken = None
    except ConfigError as e:
        config, broken = None, e
    folder = Path(state_dir) if state_dir else (config.state_dir if config else None)
    recorded = read_driven(driven_pins_path(folder))
    if recorded is not None:
        return recorded, f"the pins the service drove ({driven_pins_path(folder)})"
    if config is None:
        _warn(f"{broken}; using the default pin map (docs/hardware.md)")
        return safe_pins(GpioConfig()), "the default pin map"
    if (device or config.device) != "gpio":
        return None, f"the device is {device or config.device}"
    return safe_pins(config.gpio), "the config"


def run(config_path: str | None, device: str | None, state_dir: str | None) -> int:
    """What ``shuffler-safe`` does (its command line: ``shuffler_cli.safe``): drive the
    pins low and say which on stderr; the exit code (0 done or nothing to drive, 3 the
    pins cannot be opened)."""
    pins, source = choose_pins(config_path, device, state_dir)
    if pins is None:
        print(f"shuffler-safe: {source}: no GPIO pins to drive", file=sys.stderr)
        return 0
    try:
        factory, _ = open_pin_factory()
        try:
            done = make_safe(pins, factory)
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
    print(f"shuffler-safe: low: {', '.join(done)} (from {source})", file=sys.stderr)
    return 0
