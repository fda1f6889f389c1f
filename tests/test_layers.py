"""The layers hold: `lint-imports` (pyproject's [tool.importlinter] contracts) passes on
the tree, and breaks when a module of shuffler/ imports a backend or the CLI, or the
service its faces."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = str(Path(sys.executable).with_name("lint-imports"))
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
    "contracts"]


def lint(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT, "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def test_every_contract_is_kept():
    out = lint(ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in out.stdout


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The four packages under their import names, first on the path."""
    where = tmp_path_factory.mktemp("tree")
    for folder, name in [("shuffler", "shuffler"), ("cli", "shuffler_cli"),
                         ("hardware-sim", "hardware_sim"), ("firmware_bridge", "firmware_bridge")]:
        shutil.copytree(ROOT / folder, where / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", where)
    return where


@pytest.mark.parametrize("module, line, broken", [
    ("shuffler/store/state.py", "import hardware_sim", "shuffler imports no backend package"),
    ("shuffler/control/controller.py", "from firmware_bridge import link",
     "shuffler imports no backend"),
    ("shuffler/control/hand.py", "import shuffler_cli.render", "The CLI on top"),
    ("shuffler/service/loop.py", "from shuffler.faces import router",
     "The service does not import its faces"),
    ("shuffler/store/state.py", "from shuffler.control import hand", "The layers of shuffler"),
    ("shuffler/core/cards.py", "from shuffler import logs", "The pure core and the pass engine"),
    ("shuffler/device/contract.py", "from shuffler.device import engine", "No import cycle"),
])
def test_a_broken_layer_is_caught(copy, module, line, broken):
    path = copy / module
    before = path.read_text()
    path.write_text(before + f"\n{line}  # noqa\n")
    try:
        out = lint(copy, env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"})
    finally:
        path.write_text(before)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr
    summary = [row for row in out.stdout.splitlines() if row.startswith(broken[:30])]
    assert summary and "BROKEN" in " ".join(out.stdout.split(broken, 1)[1].split("\n")[:3]), \
        out.stdout[-3000:]


def test_only_the_controller_shows_the_dealer_anything():
    """Above the device, a light or a beep goes through ``PassController.show`` (which
    tells its ``on_show``, the service's faces): nothing calls a device's ``show`` past
    it, and nothing replaces it at run time."""
    called = re.compile(r"device\.show\s*\(|\.show\s*=[^=]")
    found = [f"{path.relative_to(ROOT)}: {line.strip()}"
             for folder in ("shuffler/control", "shuffler/service", "shuffler/faces", "cli")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for line in path.read_text().splitlines()
             if called.search(line.split("#")[0])]
    assert found == ["shuffler/control/controller.py: self.device.show(status)"], found
