"""What a command answers, frozen: the dispatcher's return (:class:`Result`), its body a
record of :mod:`shuffler.control.reports` (the score's, a JSON object made read-only by
:func:`freeze`). Nothing handed from the machine to a face can be changed by it under
another face's feet; JSON is made only at the edges (the socket, the CLI's output, the
page, MQTT) with :meth:`Result.to_json`, a record's ``to_json`` or :func:`thaw`.

    >>> r = Result("score", {"score": None})
    >>> r.to_json()
    {'score': None}
    >>> r.body["score"] = 1
    Traceback (most recent call last):
    ...
    TypeError: 'mappingproxy' object does not support item assignment
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from shuffler.core.record import Record
from shuffler.core.record import to_json as thaw  # a frozen value as JSON takes it again

#: a JSON object that cannot change: its objects read-only mappings, its arrays tuples
#: (the score's, which has no record)
Frozen = Mapping[str, Any]


def freeze(value: Any) -> Any:
    """``value`` (JSON-ready) with every object a read-only mapping, every array a tuple."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


@dataclass(frozen=True, eq=True)
class Result:
    """One command's answer: the schema it keeps (``shuffler/schemas/<schema>.json``, the
    command's ``Command.schema``) and its record (the score's object, frozen)."""

    schema: str
    body: Record | Frozen

    def __post_init__(self) -> None:
        if not isinstance(self.body, Record):
            object.__setattr__(self, "body", freeze(self.body))

    def to_json(self) -> dict[str, Any]:
        """The object as the socket sends it and ``--json`` prints it."""
        body = self.body
        return body.to_json() if isinstance(body, Record) else thaw(body)
