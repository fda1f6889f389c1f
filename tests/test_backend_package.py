"""CONTRIBUTING's backend recipe followed to the letter: a backend in a package of its own,
with its own pyproject naming it in ``shuffler.devices``, pip-installed into a venv beside
the project. The project's device lists, its config page and their tests stay as they
are (they compare the built-in backends), while the CLI offers the new one: in the
``--device`` help, in a bad device's error, and as a device a config may name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "shuffler-mine"
version = "1.0"
dependencies = ["shuffler"]

[project.entry-points."shuffler.devices"]
mine = "shuffler_mine.backend:MINE"
"""

BACKEND = '''\
"""A backend of its own: the simulated machine under another name."""
from shuffler.device.registry import Backend, Opening


def _open(o: Opening):
    from hardware_sim import SimDevice

    return SimDevice.for_cards(o.cards)


MINE = Backend("mine", _open, "a backend from a package of its own", simulated=True)
'''


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A venv with the project and the backend package pip-installed into it; the
    project's dependencies are this venv's (no network)."""
    tmp = tmp_path_factory.mktemp("beside")
    package = tmp / "mine"
    (package / "shuffler_mine").mkdir(parents=True)
    (package / "pyproject.toml").write_text(PYPROJECT)
    (package / "shuffler_mine" / "__init__.py").write_text("")
    (package / "shuffler_mine" / "backend.py").write_text(BACKEND)
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = next((env_dir / "lib").glob("python3*")) / "site-packages"
    python = env_dir / "bin" / "python"
    # the project as CONTRIBUTING installs it (its console scripts in this venv's bin, as
    # the tests run them), then the backend's package, each built as pip builds any
    for what in (["-e", str(ROOT)], [str(package)]):
        out = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                              "-q", "--no-deps", *what], capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
    # then the project's dependencies: this venv's site folder, with its .pth files
    here = sysconfig.get_paths()["purelib"]
    (site / "zz-beside.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    assert (site / "shuffler_mine").is_dir()  # installed here, not in the project's venv
    return python


def in_venv(python: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "SHUFFLER_CONFIG": "", "COLUMNS": "200"}
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_the_projects_device_and_config_tests_pass_beside_it(venv):
    seen = in_venv(venv, "-c", "from shuffler.device import registry; "
                               "print(registry.names())")
    assert "'mine'" in seen.stdout, seen.stderr
    tests = in_venv(venv, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                    "tests/test_registry.py", "tests/test_config.py", "tests/test_cli.py",
                    "tests/test_cli_options.py")
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    page = in_venv(venv, "docs/render_config.py", "--check")
    assert page.returncode == 0, page.stderr


def test_the_cli_offers_it(venv, tmp_path):
    shuffler = ["-m", "shuffler", "--no-service", "--state-dir", str(tmp_path / "state")]
    help_text = in_venv(venv, "-m", "shuffler", "--help").stdout
    assert "gpio, serial:PORT or mine" in " ".join(help_text.split())
    bad = in_venv(venv, *shuffler, "--json", "--device", "usb", "pass")
    assert bad.returncode == 2
    assert "serial:PORT or mine" in json.loads(bad.stdout)["error"]["message"]
    config = tmp_path / "c.toml"
    config.write_text('device = "mine"\n')
    ran = in_venv(venv, *shuffler, "--config", str(config), "--json", "pass")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["pass"]["counted"] == 24
