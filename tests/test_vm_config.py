"""tests/vm/config.toml is the shipped config with only marked values changed.

The VM tier installs it as /etc/shuffler/config.toml: it must load, hold every key of
docs/deploy/config.toml, and differ from it only on lines that say ``# VM:`` and why
(with the shipped value in brackets), so the scenarios test the shipped machine with
slower timings, not another machine.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from shuffler.config import load_config_text

ROOT = Path(__file__).resolve().parents[1]
VM = ROOT / "tests" / "vm" / "config.toml"
SHIPPED = ROOT / "docs" / "deploy" / "config.toml"


def flat(doc: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            out |= flat(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out


def marked_lines(text: str) -> dict[str, str]:
    """``table.key`` -> its line, for every line that assigns a key."""
    table, out = "", {}
    for line in text.splitlines():
        if m := re.match(r"^\[([a-z_]+)\]", line):
            table = m.group(1) + "."
        elif m := re.match(r"^([a-z_]+)\s*=", line):
            out[table + m.group(1)] = line
    return out


def test_the_vm_config_loads_and_changes_only_marked_values():
    text = VM.read_text()
    load_config_text(text, str(VM))  # refused values (a flap too slow, a bad key) fail here
    vm, shipped = flat(tomllib.loads(text)), flat(tomllib.loads(SHIPPED.read_text()))
    lines = marked_lines(text)
    assert set(shipped) <= set(vm), set(shipped) - set(vm)
    changed = {k for k in vm if shipped.get(k, object()) != vm[k]}
    assert changed, "the VM config is the shipped one: then the tier needs no file of its own"
    for key in changed:
        assert "# VM: " in lines[key], f"{key}: changed from the shipped config without a # VM: why"
    for key, line in lines.items():
        if "# VM: " in line:
            assert key in changed, f"{key} is marked # VM: but has the shipped value"
