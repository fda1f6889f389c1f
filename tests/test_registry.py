"""The device registry: every device name declared once (pyproject's shuffler.devices
entry points), help and docs checked against it, and a new backend added by
registering a name without touching the core."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from hardware_sim import SimDevice
from shuffler.config import load_config_text
from shuffler.device import registry
from shuffler.device.clock import VirtualClock
from shuffler.errors import BadInputError, ConfigError
from shuffler_cli.main import cli
from shuffler_cli.options import DEVICE_HELP

ROOT = Path(__file__).resolve().parents[1]


def declared() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["entry-points"][registry.GROUP]


def test_the_registry_holds_what_pyproject_declares():
    assert set(registry.names()) == set(declared())
    for backend in registry.backends():
        assert isinstance(backend, registry.Backend)
        assert backend.summary and backend.name in declared()


def test_help_and_docs_name_every_device_as_the_registry_does():
    usage = registry.usage()
    assert DEVICE_HELP.replace(" (default)", "", 1) == usage
    config_md = (ROOT / "docs" / "config.md").read_text()
    line = re.search(r'^device = "sim" +# (.*)$', config_md, re.M)
    assert line is not None
    shown = [b.usage if not b.argument else f'"{b.usage}"' for b in registry.backends()]
    assert line.group(1) == " | ".join(shown)
    readme = (ROOT / "README.md").read_text()
    paragraph = readme[readme.index("Global options: `--device NAME`"):][:900]
    for backend in registry.backends():
        assert f"`{backend.usage}`" in paragraph, backend.name


def test_an_unknown_device_is_refused_naming_every_known_one():
    with pytest.raises(BadInputError, match="unknown device 'usb': expected sim, "):
        registry.find("usb")
    with pytest.raises(BadInputError, match="expected serial:PORT"):
        registry.find("serial")
    with pytest.raises(BadInputError, match="takes no argument"):
        registry.find("sim:3")
    with pytest.raises(ConfigError, match=r"device: expected sim, .* or serial:PORT"):
        load_config_text('device = "usb"', "t.toml")


@pytest.fixture
def throwaway():
    opened = []

    def open_it(o: registry.Opening) -> SimDevice:
        opened.append(o)
        return SimDevice.for_cards(o.cards, clock=VirtualClock())

    registry.register(registry.Backend("throwaway", open_it, "a test's device",
                                       simulated=True))
    yield opened
    registry.unregister("throwaway")


def test_a_backend_registered_by_name_is_a_device_everywhere(throwaway, tmp_path):
    env = {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_SOCKET":
           str(tmp_path / "none.sock")}
    config = tmp_path / "c.toml"
    config.write_text('device = "throwaway"\n')
    result = CliRunner().invoke(cli, ["--config", str(config), "--sim-seed", "3", "--json",
                                      "pass"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert len(throwaway) == 1 and throwaway[0].sim.seed == 3 and throwaway[0].cards == 24
    assert "throwaway" in registry.usage()


def test_a_backend_from_another_packages_entry_point(tmp_path, monkeypatch):
    (tmp_path / "elsewhere_backend.py").write_text(
        "from shuffler.device.registry import Backend\n"
        "def _open(o):\n    raise RuntimeError('not opened in this test')\n"
        "ELSEWHERE = Backend('elsewhere', _open, 'from another package', argument='WHERE')\n")
    dist = tmp_path / "elsewhere-1.0.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text(
        "[console_scripts]\nnot-a-device = x:y\n\n"
        f"[{registry.GROUP}]\nelsewhere = elsewhere_backend:ELSEWHERE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "elsewhere" in registry.names() and "not-a-device" not in registry.names()
    backend, argument = registry.find("elsewhere:here")
    assert backend.name == "elsewhere" and argument == "here"
    assert "elsewhere:WHERE" in registry.usage()
    monkeypatch.delitem(sys.modules, "elsewhere_backend")


def test_opening_a_name_imports_only_its_backend():
    import subprocess

    code = ("import sys; from shuffler.config import load_config_text; "
            "from shuffler.backends import open_device; "
            "d = open_device('sim', load_config_text('', 't'), cards=24); d.close(); "
            "print(sorted(m for m in sys.modules if m.startswith(('firmware_bridge', "
            "'gpiozero', 'importlib.metadata'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
