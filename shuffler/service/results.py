"""What a command answers, frozen: the dispatcher's return (:class:`Result`) and every
JSON object the bus carries (:func:`freeze`). Nothing handed from the machine to a face
can be changed by it under another face's feet; JSON is made only at the edges (the
socket, the CLI's output, the page, MQTT) with :meth:`Result.to_json` or :func:`thaw`.

    >>> r = Result("stop", {"stopped": True})
    >>> r["stopped"], r.to_json()
    (True, {'stopped': True})
    >>> r.body["stopped"] = False
    Traceback (most recent call last):
    ...
    TypeError: 'mappingproxy' object does not support item assignment
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

#: a JSON object that cannot change: its objects read-only mappings, its arrays tuples
Frozen = Mapping[str, Any]


def freeze(value: Any) -> Any:
    """``value`` (JSON-ready) with every object a read-only mapping, every array a tuple."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A frozen value as JSON takes it again: dicts and lists, in the same order."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True, eq=True)
class Result:
    """One command's answer: the schema it keeps (``shuffler/schemas/<schema>.json``, the
    command's ``Command.schema``) and its object, frozen."""

    schema: str
    body: Frozen

    def __post_init__(self) -> None:
        object.__setattr__(self, "body", freeze(self.body))

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.body.get(key, default)

    @property
    def exit(self) -> int:
        """The exit code it means for the CLI (0 when it names none)."""
        return int(self.body.get("exit", 0))

    def to_json(self) -> dict[str, Any]:
        """The object as the socket sends it and ``--json`` prints it."""
        return thaw(self.body)
