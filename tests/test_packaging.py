"""What the wheel promises: a licence, types, our own package names, a clean mypy."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: modules whose types are checked here with nothing ignored (the CLI's contract);
#: the rest of the tree is checked by the whole-tree run below once it is clean
OWN = ["cli/main.py", "cli/app.py", "cli/options.py", "cli/commands.py", "cli/render.py",
       "shuffler/client.py", "shuffler/lock.py", "shuffler/reports.py",
       "shuffler/schemas/__init__.py"]


def test_licence_classifiers_and_extras():
    project = PROJECT["project"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert "License :: OSI Approved :: MIT License" in project["classifiers"]
    assert any(dep.startswith("lgpio") for dep in project["optional-dependencies"]["pi"])
    assert project["scripts"]["shuffler"] == "shuffler_cli.main:main"


def test_no_top_level_package_called_cli():
    tool = PROJECT["tool"]["setuptools"]
    assert "cli" not in tool["packages"] and tool["package-dir"]["shuffler_cli"] == "cli"
    for folder in ("shuffler", "cli", "hardware-sim", "firmware_bridge"):
        assert (ROOT / folder / "py.typed").exists()


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is in the test extra: pip install -e '.[test]'")
def test_mypy_is_clean_on_the_cli_and_its_contract():
    proc = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", *OWN],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout
