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
    """Ours are the built-in ones; a package installed beside may add more."""
    assert set(registry.builtin_names()) == set(declared()) <= set(registry.names())
    for backend in registry.builtin():
        assert isinstance(backend, registry.Backend)
        assert backend.summary and backend.name in declared()
    assert registry.backends()[:len(declared())] == registry.builtin()


def test_every_backend_package_has_one_shape():
    """Each of our backends is registered in its package's ``backend.py``, and the package
    holds its device in ``device.py``; no opener sits outside a backend package."""
    folders = {"shuffler": "shuffler", "hardware_sim": "hardware-sim",
               "firmware_bridge": "firmware_bridge"}
    for name, value in declared().items():
        module = value.partition(":")[0]
        assert module.endswith(".backend"), (name, value)
        package = module.removesuffix(".backend").split(".")
        folder = ROOT / folders[package[0]] / Path(*package[1:])
        assert (folder / "backend.py").is_file() and (folder / "device.py").is_file(), name
    assert not (ROOT / "shuffler" / "backends.py").exists()


def test_help_and_docs_name_every_device_as_the_registry_does():
    usage = registry.usage(registry.builtin())
    assert DEVICE_HELP.replace(" (default)", "", 1) == usage
    config_md = (ROOT / "docs" / "config.md").read_text()
    line = re.search(r'^device = "sim" +# (.*)$', config_md, re.M)
    assert line is not None
    shown = [b.usage if not b.argument else f'"{b.usage}"' for b in registry.builtin()]
    assert line.group(1) == " | ".join(shown)
    readme = (ROOT / "README.md").read_text()
    paragraph = readme[readme.index("Global options: `--device NAME`"):][:900]
    for backend in registry.builtin():
        assert f"`{backend.usage}`" in paragraph, backend.name


def test_an_unknown_device_is_refused_naming_every_known_one():
    with pytest.raises(BadInputError, match="unknown device 'usb': expected sim, "):
        registry.find("usb")
    with pytest.raises(BadInputError, match="expected serial:PORT"):
        registry.find("serial")
    with pytest.raises(BadInputError, match="takes no argument"):
        registry.find("sim:3")
    with pytest.raises(ConfigError, match=r"device: expected sim, .*, gpio,? (or )?serial:PORT"):
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
    env = {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_NO_SERVICE":
           "1"}
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


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A backend package installed beside ours, as CONTRIBUTING's recipe makes one: its
    own distribution's dist-info naming it in shuffler.devices, its module importable."""
    (tmp_path / "beside_backend.py").write_text(
        "from shuffler.device.registry import Backend\n"
        "def _open(o):\n"
        "    from hardware_sim import SimDevice\n"
        "    return SimDevice.for_cards(o.cards)\n"
        "ELSEWHERE = Backend('elsewhere', _open, 'from another package', simulated=True)\n")
    dist = tmp_path / "shuffler_elsewhere-1.0.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text(
        f"[{registry.GROUP}]\nelsewhere = beside_backend:ELSEWHERE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("beside_backend", None)


def test_a_package_beside_ours_changes_no_page_and_no_built_in_list(elsewhere):
    from shuffler_cli.options import device_help

    assert "elsewhere" in registry.names() and "elsewhere" not in registry.builtin_names()
    assert set(registry.builtin_names()) == set(declared())
    assert registry.usage(registry.builtin()) == DEVICE_HELP.replace(" (default)", "", 1)
    # the docs are the built-in ones: render_config --check still passes
    import importlib.util

    spec = importlib.util.spec_from_file_location("render_config",
                                                  ROOT / "docs" / "render_config.py")
    assert spec and spec.loader
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    assert page.render() == (ROOT / "docs" / "config.md").read_text()
    assert "elsewhere" not in page.render()
    # help and errors name it, after ours
    assert device_help().startswith(DEVICE_HELP.rpartition(" or ")[0])
    for said in (device_help(), registry.usage()):
        ours, _, theirs = said.partition("serial:PORT")  # after ours, whatever else is there
        assert "elsewhere" not in ours and "elsewhere" in theirs.replace(" or ", ", "), said


def test_a_package_beside_ours_is_in_the_device_help_and_a_config_may_name_it(
        elsewhere, tmp_path):
    help_text = CliRunner().invoke(cli, ["--help"], catch_exceptions=False).output
    assert "elsewhere" in " ".join(help_text.split())
    with pytest.raises(ConfigError, match=r"serial:PORT(, \S+)*( or \S+)?,? (or )?elsewhere"):
        load_config_text('device = "usb"', "t.toml")
    config = tmp_path / "c.toml"
    config.write_text('device = "elsewhere"\n')
    env = {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_NO_SERVICE": "1"}
    result = CliRunner().invoke(cli, ["--config", str(config), "--json", "status"], env=env,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    import json

    assert json.loads(result.output)["device"]["kind"] == "sim"


def test_opening_a_name_imports_only_its_backend():
    import subprocess

    code = ("import sys; from shuffler.config import load_config_text; "
            "from shuffler.device.registry import open_device; "
            "d = open_device('sim', load_config_text('', 't'), cards=24); d.close(); "
            "print(sorted(m for m in sys.modules if m.startswith(('firmware_bridge', "
            "'gpiozero', 'importlib.metadata'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_a_backend_opens_its_device_whole_with_nothing_patched_after():
    """Each simulated backend gives its device its kind, its seed rule and its close hook
    as arguments: no opener reaches into a device's private fields after construction."""
    import ast

    top = Path(__file__).resolve().parents[1]
    patched = []
    for folder in ("shuffler", "firmware_bridge", "hardware-sim", "cli"):
        for path in (top / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                targets = node.targets if isinstance(node, ast.Assign) else []
                for t in targets:
                    if (isinstance(t, ast.Attribute) and t.attr in ("_info", "on_close")
                            and not (isinstance(t.value, ast.Name) and t.value.id == "self")):
                        patched.append(f"{path.relative_to(top)}:{node.lineno}")
    assert patched == []
    for name, kind in (("sim-serial", "sim-serial"), ("sim-gpio", "sim-gpio")):
        from shuffler.device.registry import SimOptions, open_device

        dev = open_device(name, load_config_text(""), cards=24, sim=SimOptions(speed=50))
        try:
            assert (dev.info.kind, dev.info.accepts_seed) == (kind, True)
        finally:
            dev.close()



def test_an_entry_point_left_by_an_older_install_says_to_install_again(tmp_path,
                                                                         monkeypatch):
    """An editable install made before a backend moved names a module that is gone: one
    line saying so, not a traceback; a backend whose own dependency is missing keeps its
    error (it names the dependency)."""
    with pytest.raises(BadInputError, match=re.escape("run pip install -e . again")):
        registry._load("shuffler.backends:GPIO")  # where gpio's was before issue 37
    (tmp_path / "needs_a_library.py").write_text("import no_such_pin_library\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_pin_library"):
        registry._load("needs_a_library:MINE")
