"""Render shuffler/schemas/*.json into docs/json.md (``--check``: fail if it is stale).

    .venv/bin/python docs/render_json.py          # rewrite docs/json.md
    .venv/bin/python docs/render_json.py --check  # exit 1 if docs/json.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from shuffler.schemas import SCHEMA_VERSION, load, names

PAGE = Path(__file__).resolve().parent / "json.md"

INTRO = f"""# JSON reference

Generated from `shuffler/schemas/*.json` by `docs/render_json.py`: edit the schemas,
then run `.venv/bin/python docs/render_json.py`. A test fails while this page is stale.

## The contract

- Every `--json` output is one JSON object on stdout with `"schema": {SCHEMA_VERSION}`, the
  version of these schemas. A breaking change (a key renamed, removed or retyped) bumps
  it; a new optional key does not.
- Every failure with `--json`, usage and config errors included, prints
  `{{"schema": {SCHEMA_VERSION}, "error": {{"kind": ..., "message": ..., "exit": ...}}}}` on stdout
  (schema `error`); `kind` is a slug (`usage`, `config`, `bad_input`, `busy`,
  `fault_latched`, `low_battery`, `service_not_running`, ...), `exit` the process's exit
  code. A command stopped half-way keeps what it did: `pass_reports` lists the passes
  that ran.
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


def type_of(s: dict[str, Any]) -> str:
    if "$ref" in s:
        target = s["$ref"].rsplit("/", 1)[-1].removesuffix(".json")
        return f"[{target}](#defs-{target.replace('_', '-')})"
    if "const" in s:
        return f"`{s['const']!r}`".replace("True", "true").replace("False", "false")
    if "enum" in s:
        return " \\| ".join(f"`{v}`" for v in s["enum"])
    if "anyOf" in s:
        return " or ".join(type_of(x) for x in s["anyOf"])
    t = s.get("type", "any")
    if t == "array":
        return f"list of {type_of(s.get('items', {}))}"
    if t == "integer" and "minimum" in s:
        return f"integer ≥ {s['minimum']}"
    return str(t)


def rows(s: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    required = set(s.get("required", []))
    for key, sub in s.get("properties", {}).items():
        inner = next((x for x in sub.get("anyOf", []) if x.get("type") == "object"), sub)
        desc = sub.get("description") or next(
            (x["description"] for x in sub.get("anyOf", []) if "description" in x), "")
        kind = "object" if inner.get("type") == "object" and "properties" in inner \
            else type_of(sub)
        if sub is not inner:
            kind += " or null"
        need = "yes" if key in required else ""
        out.append(f"| `{prefix}{key}` | {kind} | {need} | {desc} |")
        if inner.get("type") == "object" and "properties" in inner:
            out.extend(rows(inner, f"{prefix}{key}."))
    return out


def section(name: str, s: dict[str, Any], level: str = "###") -> list[str]:
    lines = [f"{level} {name}", ""]
    if s.get("title"):
        lines += [s["title"] + (f": {s['description']}" if s.get("description") else "."), ""]
    elif s.get("description"):
        lines += [s["description"], ""]
    if "oneOf" in s:
        for i, alt in enumerate(s["oneOf"], 1):
            lines += [f"One of ({i}):", "", *table(alt), ""]
    elif "properties" in s:
        lines += [*table(s), ""]
    else:
        lines += [f"Type: {type_of(s)}", ""]
    return lines


def table(s: dict[str, Any]) -> list[str]:
    return ["| key | type | required | meaning |", "| --- | --- | --- | --- |", *rows(s)]


def render() -> str:
    lines = [INTRO, "## Outputs and messages", ""]
    for name in names():
        if name != "defs":
            lines += section(name, load(name))
    lines += ["## Shared definitions (defs.json)", ""]
    for name, s in load("defs")["$defs"].items():
        lines += section(f"defs: {name}", s)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is stale: run .venv/bin/python docs/render_json.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
