"""The numbers every layer shares have one home (issue 48): shuffler/constants.py.

An exit code, the socket's protocol, the JSON schema's version, the load's limit or the
longest socket path or file assigned at the top of any other module (or an error class's
``exit_code`` written as a bare number) fails here, naming the file and the line; so does
a second literal of one exit code in the home itself. The documented numbers are held to
README's table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from shuffler import constants
from shuffler.errors import (
    BadInputError,
    DeviceError,
    LowBatteryError,
    OverVoltageError,
    ShufflerError,
)

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "shuffler" / "constants.py"
#: the trees of our code (tests may name what they check)
TREES = ("shuffler", "cli", "hardware-sim", "firmware_bridge", "benchmarks", "docs")
SHARED = {"PROTOCOL", "SCHEMA", "SCHEMA_VERSION", "MAX_CARDS", "SOCKET_PATH_BYTES",
          "MAX_FILE_BYTES"}


def shared(name: str) -> bool:
    return name in SHARED or name.startswith("EXIT_")


def assigned(tree: ast.Module) -> list[tuple[str, int]]:
    """The names a module assigns at its top level (an import is not an assignment)."""
    found: list[tuple[str, int]] = []
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    found.append((leaf.id, node.lineno))
    return found


def sources() -> list[Path]:
    return [p for tree in TREES for p in sorted((ROOT / tree).rglob("*.py"))
            if ".venv" not in p.parts and "build" not in p.parts]


def bare_exits(tree: ast.Module) -> list[tuple[int, str]]:
    """An exit code written as a number where a reply or an error is made: a dict's
    ``"exit": 3`` (or ``0 if ok else 3``), a call's ``exit_code=3``."""
    found = []
    for node in ast.walk(tree):
        values = []
        if isinstance(node, ast.Dict):
            values = [v for k, v in zip(node.keys, node.values, strict=True)
                      if isinstance(k, ast.Constant) and k.value == "exit"]
        elif isinstance(node, ast.Call):
            values = [k.value for k in node.keywords if k.arg == "exit_code"]
        for value in values:
            if any(isinstance(c, ast.Constant) and type(c.value) is int
                   for c in ast.walk(value)):
                found.append((value.lineno, ast.unparse(value)))
    return found


def second_homes(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Every top-level assignment of a shared name outside the home, every class
    attribute ``exit_code = <number>`` and every bare exit code in a reply
    (:func:`bare_exits`), as ``file:line name``."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(root)
        if path != HOME:
            found += [f"{where}:{line} {name}" for name, line in assigned(tree) if shared(name)]
        found += [f"{where}:{line} exit {text}" for line, text in bare_exits(tree)]
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
                            and any(isinstance(t, ast.Name) and t.id == "exit_code"
                                    for t in stmt.targets)):
                        found.append(f"{where}:{stmt.lineno} exit_code = {stmt.value.value}")
    return found


def test_each_shared_constant_is_defined_once():
    assert second_homes(sources()) == []


def test_the_check_finds_a_second_definition(tmp_path):
    """The walk sees each way a second home is written (else the test above proves nothing)."""
    stray = tmp_path / "stray.py"
    stray.write_text("EXIT_FAULT = 3\nA, MAX_CARDS = 1, 104\nPROTOCOL: int = 1\n"
                     "class E(Exception):\n    exit_code = 2\n"
                     "from shuffler.constants import SCHEMA, EXIT_OK\n"
                     "R = {'error': {'kind': 'x', 'exit': 2}}\n"
                     "S = {'exit': EXIT_OK if R else 3}\n"
                     "T = ShufflerError('x', exit_code=3)\n"
                     "U = {'exit': EXIT_OK, 'kind': 'exit'}\n", encoding="utf-8")
    assert sorted(second_homes([stray], tmp_path)) == [
        "stray.py:1 EXIT_FAULT", "stray.py:2 MAX_CARDS", "stray.py:3 PROTOCOL",
        "stray.py:5 exit_code = 2", "stray.py:7 exit 2", "stray.py:8 exit EXIT_OK if R else 3",
        "stray.py:9 exit 3"]


def test_each_exit_code_is_written_once_in_its_home():
    """In the home an exit code's number is written once; another name for it refers to
    the first (EXIT_SYSTEM is EXIT_FAULT), so no two names drift apart."""
    literals: list[int] = []
    for node in ast.parse(HOME.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(leaf, ast.Name) and leaf.id.startswith("EXIT_")
                for t in node.targets for leaf in ast.walk(t)):
            literals += [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)]
    assert sorted(literals) == sorted(set(literals)) == [0, 1, 2, 3, 4]


def test_the_documented_exit_codes():
    """README's table names the codes the constants hold, and each error says its own."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Exit codes")[1].split("\n\n")[1]
    rows = dict(re.findall(r"^\| (\d) \| (.+?) \|$", table, re.M))
    assert sorted(int(code) for code in rows) == [
        constants.EXIT_OK, constants.EXIT_BUG, constants.EXIT_USAGE, constants.EXIT_FAULT,
        constants.EXIT_BATTERY] == [0, 1, 2, 3, 4]
    assert "usage or bad input" in rows[str(constants.EXIT_USAGE)]
    assert "low battery" in rows[str(constants.EXIT_BATTERY)]
    assert (ShufflerError.exit_code, BadInputError.exit_code, DeviceError.exit_code,
            LowBatteryError.exit_code, OverVoltageError.exit_code) == (1, 2, 3, 4, 4)
