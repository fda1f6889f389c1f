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


def test_every_package_folder_is_in_the_wheel():
    """A subpackage left out of [tool.setuptools] packages would silently miss the wheel."""
    tool = PROJECT["tool"]["setuptools"]
    listed = set(tool["packages"])
    for name in listed:
        folder = ROOT / tool["package-dir"].get(name.split(".")[0], name.split(".")[0])
        for init in folder.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            sub = init.parent.relative_to(folder).parts
            assert ".".join((name.split(".")[0], *sub)) in listed, init


def test_the_version_is_written_once():
    import shuffler

    project = PROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "shuffler.__version__"}
    from importlib.metadata import version

    assert version("shuffler") == shuffler.__version__
