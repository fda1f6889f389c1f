"""Mock pins whose output levels outlive the process, as a Raspberry Pi kernel keeps them.

On a real Pi a line released by a dead process stays at the level it was last driven
to; gpiozero's mock pins die with the process instead, so a SIGKILL test on them would
prove nothing. Here every output level goes to a small JSON file (written atomically,
``{"GPIO12": {"function": "output", "level": 1.0}}``), and pins opened later, by another
process, start from what the file says.

- :func:`keep_levels` hooks the pins a rig's factory already made (``--device sim-gpio``
  with ``SHUFFLER_KEPT_PINS=FILE``);
- :class:`KeptPinFactory` is a pin factory of its own, for ``GPIOZERO_PIN_FACTORY=
  shuffler-kept`` (``shuffler-safe`` in the tests), a name only the test tree registers
  (``tests/kept.py``), not an install.

A pin handed back as an input floats, and the board's pull-down holds it low
(docs/hardware.md), so an input is recorded at level 0.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpiozero.pins.mock import MockFactory, MockPWMPin

#: a path as the callers give it
PathLike = str | os.PathLike[str]

ENV = "SHUFFLER_KEPT_PINS"


class LevelFile:
    """The kernel's memory of each line: function and level by name (``GPIO12``)."""

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.levels: dict[str, dict[str, Any]] = self.read(self.path)

    @staticmethod
    def read(path: PathLike) -> dict[str, dict[str, Any]]:
        try:
            levels = json.loads(Path(path).read_text())
        except (FileNotFoundError, ValueError):
            return {}
        return levels if isinstance(levels, dict) else {}

    def record(self, name: str, function: str, state: float) -> None:
        level = float(state) if function == "output" else 0.0
        entry = {"function": function, "level": level}
        with self._lock:
            if self.levels.get(name) == entry:
                return
            self.levels[name] = entry
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(self.levels))
            os.replace(tmp, self.path)  # a kill between writes leaves the last whole file


def _hook(pin: Any, store: LevelFile) -> None:
    """Record ``pin``'s level on every change (gpiozero's Pin properties call these
    methods through the instance, so an instance attribute overrides them)."""
    set_function, change_state = pin._set_function, pin._change_state

    def _set_function(value: str) -> None:
        set_function(value)
        store.record(pin.info.name, pin._function, pin._state)

    def _change_state(value: float) -> Any:
        changed = change_state(value)
        store.record(pin.info.name, pin._function, pin._state)
        return changed

    pin._set_function, pin._change_state = _set_function, _change_state
    store.record(pin.info.name, pin._function, pin._state)


def keep_levels(factory: Any, path: PathLike,
                numbers: Iterable[int]) -> LevelFile:
    """Keep the levels of the pins ``numbers`` (BCM) of ``factory`` in ``path``. Only the
    outputs that matter: a file write per SPI clock edge would slow the ADC to a crawl."""
    store = LevelFile(path)
    for number in numbers:
        _hook(factory.pin(number), store)
    return store


class KeptPinFactory(MockFactory):  # type: ignore[misc,unused-ignore]  # gpiozero ships no types
    """A mock pin factory whose pins start at the level the file last kept."""

    def __init__(self, path: PathLike | None = None) -> None:
        super().__init__(pin_class=MockPWMPin)
        where = path or os.environ.get(ENV)
        if not where:
            raise RuntimeError(f"{ENV} is not set: the kept-pins factory needs a file")
        self.store = LevelFile(where)

    def pin(self, spec: Any, pin_class: Any = None, **kwargs: Any) -> Any:
        before = set(self.pins.values())
        pin = super().pin(spec, pin_class=pin_class, **kwargs)
        if pin not in before:  # new to this process: the line is as the kernel kept it
            kept = self.store.levels.get(pin.info.name)
            if kept and kept["function"] == "output":
                pin._function = "output"
                pin._change_state(kept["level"])
            _hook(pin, self.store)
        return pin
