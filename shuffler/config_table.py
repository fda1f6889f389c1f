"""The config's keys as one table: each declared once, where its typed attribute is.

A key is a field of a config dataclass (shuffler/config.py) made by :func:`key`: its
default, what it accepts (a :class:`Kind`: the words an error and the docs say, the
check, the conversion), one line of doc, and its TOML name and table where they are not
the attribute's own and its section's. A field made by :func:`section` is a table of
keys of its own (``[hand]``), by :func:`group` keys of its table that fill another
dataclass (``[mechanism] jam_limit_s`` is ``FaultLimits.jam_seconds``); a field made
otherwise is derived (the loader fills it in). From these fields :func:`rows` gives the
table (docs/render_config.py writes docs/config.md from it, a test checks the page)
and :func:`read` the typed config, each key checked once::

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Demo:
    ...     cards: int = key(24, whole(1, 104), "cards in the load")
    >>> def demo(doc): return read(Demo, Readers(Reader("f.toml", "top level", doc)), "demo")
    >>> demo({"demo": {"cards": 32}})
    Demo(cards=32)
    >>> demo({"demo": {"cards": 0}})
    Traceback (most recent call last):
    shuffler.errors.ConfigError: f.toml: [demo] cards: expected a whole number from 1 to 104, got 0
"""

from __future__ import annotations

import math
import os
import re
import reprlib
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from shuffler.errors import ConfigError

T = TypeVar("T")

_short = reprlib.Repr()  # values in messages: short, and safe however deep
_short.maxlevel, _short.maxstring, _short.maxother = 3, 60, 60


def _same(v: Any) -> Any:
    return v


class Kind:
    """What a key accepts: ``expected`` is what an error says it expected and the docs
    say it accepts, ``ok`` the check, ``convert`` what the checked value becomes."""

    # a plain class, not a dataclass: made at import, where a dataclass costs start-up
    __slots__ = ("convert", "expected", "ok")

    def __init__(self, expected: str, ok: Callable[[Any], bool],
                 convert: Callable[[Any], Any] = _same) -> None:
        self.expected, self.ok, self.convert = expected, ok, convert


def whole(lo: int, hi: int) -> Kind:
    return Kind(f"a whole number from {lo} to {hi}", lambda v: type(v) is int and lo <= v <= hi)


def whole_or_false(lo: int, hi: int, expected: str) -> Kind:
    """A whole number from ``lo`` to ``hi``, or false (a part not fitted): None."""
    return Kind(expected, lambda v: (type(v) is int and lo <= v <= hi) or v is False,
                lambda v: None if v is False else v)


def num(lo: float, hi: float) -> Kind:
    """A number from ``lo`` to ``hi``: never NaN or an infinity."""
    return Kind(f"a number from {lo} to {hi}",
                lambda v: type(v) in (int, float) and math.isfinite(v) and lo <= v <= hi, float)


FLAG = Kind("true or false", lambda v: type(v) is bool)


def choice(options: dict[str, Any]) -> Kind:
    return Kind(" or ".join(repr(o) for o in options), lambda v: v in options,
                options.__getitem__)


def text(expected: str, *, most: int = 256, pattern: re.Pattern[str] | None = None) -> Kind:
    """A printable text of 1 to ``most`` characters (matching ``pattern`` if given)."""
    return Kind(expected, lambda v: (isinstance(v, str) and 0 < len(v) <= most and v.isprintable()
                                     and (pattern is None or pattern.fullmatch(v) is not None)))


def path(expected: str = "a file path", *, most: int = 4095) -> Kind:
    """A path: no NUL byte, at most ``most`` bytes (107 for a Unix socket)."""
    return Kind(f"{expected} (1 to {most} bytes, no NUL)",
                lambda v: isinstance(v, str) and "\0" not in v and 0 < len(os.fsencode(v)) <= most,
                Path)


class _Decl:
    """A key's declaration beside its field: what it accepts, its doc (a callable for a
    doc made when the docs are: the device names, from the registry), its TOML name and
    table if not its field's and its section's, what the docs show where the default is
    not worth showing, and the default in words where it is not one value."""

    __slots__ = ("default_doc", "doc", "example", "kind", "name", "table")

    def __init__(self, kind: Kind, doc: str | Callable[[], str], name: str | None = None,
                 table: str | None = None, example: Any = None,
                 default_doc: str | None = None) -> None:
        self.kind, self.doc, self.name, self.table = kind, doc, name, table
        self.example, self.default_doc = example, default_doc


_KEY, _SECTION, _GROUP = "shuffler.key", "shuffler.section", "shuffler.group"


def key(default: T, kind: Kind, doc: str | Callable[[], str], *, name: str | None = None,
        table: str | None = None, example: Any = None, default_doc: str | None = None) -> T:
    """A config key as a dataclass field (see the module's doc)."""
    decl = _Decl(kind, doc, name, table, example, default_doc)
    made: Any = field(default=default, metadata={_KEY: decl})
    return made  # a Field, which the dataclass reads as this default


def section(cls: Callable[[], T], table: str) -> T:
    """A field holding the dataclass ``cls`` read from the TOML table ``table``."""
    made: Any = field(default_factory=cls, metadata={_SECTION: table})
    return made


def group(cls: Callable[[], T], **keys: _Decl) -> T:
    """A field holding ``cls`` made from keys of its section's table, by attribute of
    ``cls`` (whose own defaults they keep)."""
    made: Any = field(default_factory=cls, metadata={_GROUP: (cls, keys)})
    return made


def sub(kind: Kind, doc: str, *, name: str | None = None) -> _Decl:
    """A key of a :func:`group`."""
    return _Decl(kind, doc, name)


@dataclass(frozen=True)
class Row:
    """One key: ``[table] name``, the attribute it fills (``limits.jam_seconds``), its
    default, what it accepts and its doc."""

    table: str  # "" for the top level
    name: str
    attr: str
    default: Any
    kind: Kind
    decl: _Decl

    @property
    def doc(self) -> str:
        return self.decl.doc if isinstance(self.decl.doc, str) else self.decl.doc()

    @property
    def where(self) -> str:
        return f"[{self.table}] {self.name}" if self.table else self.name


def rows(cls: type, table: str = "") -> list[Row]:
    """Every key of ``cls`` (read from ``table``) and of its sections, in order."""
    found = []
    for f in fields(cls):
        if _KEY in f.metadata:
            decl = f.metadata[_KEY]
            found.append(Row(decl.table or table, decl.name or f.name, f.name, f.default,
                             decl.kind, decl))
        elif _SECTION in f.metadata:
            assert f.default_factory is not MISSING
            found += rows(f.default_factory, f.metadata[_SECTION])  # type: ignore[arg-type]
        elif _GROUP in f.metadata:
            inner, decls = f.metadata[_GROUP]
            defaults = {g.name: g.default for g in fields(inner)}
            found += [Row(table, d.name or a, f"{f.name}.{a}", defaults[a], d.kind, d)
                      for a, d in decls.items()]
    return found


class Reader:
    """Reads one table of the TOML document, checking each key once."""

    def __init__(self, source: str, table: str, data: Any) -> None:
        self.source, self.table = source, table
        if not isinstance(data, dict):
            self.fail(None, "a table", data)
        self.data = dict(data)
        self.given: set[str] = set()  # the keys the table set

    def fail(self, key: str | None, expected: str, got: Any) -> NoReturn:
        raise ConfigError(f"{self.source}: {self.where(key)}: expected {expected}, "
                          f"got {_short.repr(got)}")

    def where(self, key: str | None) -> str:
        table = "" if self.table == "top level" else f"[{self.table}]"
        return " ".join(p for p in (table, key) if p) or "top level"

    def get(self, key: str, default: Any, kind: Kind) -> Any:
        if key not in self.data:
            return default
        value = self.data.pop(key)
        self.given.add(key)
        try:
            good = kind.ok(value)
        except Exception:
            good = False
        if not good:
            self.fail(key, kind.expected, value)
        return kind.convert(value)

    def done(self) -> None:
        for key in self.data:
            raise ConfigError(f"{self.source}: {self.where(_short.repr(key).strip(chr(39)))}: "
                              "unknown key (misspelt?)")


class Readers(dict[str, Reader]):
    """A :class:`Reader` for the top level (``""``) and, once asked for, each table in it."""

    def __init__(self, top: Reader) -> None:
        super().__init__({"": top})

    def __missing__(self, table: str) -> Reader:
        top = self[""]
        made = self[table] = Reader(top.source, table, top.data.pop(table, {}))
        return made

    def done(self) -> None:
        for reader in [*[*self.values()][1:], self[""]]:  # the top level's last
            reader.done()


def read(cls: type[T], readers: Readers, table: str = "") -> T:
    """``cls`` from its keys (each checked, else a ConfigError naming it) and sections;
    derived fields keep their defaults."""
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if _KEY in f.metadata:
            decl = f.metadata[_KEY]
            values[f.name] = readers[decl.table or table].get(decl.name or f.name, f.default,
                                                              decl.kind)
        elif _SECTION in f.metadata:
            values[f.name] = read(f.default_factory, readers, f.metadata[_SECTION])  # type: ignore[arg-type]
        elif _GROUP in f.metadata:
            inner, decls = f.metadata[_GROUP]
            defaults = inner()
            values[f.name] = inner(**{a: readers[table].get(d.name or a, getattr(defaults, a),
                                                            d.kind) for a, d in decls.items()})
    return cls(**values)
