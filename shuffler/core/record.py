"""Frozen result records: a dataclass whose fields are its JSON object's keys, in order.

One name for one thing: a field is called what the JSON calls it (a keyword takes a
trailing underscore: ``pass_`` is ``"pass"``). :meth:`Record.to_json` is the one way to
JSON: nested records become objects, tuples arrays, enums their values, a
fraction a float. A field whose metadata is :data:`OMIT_NONE` is left
out while None; one marked :data:`SPREAD` (a mapping) spreads its keys where it stands.

    >>> from dataclasses import dataclass, field
    >>> @dataclass(frozen=True)
    ... class Lap(Record):
    ...     pass_: int
    ...     piles: tuple[int, int]
    ...     note: str | None = field(default=None, metadata=OMIT_NONE)
    >>> Lap(2, (12, 12)).to_json()
    {'pass': 2, 'piles': [12, 12]}
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, fields
from numbers import Rational
from typing import Any

#: a field's metadata: left out of the JSON while None
OMIT_NONE: Mapping[str, bool] = {"omit_none": True}
#: a field's metadata: a mapping whose keys stand in the object where the field does
SPREAD: Mapping[str, bool] = {"spread": True}


@dataclass(frozen=True)
class Record:
    """A frozen result whose fields are its JSON object's keys, in the schema's order."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("spread"):
                out.update({k: to_json(v) for k, v in value.items()})
            elif value is not None or not f.metadata.get("omit_none"):
                out[key(f.name)] = to_json(value)
        return out


def key(name: str) -> str:
    """The JSON key of a field: its name, a keyword's trailing underscore dropped."""
    return name.removesuffix("_")


def to_json(value: Any) -> Any:
    """``value`` as JSON takes it."""
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Rational) and not isinstance(value, int):  # a Fraction
        return float(value)
    if isinstance(value, tuple | list):
        return [to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    return value
