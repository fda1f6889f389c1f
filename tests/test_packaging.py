"""What the wheel promises: a licence, types, our own package names, a clean mypy."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

def test_licence_classifiers_and_extras():
    project = PROJECT["project"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert "License :: OSI Approved :: MIT License" in project["classifiers"]
    assert any(dep.startswith("lgpio") for dep in project["optional-dependencies"]["pi"])
    assert project["scripts"]["shuffler"] == "shuffler_cli.start:main"


def test_no_top_level_package_called_cli():
    tool = PROJECT["tool"]["setuptools"]
    assert "cli" not in tool["packages"] and tool["package-dir"]["shuffler_cli"] == "cli"
    for folder in ("shuffler", "cli", "hardware-sim", "firmware_bridge"):
        assert (ROOT / folder / "py.typed").exists()


def _installed_modules() -> list[Path]:
    """Every module the wheel installs, from the folders [tool.setuptools] maps."""
    tool = PROJECT["tool"]["setuptools"]
    folders = {tool["package-dir"].get(name, name.replace(".", "/")) for name in tool["packages"]}
    return sorted(path for folder in folders for path in (ROOT / folder).glob("*.py"))


def test_mypy_checks_every_installed_package_under_its_own_name():
    """mypy maps no folder to a package name: .typecheck/ links each renamed one."""
    tool = PROJECT["tool"]["setuptools"]
    for name, folder in tool["package-dir"].items():
        assert (ROOT / ".typecheck" / name).resolve() == ROOT / folder
        assert f".typecheck/{name}" in PROJECT["tool"]["mypy"]["files"]


def test_mypy_is_clean_on_the_whole_installed_tree():
    """Exactly what a bare ``mypy`` checks with the pyproject config: CI fails on a type
    error anywhere in the wheel (mypy's own cache keeps a re-run to seconds)."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"no issues found in {len(_installed_modules())} source files" in proc.stdout
