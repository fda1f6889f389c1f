"""The ``mypy --strict`` ratchet: the count of its errors on the typed tree never rises
above the one recorded here, and the modules pyproject lets keep an untyped def still
have one (a module typed since comes off the list, so it stays typed)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # mypy on the whole tree: ten seconds of CPU without a cache

ROOT = Path(__file__).resolve().parents[1]
#: the errors ``mypy --strict`` finds today; lower it when you fix some, never raise it
STRICT_ERRORS = 111


def ini(value: object) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


def strict_config(folder: Path) -> Path:
    """pyproject's [tool.mypy] without the modules let off untyped defs (an override
    outranks ``--strict``), as a mypy.ini: what ``--strict`` counts is the whole tree."""
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    lines = ["[mypy]", *(f"{key} = {ini(value)}" for key, value in mypy.items()
                         if key != "overrides")]
    for override in mypy["overrides"]:
        if "disallow_untyped_defs" not in override:
            lines += [f"[mypy-{','.join(override['module'])}]",
                      *(f"{key} = {ini(value)}" for key, value in override.items()
                        if key != "module")]
    path = folder / "mypy.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


def strict_errors(folder: Path) -> list[str]:
    # a cache of its own: the strict options would invalidate the plain run's
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file",
                           str(strict_config(folder)),
                           "--cache-dir", str(ROOT / ".mypy_cache" / "strict")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if ": error: " in line]


@pytest.fixture(scope="module")
def errors(tmp_path_factory) -> list[str]:
    return strict_errors(tmp_path_factory.mktemp("mypy"))


def test_the_strict_error_count_never_rises(errors):
    assert len(errors) <= STRICT_ERRORS, (
        f"mypy --strict: {len(errors)} errors, {len(errors) - STRICT_ERRORS} more than the "
        f"{STRICT_ERRORS} recorded (tests/test_mypy_strict.py); type what you added:\n"
        + "\n".join(errors))


def module_of(path: str) -> str:
    return re.sub(r"\.py$", "", path.removeprefix(".typecheck/")).replace("/", ".").removesuffix(
        ".__init__")


def test_every_module_allowed_an_untyped_def_still_has_one(errors):
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"][
        "overrides"]
    allowed = {module for o in overrides if o.get("disallow_untyped_defs") is False
               for module in o["module"]}
    untyped = {module_of(line.split(":")[0]) for line in errors if "[no-untyped-def]" in line}
    assert allowed, "pyproject's [tool.mypy] override for untyped defs is gone"
    typed_now = sorted(allowed - untyped)
    assert not typed_now, (f"{typed_now} have no untyped def now: take them off the "
                           "disallow_untyped_defs = false list in pyproject.toml")
