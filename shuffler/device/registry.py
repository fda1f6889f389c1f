"""The device registry: every backend by name, declared once.

A backend is a :class:`Backend` (its name, whether it is simulated, one line of help
and a function that opens it), found by name through the entry points of the group
``shuffler.devices``, as gpiozero finds its pin factories. Ours are declared in
pyproject.toml; another package adds one in its own::

    [project.entry-points."shuffler.devices"]
    mine = "my_package.backend:MINE"    # a Backend named "mine"

and :func:`register` adds one at run time (a test's throwaway device). A name
``NAME:ARG`` opens the backend ``NAME`` with the argument ``ARG`` (``serial:PORT``).
Nothing here imports a backend: an entry point's module is imported only when its
device is opened, so the core never depends on ``hardware_sim`` or
``firmware_bridge``.

The entry points are read from the ``*.dist-info/entry_points.txt`` files on
``sys.path`` (what :mod:`importlib.metadata` reads, without its import time on every
command), and through :mod:`importlib.metadata` only when a name is not found so.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shuffler.device.clock import Clock
from shuffler.device.contract import ShufflerDevice
from shuffler.errors import BadInputError

GROUP = "shuffler.devices"
#: the default --sim-speed: a 24-card hand of four passes takes about two seconds
DEFAULT_SIM_SPEED = 20.0


@dataclass(frozen=True)
class SimOptions:
    """What the simulator options (``--sim-*``) ask of a simulated device."""

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


@dataclass(frozen=True)
class Opening:
    """What a backend is asked to open: the config, the load, the simulator's options
    and the argument after ``NAME:`` (``serial:PORT``'s port), if any."""

    #: a shuffler.config.Config (Any here: the config, above the registry, checks its
    #: device's name through the registry, so the registry does not import it)
    config: Any
    cards: int
    sim: SimOptions
    argument: str | None = None


@dataclass(frozen=True)
class Backend:
    name: str
    open: Callable[[Opening], ShufflerDevice]
    summary: str
    #: takes the simulator's options (--sim-seed, --sim-fault, --sim-dealer)
    simulated: bool = False
    #: opened as ``NAME:ARG`` (the argument required), like ``serial:PORT``
    argument: str | None = None

    @property
    def usage(self) -> str:
        return f"{self.name}:{self.argument}" if self.argument else self.name


_registered: dict[str, Backend] = {}


def register(backend: Backend) -> None:
    """Add (or replace) a backend by its name, ahead of the entry points."""
    _registered[backend.name] = backend


def unregister(name: str) -> None:
    _registered.pop(name, None)


def _scan() -> dict[str, str]:
    """``name -> "module:attr"`` of the group's entry points in every dist-info on
    sys.path (the first of a name wins, as on the import path)."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for dist in names:
            if not dist.endswith(".dist-info"):
                continue
            try:
                with open(os.path.join(entry or ".", dist, "entry_points.txt"),
                          encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            for name, value in _section(text):
                found.setdefault(name, value)
    return found


def _section(text: str) -> list[tuple[str, str]]:
    rows, inside = [], False
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            inside = line == f"[{GROUP}]"
        elif inside and "=" in line and not line.startswith(("#", ";")):
            name, _, value = line.partition("=")
            rows.append((name.strip(), value.strip()))
    return rows


def _metadata() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def _load(value: str) -> Backend:
    import importlib

    module, _, attr = value.partition(":")
    backend = importlib.import_module(module.strip())
    for part in attr.strip().split("."):
        backend = getattr(backend, part)
    if not isinstance(backend, Backend):
        raise TypeError(f"entry point {value!r} of {GROUP} is not a "
                        "shuffler.device.registry.Backend")
    return backend


def names() -> list[str]:
    """Every device name: those registered, then the entry points', each once."""
    return list(dict.fromkeys([*_registered, *_scan(), *_metadata()]))


def backends() -> list[Backend]:
    """Every backend, loaded (for help and docs: it imports each backend's module):
    the simulated first, ``NAME:ARG`` ones last, else by name."""
    loaded = [_registered.get(name) or _load(_entry(name)) for name in names()]
    return sorted(loaded, key=lambda b: (not b.simulated, bool(b.argument), b.name))


def _entry(name: str) -> str:
    return _scan().get(name) or _metadata()[name]


def known(device: str) -> bool:
    """Whether ``device`` names a backend, without importing any."""
    name = device.partition(":")[0]
    return name in _registered or name in _scan() or name in _metadata()


def usable(device: str) -> bool:
    """Whether ``device`` names a backend with its argument as it takes one (a config's
    ``device``), without importing any backend but a registered one."""
    name, colon, argument = device.partition(":")
    if not known(name):
        return False
    if name in _registered:
        return bool(argument) == bool(_registered[name].argument)
    return True if not colon else bool(argument)


def find(device: str) -> tuple[Backend, str | None]:
    """The backend ``device`` names, and its argument (``serial:PORT``'s port)."""
    name, colon, argument = device.partition(":")
    backend = _registered.get(name)
    if backend is None:
        if not known(name):
            raise BadInputError(f"unknown device {device!r}: expected {usage()}")
        backend = _load(_entry(name))
    if backend.argument and not argument:
        raise BadInputError(f"device {device!r}: expected {backend.usage}")
    if not backend.argument and colon:
        raise BadInputError(f"device {name!r} takes no argument: expected {backend.usage}")
    return backend, argument or None


def usage() -> str:
    """The names as help says them: ``sim, sim-gpio, ... or serial:PORT``."""
    shown = [b.usage for b in backends()]
    if not shown:  # an editable install made before the entry points existed
        return f"a backend, but none is registered in {GROUP} (run pip install -e . again)"
    return ", ".join(shown[:-1]) + f" or {shown[-1]}" if len(shown) > 1 else "".join(shown)
