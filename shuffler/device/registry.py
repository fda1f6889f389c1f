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

:func:`open_device` opens a device by name; :func:`device_identity` says what machine
a name opens (for its lock); :func:`plan_source` gives a device its plans' randomness.

The *built-in* backends are the ones this distribution (``shuffler``) declares: the
docs and the tests compare those (:func:`builtin`), so a backend package installed
beside it changes no page and breaks no test, while help and errors name every one
(:func:`usage`): the built-in first, then the others.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffler.errors import BadInputError

if TYPE_CHECKING:  # types only: ``shuffler --help`` lists the devices through this module
    from shuffler.core.planning import RandomSource
    from shuffler.device.clock import Clock
    from shuffler.device.contract import ShufflerDevice

GROUP = "shuffler.devices"
#: the distribution whose backends are the built-in ones (pyproject.toml's own entry points)
DISTRIBUTION = "shuffler"
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
    #: the simulated dealer ignores the warning of the other pile lifted first (and keeps
    #: the stack with a long press) rather than correcting when told
    ignores: bool = False
    clock: Clock | None = field(default=None, compare=False)  # tests inject a virtual clock

    @property
    def given(self) -> bool:
        return (self.seed is not None or bool(self.faults) or self.habit != "instructed"
                or self.uptime > 0 or self.ignores)


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
    #: what machine it opens, given the argument (see :func:`device_identity`); unset,
    #: the argument's real path when there is one, else a machine private to the process
    identity: Callable[[str | None], tuple[Path, bool] | None] | None = None

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
    return {name: value for name, (value, _) in _scan_dists().items()}


def _dist_name(folder: str) -> str:
    """A distribution's normalised name from its ``NAME-VERSION.dist-info`` folder."""
    return folder[:-len(".dist-info")].split("-")[0].lower().replace("_", "-").replace(".", "-")


def _scan_dists() -> dict[str, tuple[str, str]]:
    """``name -> ("module:attr", distribution)``, as :func:`_scan` finds them."""
    found: dict[str, tuple[str, str]] = {}
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
                found.setdefault(name, (value, _dist_name(dist)))
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
    try:
        backend = importlib.import_module(module.strip())
    except ModuleNotFoundError as e:
        if not e.name or not (module.strip() + ".").startswith(e.name + "."):
            raise  # the backend's own dependency: its error says which
        raise BadInputError(
            f"the entry point {value!r} of {GROUP} names a module that is not there: an "
            "install older than the code (a backend moved); run pip install -e . again"
        ) from None
    for part in attr.strip().split("."):
        backend = getattr(backend, part)
    if not isinstance(backend, Backend):
        raise TypeError(f"entry point {value!r} of {GROUP} is not a "
                        "shuffler.device.registry.Backend")
    return backend


def names() -> list[str]:
    """Every device name: those registered, then the entry points', each once."""
    return list(dict.fromkeys([*_registered, *_scan(), *_metadata()]))


def builtin_names() -> list[str]:
    """The names the ``shuffler`` distribution itself declares (not a test's registered
    one, not another package's)."""
    scanned = {n for n, (_, dist) in _scan_dists().items() if dist == DISTRIBUTION}
    if not scanned:  # no dist-info on sys.path (an egg-info, a zip): ask importlib.metadata
        from importlib.metadata import entry_points

        scanned = {ep.name for ep in entry_points(group=GROUP)
                   if ep.dist is not None and _dist_name(f"{ep.dist.name}-0.dist-info")
                   == DISTRIBUTION}
    return [n for n in names() if n in scanned and n not in _registered]


def _ordered(loaded: list[Backend]) -> list[Backend]:
    return sorted(loaded, key=lambda b: (not b.simulated, bool(b.argument), b.name))


def backends() -> list[Backend]:
    """Every backend, loaded (for help and errors: it imports each backend's module):
    the built-in first, then the others; in each, the simulated first, ``NAME:ARG``
    ones last, else by name."""
    return builtin() + others()


def others() -> list[Backend]:
    """The backends not built in (another package's, a test's registered one), loaded
    and ordered as :func:`backends` orders them; none of ours is imported."""
    ours = set(builtin_names())
    return _ordered([_registered.get(name) or _load(_entry(name)) for name in names()
                     if name not in ours])


def builtin() -> list[Backend]:
    """The built-in backends, loaded and ordered as :func:`backends` orders them: what
    the docs list and the tests compare (a package installed beside changes neither)."""
    return _ordered([_load(_entry(name)) for name in builtin_names()])


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


def usage(shown: list[Backend] | None = None) -> str:
    """The names as help says them: ``sim, sim-gpio, ... or serial:PORT``; every backend's
    unless given which (``usage(builtin())``: the docs')."""
    said = [b.usage for b in (backends() if shown is None else shown)]
    if not said:  # an editable install made before the entry points existed
        return f"a backend, but none is registered in {GROUP} (run pip install -e . again)"
    return ", ".join(said[:-1]) + f" or {said[-1]}" if len(said) > 1 else "".join(said)


# -- opening a device ----------------------------------------------------------------

def open_device(
    name: str, config: Any, *, cards: int, sim: SimOptions | None = None
) -> ShufflerDevice:
    """The device called ``name``, loaded with ``cards`` cards if it is simulated
    (``config``: a shuffler.config.Config)."""
    sim = sim or SimOptions()
    backend, argument = find(name)
    if not backend.simulated and sim.given:
        raise BadInputError(
            f"--sim-seed, --sim-fault, --sim-dealer and --sim-uptime apply only to a simulated "
            f"device, not to {name!r}"
        )
    return backend.open(Opening(config, cards, sim, argument))



def device_identity(name: str) -> tuple[Path, bool] | None:
    """What *is* the machine ``name`` opens, for its :class:`~shuffler.store.lock.DeviceLock`
    (and whether that lock file is to be made): each backend says (its ``identity``): the
    first GPIO chip's node for ``gpio``, the kept pins' file for ``sim-gpio``; else the
    argument's real path (``serial:PORT``'s port). None: a machine private to this
    process (the other simulators)."""
    backend, argument = find(name)
    if backend.identity is not None:
        return backend.identity(argument)
    return (Path(os.path.realpath(argument)), False) if argument is not None else None


def plan_source(device: ShufflerDevice, seed: int | None) -> RandomSource:
    """Plans come from the OS CSPRNG; only a simulated device takes a seed."""
    if seed is None:
        from shuffler.core.planning import system_random

        return system_random()
    if not device.info.accepts_seed:
        raise BadInputError(f"the {device.info.kind} device refuses a random seed")
    return random.Random(f"plans:{seed}")
