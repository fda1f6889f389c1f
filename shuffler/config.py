"""The TOML config: device, mechanism, hand, table, battery.

Every value is checked; an error names the file, the key and what was expected,
and nothing is half-applied::

    >>> try:
    ...     load_config_text('[hand]\\npasses = 0', "shuffler.toml")
    ... except ConfigError as e:
    ...     print(e)
    shuffler.toml: [hand] passes: expected a whole number from 1 to 30, got 0

A missing file is fine (defaults apply) unless it was named explicitly.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cards import MAX_CARDS
from .device import FaultLimits
from .errors import ConfigError
from .mechanics import Feed
from .planning import Mode

DEVICE_KINDS = ("sim", "sim-gpio", "sim-serial", "gpio")  # plus "serial:PORT"


@dataclass(frozen=True)
class HandConfig:
    passes: int = 4
    cards: int = 24
    mode: Mode = Mode.PLANNED
    touch_timeout_s: float = 300.0  # between passes, how long to wait for the dealer


@dataclass(frozen=True)
class TableConfig:
    #: seats in clockwise order, so each seat's left-hand neighbour follows it
    seats: tuple[str, ...] = ("North", "East", "South", "West")
    first_dealer: str = "North"


@dataclass(frozen=True)
class BatteryConfig:
    chemistry: str = "alkaline"
    low_volts: float = 7.2  # at rest, warn
    critical_volts: float = 6.6  # at rest, refuse to start
    cutoff_load_volts: float = 5.8  # under load: the estimate counts passes down to this


@dataclass(frozen=True)
class MechanismConfig:
    feed: Feed = Feed.TOP
    card_rate: float = 5.0
    both_window_s: float = 0.15  # pile lifts closer than this: "both at once"
    limits: FaultLimits = field(default_factory=FaultLimits)


@dataclass(frozen=True)
class Config:
    device: str = "sim"
    state_dir: Path | None = None
    mechanism: MechanismConfig = field(default_factory=MechanismConfig)
    hand: HandConfig = field(default_factory=HandConfig)
    table: TableConfig = field(default_factory=TableConfig)
    battery: BatteryConfig = field(default_factory=BatteryConfig)
    pins: dict[str, Any] = field(default_factory=dict)
    source: str = "(defaults)"


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "shuffler" / "config.toml"


def load_config(path: str | os.PathLike | None, *, explicit: bool = True) -> Config:
    """Read ``path``; with ``explicit=False`` a missing file just means defaults."""
    if path is None:
        return Config()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        if not explicit:
            return Config()
        raise ConfigError(f"{p}: no such config file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read the config file: {e}") from None
    return load_config_text(text, str(p))


# -- validation ---------------------------------------------------------------


class _Reader:
    """Reads one table of the TOML document, checking each key once."""

    def __init__(self, source: str, table: str, data: Any) -> None:
        self.source, self.table = source, table
        if not isinstance(data, dict):
            self.fail(None, "a table", data)
        self.data = dict(data)

    def fail(self, key: str | None, expected: str, got: Any) -> None:
        raise ConfigError(f"{self.source}: {self.where(key)}: expected {expected}, got {got!r}")

    def where(self, key: str | None) -> str:
        table = "" if self.table == "top level" else f"[{self.table}]"
        return " ".join(p for p in (table, key) if p) or "top level"

    def get(
        self,
        key: str,
        default: Any,
        expected: str,
        ok: Callable[[Any], bool],
        convert: Callable[[Any], Any] = lambda v: v,
    ) -> Any:
        if key not in self.data:
            return default
        value = self.data.pop(key)
        try:
            good = ok(value)
        except Exception:
            good = False
        if not good:
            self.fail(key, expected, value)
        return convert(value)

    def int(self, key: str, default: int, lo: int, hi: int) -> int:
        return self.get(
            key,
            default,
            f"a whole number from {lo} to {hi}",
            lambda v: type(v) is int and lo <= v <= hi,
        )

    def num(self, key: str, default: float, lo: float, hi: float) -> float:
        return self.get(
            key,
            default,
            f"a number from {lo} to {hi}",
            lambda v: type(v) in (int, float) and lo <= v <= hi,
            float,
        )

    def choice(self, key: str, default: Any, options: dict[str, Any]) -> Any:
        names = " or ".join(repr(o) for o in options)
        return self.get(key, default, names, lambda v: v in options, options.__getitem__)

    def done(self) -> None:
        for key in self.data:
            raise ConfigError(f"{self.source}: {self.where(key)}: unknown key (misspelt?)")


def load_config_text(text: str, source: str = "<config>") -> Config:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: not valid TOML: {e}") from None
    top = _Reader(source, "top level", doc)
    device = top.get(
        "device",
        "sim",
        " or ".join(DEVICE_KINDS) + " or 'serial:PORT'",
        lambda v: (
            isinstance(v, str) and (v in DEVICE_KINDS or (v.startswith("serial:") and len(v) > 7))
        ),
    )
    state_dir = top.get(
        "state_dir", None, "a folder path", lambda v: isinstance(v, str) and v, Path
    )

    def sub(name: str) -> _Reader:
        return _Reader(source, name, top.data.pop(name, {}))

    m = sub("mechanism")
    defaults = FaultLimits()
    limits = FaultLimits(
        jam_seconds=m.num("jam_limit_s", defaults.jam_seconds, 0.05, 10),
        misfeed_seconds=m.num("misfeed_limit_s", defaults.misfeed_seconds, 0.05, 10),
        retries=m.int("retries", defaults.retries, 0, 10),
        reverse_seconds=m.num("reverse_s", defaults.reverse_seconds, 0.0, 5),
        stall_volts=m.num("stall_volts", defaults.stall_volts, 3.0, 9.0),
        max_pass_seconds=m.num("max_pass_s", defaults.max_pass_seconds, 1, 600),
    )
    mechanism = MechanismConfig(
        feed=m.choice("feed", Feed.TOP, {f.value: f for f in Feed}),
        card_rate=m.num("card_rate", 5.0, 0.5, 1000),
        both_window_s=m.num("both_window_s", 0.15, 0.0, 5),
        limits=limits,
    )
    m.done()

    h = sub("hand")
    hand = HandConfig(
        passes=h.int("passes", 4, 1, 30),
        cards=h.int("cards", 24, 1, MAX_CARDS),
        mode=h.choice("mode", Mode.PLANNED, {md.value: md for md in Mode}),
        touch_timeout_s=h.num("touch_timeout_s", 300.0, 1, 86400),
    )
    h.done()

    t = sub("table")
    seats = t.get(
        "seats",
        TableConfig.seats,
        "a list of 2 to 8 distinct seat names",
        lambda v: (
            isinstance(v, list)
            and 2 <= len(v) <= 8
            and all(isinstance(s, str) and s for s in v)
            and len(set(v)) == len(v)
        ),
        tuple,
    )
    first = t.get("first_dealer", seats[0], f"one of the seats {list(seats)}", lambda v: v in seats)
    t.done()

    b = sub("battery")
    chemistry = b.choice("chemistry", "alkaline", {c: c for c in ("alkaline", "lithium", "nimh")})
    low = b.num("low_volts", 7.2, 4.0, 10.0)
    critical = b.num("critical_volts", 6.6, 4.0, 10.0)
    if critical > low:
        b.fail("critical_volts", f"at most low_volts ({low})", critical)
    cutoff = b.num("cutoff_load_volts", 5.8, 3.0, 9.0)
    b.done()

    pins = top.data.pop("pins", {})
    if not isinstance(pins, dict):
        top.fail("pins", "a table", pins)
    top.done()
    return Config(
        device,
        state_dir,
        mechanism,
        hand,
        TableConfig(seats, first),
        BatteryConfig(chemistry, low, critical, cutoff),
        pins,
        source,
    )
