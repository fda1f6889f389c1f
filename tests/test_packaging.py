"""What the wheel promises: a licence, types, our own package names, a clean mypy."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

def test_licence_extras_and_scripts():
    """The licence as an SPDX expression (setuptools 77 and later; the table form and
    the licence classifiers are deprecated, and a build warns of them), a build
    requirement bounded above, and both commands on the CLI's side."""
    project = PROJECT["project"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert not any(c.startswith("License ::") for c in project["classifiers"])
    (requirement,) = PROJECT["build-system"]["requires"]
    assert re.fullmatch(r"setuptools>=(7[7-9]|[89]\d),<\d+", requirement), requirement
    assert any(dep.startswith("lgpio") for dep in project["optional-dependencies"]["pi"])
    assert project["scripts"] == {"shuffler": "shuffler_cli.start:main",
                                  "shuffler-safe": "shuffler_cli.safe:main",
                                  "shuffler-setup": "shuffler_cli.installer.main:main"}


def test_no_install_registers_the_tests_pin_factory():
    """shuffler-kept is the test tree's (tests/pins), not every install's."""
    from importlib.metadata import distribution

    assert "gpiozero_pin_factories" not in PROJECT["project"].get("entry-points", {})
    groups = {ep.group for ep in distribution("shuffler").entry_points}
    assert groups == {"console_scripts", "shuffler.devices"}


def test_the_tests_pin_factory_is_found_only_by_the_processes_given_its_folder(tmp_path):
    from tests.kept import kept_pins_env

    code = ("from gpiozero import Device\n"
            "try:\n    Device.ensure_pin_factory()\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n"
            "else:\n    print(type(Device.pin_factory).__name__)\n")
    env = {**os.environ, "SHUFFLER_KEPT_PINS": str(tmp_path / "pins.json")}
    env.pop("PYTHONPATH", None)
    seen = subprocess.run([sys.executable, "-c", code], env=kept_pins_env(env), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert seen.strip() == "KeptPinFactory"
    bare = subprocess.run([sys.executable, "-c", code],
                          env={**env, "GPIOZERO_PIN_FACTORY": "shuffler-kept"}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert bare.strip() == "BadPinFactory Unable to find pin factory 'shuffler-kept'"


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


#: the .typecheck links are a checkout's: an sdist cannot carry a link to a folder
#: (setuptools would copy the whole package under the link's name)
checkout_links = pytest.mark.skipif(not (ROOT / ".typecheck").is_dir(),
                                    reason="no .typecheck links: not a checkout (an sdist)")


@checkout_links
def test_mypy_checks_every_installed_package_under_its_own_name():
    """mypy maps no folder to a package name: .typecheck/ links each renamed one."""
    for name, folder in FOLDERS.items():
        if name != folder:
            assert (ROOT / ".typecheck" / name).resolve() == ROOT / folder
            assert f".typecheck/{name}" in PROJECT["tool"]["mypy"]["files"]


@pytest.mark.slow
@checkout_links
def test_mypy_is_clean_on_the_whole_installed_tree():
    """Exactly what a bare ``mypy`` checks with the pyproject config: CI fails on a type
    error anywhere in the wheel (mypy's own cache keeps a re-run to seconds)."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"no issues found in {len(_installed_modules())} source files" in proc.stdout


def _firmware_sources(firmware: Path) -> list[Path]:
    """The firmware's sources, the package data sim-avr builds (not its build/)."""
    return sorted(p for p in firmware.rglob("*") if p.is_file() and p.name != ".gitignore"
                  and "build" not in p.relative_to(firmware).parts)


@pytest.mark.slow
def test_every_package_folder_is_in_the_wheel(tmp_path):
    """No package list to forget: a wheel built (by pip, as a user would) from a copy of
    the tree, with a new subpackage added to each of the four folders, holds every module
    and data file of every folder under its installed name, the new ones too, and the
    firmware's sources (hardware-sim/firmware links to firmware/), a new one too."""
    tree = tmp_path / "tree"
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "build_commit.py"):
        tree.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "firmware", tree / "firmware",
                    ignore=shutil.ignore_patterns("build"))
    (tree / "firmware" / "added_later.c").write_text("/* new */\n")
    for folder in FOLDERS.values():
        shutil.copytree(ROOT / folder, tree / folder, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        (tree / folder / "added_later").mkdir()
        (tree / folder / "added_later" / "__init__.py").write_text('"""new."""\n')
    assert (tree / "hardware-sim" / "firmware").is_symlink()
    expected = {f"{name}/{path.relative_to(tree / folder).as_posix()}"
                for name, folder in FOLDERS.items()
                for path in (tree / folder).rglob("*")
                if path.is_file() and "firmware" not in path.relative_to(tree / folder).parts}
    expected |= {f"hardware_sim/firmware/{p.relative_to(tree / 'firmware').as_posix()}"
                 for p in _firmware_sources(tree / "firmware")}
    assert "shuffler_cli/added_later/__init__.py" in expected
    assert {"hardware_sim/firmware/Makefile", "hardware_sim/firmware/added_later.c",
            "hardware_sim/firmware/harness/harness.c"} <= expected
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                           str(tmp_path / "dist"), str(tree)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = (tmp_path / "dist").glob("shuffler-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    missing = expected - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert not [n for n in names if "/build/" in n or n.endswith(".o")]


def test_the_version_is_written_once():
    import shuffler

    project = PROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "shuffler.__version__"}
    from importlib.metadata import version

    assert version("shuffler") == shuffler.__version__


# What a release builds (`python -m build`), and what a user does with it.

#: what a copy of the tree to build leaves out: a checkout's own, never shipped
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", "build",
                                    "dist", ".axe", ".pytest_cache", ".ruff_cache",
                                    ".mypy_cache")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path, str]:
    """The sdist, the wheel (which `build` makes from the sdist) and what the build said,
    from a copy of the tree, in an environment that writes bytecode as a user's does."""
    tmp = tmp_path_factory.mktemp("built")
    tree = tmp / "tree"
    shutil.copytree(ROOT, tree, symlinks=True, ignore=NOT_COPIED)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-m", "build", "-o", str(tmp / "dist"), str(tree)],
                          capture_output=True, text=True, env=env, timeout=900)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-5000:]
    (sdist,) = (tmp / "dist").glob("shuffler-*.tar.gz")
    (wheel,) = (tmp / "dist").glob("shuffler-*.whl")
    return sdist, wheel, said


@pytest.mark.slow
def test_the_build_warns_of_nothing(built):
    """No deprecation (the licence table, the licence classifiers), no file left out
    or missing from the manifest, nothing to fix before setuptools drops it."""
    said = built[2]
    warned = [line for line in said.splitlines()
              if re.search(r"(?i)warn|deprecat|no (previously-included )?(files|directories)"
                           r" found|not found", line)
              and not re.match(r"\s*(copying|adding|hard linking) ", line)]
    assert not warned, "\n".join(warned)


def _sdist_names(sdist: Path) -> set[str]:
    import tarfile

    with tarfile.open(sdist) as tf:
        top = f"{sdist.name.removesuffix('.tar.gz')}/"
        return {m.name.removeprefix(top) for m in tf.getmembers() if m.isfile()}


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_the_sdist_carries_every_file_git_tracks_and_nothing_built(built):
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True,
                                 text=True, check=True).stdout.split())
    links = {".typecheck/hardware_sim", ".typecheck/shuffler_cli", "hardware-sim/firmware",
             "cli/deploy"}
    names = _sdist_names(built[0])
    missing = tracked - names - links - {".gitignore", "firmware/.gitignore"}
    assert not missing, f"not in the sdist: {sorted(missing)}"
    for needed in ("docs/deploy/shuffler.service", "docs/deploy/99-shuffler.rules",
                   "docs/deploy/config.toml", "firmware/Makefile", "tests/conftest.py",
                   "tests/pins/shuffler_test_pins-0.dist-info/entry_points.txt"):
        assert needed in names, needed
    # the link's files, copied: the wheel built from the sdist has the firmware
    firmware = {n.removeprefix("firmware/") for n in tracked if n.startswith("firmware/")}
    shipped = {n.removeprefix("hardware-sim/firmware/") for n in names
               if n.startswith("hardware-sim/firmware/")}
    assert shipped == firmware - {".gitignore"}
    extra = {n for n in names - tracked if not n.startswith((
        "hardware-sim/firmware/", "cli/deploy/", "shuffler.egg-info/"))
        and n not in ("PKG-INFO", "setup.cfg")}
    assert not extra, f"in the sdist but not tracked: {sorted(extra)}"
    with zipfile.ZipFile(built[1]) as zf:
        assert "hardware_sim/firmware/Makefile" in zf.namelist()
        # shuffler-setup's files (cli/deploy links to docs/deploy)
        assert {f"shuffler_cli/deploy/{name}" for name in (
            "shuffler.service", "network.conf", "serial.conf", "99-shuffler.rules",
            "60-gpiochip.rules", "config.toml")} <= set(zf.namelist())


def _venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    return where / "bin"


def _pip(bin_dir: Path, *what: str) -> None:
    proc = subprocess.run([str(bin_dir / "pip"), "install", "-q", *what], capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _user_env(tmp: Path, bin_dir: Path) -> dict[str, str]:
    """A user's environment: this venv's bin first, a home and an empty system root of
    the test's own, none of the suite's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(
        ("SHUFFLER_", "PYTHON", "XDG_", "NOTIFY_SOCKET", "WATCHDOG", "VIRTUAL_ENV"))}
    (tmp / "system-root").mkdir(exist_ok=True)
    return {**env, "PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp / "home"),
            "SHUFFLER_SYSTEM_ROOT": str(tmp / "system-root"),
            "XDG_CACHE_HOME": str(tmp / "cache"), "XDG_STATE_HOME": str(tmp / "state"),
            "XDG_CONFIG_HOME": str(tmp / "config"), "XDG_RUNTIME_DIR": str(tmp / "run")}


#: the quick tests that read the tree most (docs, firmware, schema, drawings, README); the
#: rest of the suite is collected against the installed package, not run a second time (the
#: contract's 162 tests took 44 s in a worker; the sdist carries every file git tracks: above)
SDIST_RUNS = ("tests/test_readme.py", "tests/test_docs_drift.py",
              "tests/test_docs_runnable.py", "tests/test_doctests.py",
              "tests/test_build_docs.py", "tests/test_firmware.py",
              "tests/test_json_schema.py", "tests/test_drawings.py", "tests/test_tiers.py")


@pytest.mark.slow
def test_the_sdist_installed_collects_every_test_and_passes_those_reading_its_files(
        built, tmp_path):
    """`pip install` of the sdist with its test extra, then its tests from the unpacked
    sdist: the whole tree collects against the installed package, and the quick tests
    that read docs, firmware and schema from it pass."""
    import tarfile

    bin_dir = _venv(tmp_path / "venv")
    _pip(bin_dir, f"{built[0]}[test]")
    with tarfile.open(built[0]) as tf:
        tf.extractall(tmp_path, filter="data")
    unpacked = tmp_path / built[0].name.removesuffix(".tar.gz")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    pytest_in_sdist = [str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    collected = subprocess.run([*pytest_in_sdist, "--collect-only", "tests"], cwd=unpacked,
                               env=env, capture_output=True, text=True, timeout=600)
    assert collected.returncode == 0, collected.stdout[-6000:] + collected.stderr[-2000:]
    here = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--collect-only", "tests"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert collected.stdout.splitlines()[-1].split(" in ")[0] == \
        here.stdout.splitlines()[-1].split(" in ")[0]  # as many tests as the checkout's
    proc = subprocess.run([*pytest_in_sdist, "-m", "not slow", *SDIST_RUNS], cwd=unpacked,
                          env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1] and "failed" not in proc.stdout


def _have_avr_toolchain() -> bool:
    return bool(shutil.which("avr-gcc") and shutil.which("make")
                and Path("/usr/include/simavr").is_dir())


@pytest.mark.slow
def test_the_wheel_outside_the_checkout_runs_a_hand_serves_the_page_and_sim_avr(
        built, tmp_path):
    """The wheel in a fresh venv (its dependencies as pip brings them), run from a folder
    that is not the checkout: a hand, `serve` with the dealer's page, shuffler-safe, and
    the firmware in simavr built from the wheel's own sources in the user's cache."""
    import json
    import socket
    import time
    import urllib.request

    bin_dir = _venv(tmp_path / "venv")
    _pip(bin_dir, str(built[1]))
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = _user_env(tmp_path, bin_dir)

    def shuffler(*args: str, name: str = "shuffler") -> subprocess.CompletedProcess:
        return subprocess.run([str(bin_dir / name), *args], cwd=away, env=env,
                              capture_output=True, text=True, timeout=300)

    where = shuffler("--version", name="shuffler-safe")
    assert where.returncode == 0 and where.stdout.startswith("shuffler-safe ")
    hand = shuffler("--json", "hand")
    assert hand.returncode == 0, hand.stderr
    assert json.loads(hand.stdout)["hand"]["passes"]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "config.toml"
    config.write_text(f"[web]\nenabled = true\nport = {port}\n")
    sock = tmp_path / "s.sock"
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        serve = subprocess.Popen([str(bin_dir / "shuffler"), "--config", str(config),
                                  "--socket", str(sock), "serve"], cwd=away, env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert serve.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
                    body = page.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        assert "<html" in body.lower() and page.status == 200
        status = shuffler("--json", "--socket", str(sock), "status")
        assert status.returncode == 0, status.stderr
    finally:
        serve.terminate()
        serve.wait(30)

    site = next((tmp_path / "venv" / "lib").glob("python3*")) / "site-packages"
    firmware = site / "hardware_sim" / "firmware"
    assert (firmware / "Makefile").is_file() and not firmware.is_symlink()
    if _have_avr_toolchain():
        avr = shuffler("--json", "--device", "sim-avr", "pass")
        assert avr.returncode == 0, avr.stdout + avr.stderr
        assert json.loads(avr.stdout)["pass"]["counted"] == 24
        built_in = list((tmp_path / "cache" / "shuffler").glob("firmware-*/shuffler.elf"))
        assert built_in, "the firmware is built in the user's cache"
        assert not (firmware / "build").exists()  # not in the installed package
    # the sources gone (a broken install): the error names them, not the toolchain
    shutil.rmtree(firmware)
    broken = shuffler("--device", "sim-avr", "pass")
    assert broken.returncode == 3, broken.stderr
    assert "sources are not installed" in broken.stderr and "gcc-avr" not in broken.stderr
    assert "Traceback" not in broken.stderr
