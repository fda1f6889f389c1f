"""Render shuffler/schemas/*.json into docs/json.md (``--check``: fail if it is stale).

    .venv/bin/python docs/render_json.py          # rewrite docs/json.md
    .venv/bin/python docs/render_json.py --check  # exit 1 if docs/json.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from shuffler.constants import SCHEMA as SCHEMA_VERSION
from shuffler.schemas import load, names

PAGE = Path(__file__).resolve().parent / "json.md"

INTRO = f"""# JSON reference

Generated from `shuffler/schemas/*.json` by `docs/render_json.py`: edit the schemas,
then run `.venv/bin/python docs/render_json.py`. A test fails while this page is stale.

## The contract

- Every `--json` output is one JSON object on stdout with `"schema": {SCHEMA_VERSION}`, the
  version of these schemas. A breaking change (a key renamed, removed or retyped) bumps
  it; a new optional key does not.
- Every failure with `--json`, usage and config errors included, prints one shape on
  stdout, `{{"schema": {SCHEMA_VERSION}, "error": {{"kind": ..., "message": ..., "exit": ...}}}}`
  ([error](#error)), and nothing on stderr; `kind` is one of the [error kinds](#error-kinds),
  `exit` the process's exit code. A command that failed after doing something keeps what
  it did: `pass_reports` lists the passes that ran (a jam or a low battery mid-hand, a
  touch that never came), and a `pass` or `hand` that ended in a fault (a jam: exit 3,
  `error.kind` `"jam"`) has its own report beside them. A hand that finished despite a
  double feed is no failure: exit 0, its report names the degraded pass.
- `seconds` in a `pass_report` is machine time: how long the mechanism ran, on the
  device's own clock (the simulator's simulated time at any `--sim-speed`; on `sim-avr`
  the chip's timer, which runs in real time while `--sim-speed` quickens its cards).
- One name for one thing: a distance from random is `distance` (`coin_distance`,
  `planned_distance` when both are shown); a count of passes is `passes` (a number);
  a list of passes is `pass_reports`, each a `pass_report`; a fault is a `fault`
  object (`kind`, `message`, `card`) wherever it appears: `status.fault` is the latched
  one, `status.health.device_fault` what the device itself reports now.
- The service's socket speaks JSON lines: a `greeting`, then a `request` per line from
  the client; the service answers with `event`s while a pass runs and one `reply`, whose
  `result` is the command's output below (without `schema`, with `exit`).

## Adding an output

1. Write `shuffler/schemas/NAME.json` (JSON Schema 2020-12, `$id`
   `https://schemas.shuffler.invalid/v1/NAME.json`, shared parts by
   `"$ref": "defs.json#/$defs/..."`). For a CLI command NAME is the command's name:
   the CLI checks every object it prints against the schema of the command that
   printed it.
2. Run `.venv/bin/python docs/render_json.py` and commit the page with the schema.
3. In tests, check what you read: `from shuffler.schemas import validate` then
   `validate(obj, "NAME")` (returns `obj`; raises naming every mismatch; an object with
   an `error` key is checked against `error`). The suite sets
   `SHUFFLER_CHECK_SCHEMAS=1` (tests/conftest.py), so the CLI and the socket client
   already check everything they print or read, in subprocesses too; an output with no
   schema fails there.
"""


def anchor(ref: str) -> str:
    """The page's anchor for a ``$ref``: ``defs.json#/$defs/fault`` -> ``defs-fault``,
    ``hand.json#/properties/hand`` -> ``hand``."""
    target, _, pointer = ref.partition("#")
    name = target.removesuffix(".json")
    if name in ("", "defs") and pointer.startswith("/$defs/"):
        return "defs-" + pointer.rsplit("/", 1)[-1].replace("_", "-")
    return name.replace("_", "-")


def link(ref: str) -> str:
    target, _, pointer = ref.partition("#")
    label = pointer.rsplit("/", 1)[-1] if pointer else target.removesuffix(".json")
    return f"[{label}](#{anchor(ref)})"


def is_object(s: dict[str, Any]) -> bool:
    return s.get("type") == "object" and "properties" in s


def type_of(s: dict[str, Any]) -> str:
    if "$ref" in s:
        return link(s["$ref"])
    if "const" in s:
        return f"`{s['const']!r}`".replace("True", "true").replace("False", "false")
    if "enum" in s:
        return " \\| ".join(f"`{v}`" for v in s["enum"])
    if "anyOf" in s:
        kinds: list[str] = []
        for x in s["anyOf"]:
            kind = "object" if is_object(x) else type_of(x)
            if kind not in kinds:
                kinds.append(kind)
        return " or ".join(kinds)
    t = s.get("type", "any")
    if isinstance(t, list):
        return " or ".join(t)
    if t == "array":
        items = s.get("items", {})
        return f"list of {'objects' if is_object(items) else type_of(items)}"
    if t == "integer" and "minimum" in s:
        return f"integer ≥ {s['minimum']}"
    return str(t)


def describe(sub: dict[str, Any]) -> str:
    return sub.get("description") or next(
        (x["description"] for x in sub.get("anyOf", []) if "description" in x), "")


#: the ``schema`` key of a command's output: on stdout always, in a socket reply never
SCHEMA_KEY = ("on stdout", "always with `--json`; a socket reply's `result` leaves it out")


def rows(s: dict[str, Any], prefix: str = "", need: dict[str, str] | None = None,
         command: bool = False) -> list[str]:
    """One row per key, and one per key of every object inside: an object's keys as
    ``key.inner``, a list's items' keys as ``key[].inner``."""
    out = []
    required = set(s.get("required", []))
    for key, sub in s.get("properties", {}).items():
        meaning = describe(sub)
        if key in required:
            must = "yes"
        elif command and not prefix and key == "schema":
            must, meaning = SCHEMA_KEY
        else:
            must = (need or {}).get(key, "")
        kind = "object" if is_object(sub) else type_of(sub)
        out.append(f"| `{prefix}{key}` | {kind} | {must} | {meaning} |")
        inner = sub if is_object(sub) else next(
            (x for x in sub.get("anyOf", []) if is_object(x)), None)
        if inner is not None:
            out.extend(rows(inner, f"{prefix}{key}."))
        items = sub.get("items", {})
        if sub.get("type") == "array" and is_object(items):
            out.extend(rows(items, f"{prefix}{key}[]."))
    return out


def section(name: str, s: dict[str, Any], ident: str, level: str = "###") -> list[str]:
    lines = [f'<a id="{ident}"></a>', "", f"{level} {name}", ""]
    if s.get("title"):
        lines += [s["title"] + (f": {s['description']}" if s.get("description") else "."), ""]
    elif s.get("description"):
        lines += [s["description"], ""]
    if "oneOf" in s and "properties" in s:  # one set of keys, alternatives of what is required
        lines += [*table(s, alternatives(s["oneOf"])), "",
                  "One of: " + "; ".join(
                      f"({i}) " + ", ".join(f"`{k}`" for k in alt.get("required", []))
                      for i, alt in enumerate(s["oneOf"], 1)) + ".", ""]
    elif "oneOf" in s:
        for i, alt in enumerate(s["oneOf"], 1):
            lines += [f"One of ({i}):", "", *table(alt), ""]
    elif "properties" in s:
        lines += [*table(s), ""]
    elif s.get("type") == "array" and is_object(s.get("items", {})):
        lines += ["A list; each item:", "", *table(s["items"]), ""]
    else:
        lines += [f"Type: {type_of(s)}", ""]
    return lines


def alternatives(one_of: list[dict[str, Any]]) -> dict[str, str]:
    """For keys under a top-level ``oneOf`` of required lists: the required column,
    ``in (2)`` for a key the second alternative requires."""
    need: dict[str, list[str]] = {}
    for i, alt in enumerate(one_of, 1):
        for key in alt.get("required", []):
            need.setdefault(key, []).append(f"({i})")
    return {key: "in " + ", ".join(which) for key, which in need.items()}


def table(s: dict[str, Any], need: dict[str, str] | None = None) -> list[str]:
    """``need``: the required column of keys an alternative requires. A command's
    output (titled ``shuffler COMMAND``) says where its ``schema`` key is."""
    command = str(s.get("title", "")).startswith("shuffler ")
    return ["| key | type | required | meaning |", "| --- | --- | --- | --- |",
            *rows(s, need=need or {}, command=command)]


def error_kinds() -> list[str]:
    from shuffler.errors import ERROR_KINDS

    lines = ['<a id="error-kinds"></a>', "", "## Error kinds", "",
             "`error.kind` is one of these, and nothing else (the schema's enum; "
             "`shuffler.errors.ERROR_KINDS`):", "", "| kind | meaning |", "| --- | --- |"]
    lines += [f"| `{kind}` | {meaning} |" for kind, meaning in ERROR_KINDS.items()]
    return [*lines, ""]


def render() -> str:
    lines = [INTRO, *error_kinds(), "## Outputs and messages", ""]
    for name in names():
        if name != "defs":
            lines += section(name, load(name), anchor(f"{name}.json"))
    lines += ["## Shared definitions (defs.json)", ""]
    for name, s in load("defs")["$defs"].items():
        lines += section(f"defs: {name}", s, anchor(f"defs.json#/$defs/{name}"))
    return "\n".join(lines).rstrip() + "\n"


def publish(page: Path, text: str, script: str, argv: list[str]) -> int:
    """Write ``text`` to ``page``; with ``--check`` in ``argv`` only compare (1: stale).
    docs/render_config.py writes its page so too."""
    if "--check" in argv:
        if page.read_text(encoding="utf-8") != text:
            print(f"{page} is stale: run .venv/bin/python {script}", file=sys.stderr)
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    return 0


def main() -> int:
    return publish(PAGE, render(), "docs/render_json.py", sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
