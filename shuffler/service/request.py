"""A socket request, declared once: every field and every rule between fields, from
which both the service's check (:func:`check`) and the published schema
(``shuffler/schemas/request.json``, :func:`schema`) come, as ``firmware_bridge/messages.py``
declares the wire. A test checks the file against :func:`schema` and that the two
accept the same requests; ``python -m shuffler.service.request`` rewrites the file.

Every field but ``cmd`` may be left out or sent as null: both mean its default.

    >>> check({"cmd": "pass", "cards": 32})["cards"]
    32
    >>> try:
    ...     check({"cmd": "score", "makers": 1})
    ... except RequestError as e:
    ...     print(e)
    score: give both makers and tricks, or neither to read the score
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shuffler.constants import MAX_CARDS
from shuffler.errors import BadInputError
from shuffler.service.machine import COMMANDS

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "schemas" / "request.json"


class RequestError(BadInputError):
    """A request the service will not run; the connection stays open."""

    def __init__(self, message: str, kind: str = "bad_request") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Field:
    name: str
    #: "int" (from lo to hi), "choice" (one of choices), "bool", "text" (lo to hi
    #: characters) or "names" (two texts of lo to hi characters)
    kind: str
    lo: int = 0
    hi: int = 0
    choices: tuple[str, ...] = ()
    default: Any = None
    description: str = ""

    def expected(self) -> str:
        return {"int": f"a whole number from {self.lo} to {self.hi}",
                "choice": " or ".join(self.choices),
                "bool": "true or false",
                "text": f"a text of {self.lo} to {self.hi} characters",
                "names": f"two team names of {self.lo} to {self.hi} characters"}[self.kind]

    def good(self, value: Any) -> bool:
        if self.kind == "int":
            # JSON Schema's integer is any number without a fraction (2.0 is 2)
            whole = type(value) is int or (type(value) is float and value.is_integer())
            return whole and self.lo <= value <= self.hi
        if self.kind == "choice":
            return value in self.choices
        if self.kind == "bool":
            return type(value) is bool
        if self.kind == "text":
            return isinstance(value, str) and self.lo <= len(value) <= self.hi
        return (isinstance(value, list) and len(value) == 2
                and all(isinstance(n, str) and self.lo <= len(n) <= self.hi for n in value))

    def read(self, req: dict[str, Any]) -> Any:
        value = req.get(self.name)
        if value is None:
            return self.default
        if not self.good(value):
            raise RequestError(f"{self.name}: expected {self.expected()}, got {value!r}")
        return int(value) if self.kind == "int" else value

    def schema(self) -> dict[str, Any]:
        shapes: dict[str, dict[str, Any]] = {
            "int": {"type": "integer", "minimum": self.lo, "maximum": self.hi},
            "choice": {"enum": list(self.choices)},
            "bool": {"type": "boolean"},
            "text": {"type": "string", "minLength": self.lo, "maxLength": self.hi},
            "names": {"type": "array", "minItems": 2, "maxItems": 2,
                      "items": {"type": "string", "minLength": self.lo,
                                "maxLength": self.hi}},
        }
        one = shapes[self.kind]
        out: dict[str, Any] = {"anyOf": [one, {"type": "null"}]}
        if self.description:
            out["description"] = self.description
        return out


FIELDS = (
    Field("cards", "int", 1, MAX_CARDS),
    Field("passes", "int", 1, 30),
    Field("mode", "choice", choices=("planned", "coin")),
    Field("makers", "int", 0, 1),
    Field("tricks", "int", 0, 5),
    Field("alone", "bool", default=False),
    Field("first_dealer", "text", 1, 64),
    Field("version", "int", 0, 10**9, description=(
        "score, undo, redo, new_game: the version of the score this change was made against "
        "(score.version); another version is refused with stale_score. The page always sends "
        "it; without it the change applies to the current score")),
    Field("hand", "int", 1, 10_000, description=(
        "score: the hand (1 is the first of the game) to edit (with makers and tricks) or "
        "delete (with delete); without it makers and tricks score the next hand")),
    Field("delete", "bool", default=False,
          description="score: delete the hand named by hand"),
    Field("renege", "int", 0, 1, description=(
        "score: the team caught reneging; the other side scores 2 (the house rule) and the "
        "tricks do not count")),
    Field("target", "int", 1, 100, description=(
        "score (alone: change the game's target), new_game: the points that win the game "
        "(10, 11, 15 or 21 on the page)")),
    Field("names", "names", 1, 32, description=(
        "score (alone: rename the teams), new_game: the teams' names on screen, team 0 first")),
    Field("replace", "bool", default=True, description=(
        "new_game: false refuses to replace a game with hands scored and no winner unless the "
        "request names its version (remote commands)")),
)


@dataclass(frozen=True)
class Rule:
    """If the request has ``when`` (field: value, or field: a type for "given"), it must
    have ``then`` given too; ``message`` says so."""

    when: dict[str, Any]
    then: str
    message: str

    def holds(self, req: dict[str, Any]) -> bool:
        applies = all(req.get(k) is not None if v is Given else req.get(k) == v
                      for k, v in self.when.items())
        return not applies or req.get(self.then) is not None

    def schema(self) -> dict[str, Any]:
        props = {k: {"type": "integer"} if v is Given else {"const": v}
                 for k, v in self.when.items()}
        return {"if": {"properties": props, "required": list(self.when)},
                "then": {"properties": {self.then: {"not": {"type": "null"}}},
                         "required": [self.then]}}


class Given:
    """In a :class:`Rule`'s ``when``: the field is given (not null)."""


_BOTH = "score: give both makers and tricks, or neither to read the score"
RULES = (
    Rule({"cmd": "score", "makers": Given}, "tricks", _BOTH),
    Rule({"cmd": "score", "tricks": Given}, "makers", _BOTH),
    Rule({"delete": True}, "hand", "delete: name the hand to delete"),
)


def check(req: Any) -> dict[str, Any]:
    """The request with every field (defaults filled in), or RequestError saying what
    is wrong with it."""
    if not isinstance(req, dict):
        raise RequestError("not a JSON object: send one JSON object per line")
    cmd = req.get("cmd")
    if cmd not in COMMANDS:
        raise RequestError(f"cmd: expected {', '.join(COMMANDS)}, got {cmd!r}")
    known = {"cmd", *(f.name for f in FIELDS)}
    if unknown := sorted(str(k) for k in req if k not in known):
        raise RequestError(f"{unknown[0]}: not a field of a request (they are "
                           f"{', '.join(sorted(known))})")
    out: dict[str, Any] = {"cmd": cmd, **{f.name: f.read(req) for f in FIELDS}}
    for rule in RULES:
        if not rule.holds(req):
            raise RequestError(rule.message)
    return out


def schema() -> dict[str, Any]:
    """shuffler/schemas/request.json, as declared here."""
    props: dict[str, Any] = {"cmd": {"enum": list(COMMANDS)}}
    props.update({f.name: f.schema() for f in FIELDS})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://schemas.shuffler.invalid/v1/request.json",
            "title": "socket: a request", "type": "object", "properties": props,
            "required": ["cmd"], "additionalProperties": False,
            "allOf": [rule.schema() for rule in RULES]}


def render() -> str:
    return json.dumps(schema(), indent=2) + "\n"


if __name__ == "__main__":  # rewrite shuffler/schemas/request.json from this declaration
    SCHEMA_FILE.write_text(render(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}", file=sys.stderr)
