"""What the wheel promises: a licence, types, our own package names, a clean mypy."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

def test_licence_classifiers_and_extras():
    project = PROJECT["project"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert "License :: OSI Approved :: MIT License" in project["classifiers"]
    assert any(dep.startswith("lgpio") for dep in project["optional-dependencies"]["pi"])
    assert project["scripts"]["shuffler"] == "shuffler_cli.start:main"


#: the package folders and the names they install under ([tool.setuptools.package-dir])
FOLDERS: dict[str, str] = PROJECT["tool"]["setuptools"]["package-dir"]


def test_no_top_level_package_called_cli():
    tool = PROJECT["tool"]["setuptools"]
    assert "packages" not in tool, "setuptools finds the packages: a list would be forgotten"
    assert "cli" not in FOLDERS and FOLDERS["shuffler_cli"] == "cli"
    assert FOLDERS["hardware_sim"] == "hardware-sim"
    for folder in ("shuffler", "cli", "hardware-sim", "firmware_bridge"):
        assert (ROOT / folder / "py.typed").exists()


def _installed_modules() -> list[Path]:
    """Every module the wheel installs: each .py under the four folders."""
    return sorted(path for folder in FOLDERS.values() for path in (ROOT / folder).rglob("*.py"))


def test_mypy_checks_every_installed_package_under_its_own_name():
    """mypy maps no folder to a package name: .typecheck/ links each renamed one."""
    for name, folder in FOLDERS.items():
        if name != folder:
            assert (ROOT / ".typecheck" / name).resolve() == ROOT / folder
            assert f".typecheck/{name}" in PROJECT["tool"]["mypy"]["files"]


def test_mypy_is_clean_on_the_whole_installed_tree():
    """Exactly what a bare ``mypy`` checks with the pyproject config: CI fails on a type
    error anywhere in the wheel (mypy's own cache keeps a re-run to seconds)."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"no issues found in {len(_installed_modules())} source files" in proc.stdout


def test_every_package_folder_is_in_the_wheel(tmp_path):
    """No package list to forget: a wheel built (by pip, as a user would) from a copy of
    the tree, with a new subpackage added to each of the four folders, holds every module
    and data file of every folder under its installed name, the new ones too."""
    tree = tmp_path / "tree"
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        tree.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, tree / name)
    for folder in FOLDERS.values():
        shutil.copytree(ROOT / folder, tree / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
        (tree / folder / "added_later").mkdir()
        (tree / folder / "added_later" / "__init__.py").write_text('"""new."""\n')
    expected = {f"{name}/{path.relative_to(tree / folder).as_posix()}"
                for name, folder in FOLDERS.items()
                for path in (tree / folder).rglob("*") if path.is_file()}
    assert "shuffler_cli/added_later/__init__.py" in expected
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                           str(tmp_path / "dist"), str(tree)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = (tmp_path / "dist").glob("shuffler-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        missing = expected - set(zf.namelist())
    assert not missing, f"not in the wheel: {sorted(missing)}"


def test_the_version_is_written_once():
    import shuffler

    project = PROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "shuffler.__version__"}
    from importlib.metadata import version

    assert version("shuffler") == shuffler.__version__
