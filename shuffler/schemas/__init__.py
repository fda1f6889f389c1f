"""JSON Schemas of every ``--json`` output and every socket message (docs/json.md).

One file per output, named after the command (``hand.json``) or the socket message
(``request.json``, ``reply.json``, ``event.json``, ``greeting.json``); shared parts in
``defs.json``. :func:`validate` needs the ``jsonschema`` package (the ``test`` extra),
imported only when called, so the run-time set stays small.

With ``SHUFFLER_CHECK_SCHEMAS=1`` in the environment (the test suite sets it) the CLI
checks every JSON object it prints, and the client every message it reads, and a
mismatch is an error: so every JSON output the suite produces is validated.
"""

from __future__ import annotations

import json
import os
from functools import cache
from importlib import resources
from typing import Any

BASE_URI = "https://schemas.shuffler.invalid/v1/"
CHECK_ENV = "SHUFFLER_CHECK_SCHEMAS"


class SchemaMismatch(AssertionError):
    """An object does not match its schema (a bug in the producer, or in the schema)."""


def names() -> list[str]:
    """Every schema's name (its file name without ``.json``)."""
    folder = resources.files(__package__)
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def load(name: str) -> dict[str, Any]:
    """The schema called ``name``; FileNotFoundError if there is none."""
    text = resources.files(__package__).joinpath(f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry: Registry = Registry().with_resources(
        (BASE_URI + f"{n}.json", Resource.from_contents(load(n))) for n in names())
    schema = load(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry)


def validate(obj: Any, name: str) -> Any:
    """Check ``obj`` against schema ``name`` (an object with an ``error`` key against
    ``error``); returns ``obj``, raises :class:`SchemaMismatch` naming every problem."""
    if isinstance(obj, dict) and "error" in obj and "ok" not in obj:
        name = "error"
    try:
        validator = _validator(name)
    except FileNotFoundError:
        raise SchemaMismatch(f"no schema called {name!r}: add shuffler/schemas/{name}.json "
                             "(see docs/json.md)") from None
    problems = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    if problems:
        lines = [f"  at /{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in problems]
        raise SchemaMismatch(f"JSON does not match schema {name!r}:\n" + "\n".join(lines))
    return obj


def checking() -> bool:
    return os.environ.get(CHECK_ENV, "") not in ("", "0")


def check(obj: Any, name: str) -> None:
    """:func:`validate`, when ``SHUFFLER_CHECK_SCHEMAS`` asks for it."""
    if checking():
        validate(obj, name)
