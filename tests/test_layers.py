"""The layers hold: `lint-imports` (pyproject's [tool.importlinter] contracts) passes on
the tree, and breaks when a module of shuffler/ imports a backend or the CLI, or the
service its faces."""

from __future__ import annotations

import ast
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
    ("shuffler/faces/router.py", "from shuffler.device import contract",
     "The faces see the service through its port"),
    ("shuffler/faces/router.py", "from shuffler.control import prompts",
     "The faces see the service through its port"),
    ("shuffler/faces/telemetry.py", "from shuffler.config import MqttConfig",
     "The faces see the service through its port"),
    ("shuffler/faces/pairing.py", "from shuffler.store.state import atomic_write",
     "The faces see the service through its port"),
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


def test_the_faces_reach_the_service_through_its_port_only():
    """``hub.Hub`` is the config, the state folder, the score, a touch and a request: no
    face holds the session (and through it the controller and the device)."""
    from shuffler.service.hub import Hub

    assert "session" not in Hub.__annotations__ and not hasattr(Hub, "session")
    found = [f"{path.relative_to(ROOT)}: {line.strip()}"
             for path in sorted((ROOT / "shuffler/faces").rglob("*.py"))
             for line in path.read_text().splitlines()
             if re.search(r"\.session\b|\.controller\b|\.device\b", line.split("#")[0])]
    assert found == [], found


# -- one typed bus ------------------------------------------------------------------------

def untyped_publishes(source: str, events: set[str]) -> list[str]:
    """Every ``.publish(...)`` call in ``source`` that is not one event: two arguments
    (``publish(kind, body)``), a keyword, a dict, a string, or a call that builds no
    type of ``events`` (a name bound to one is let through: mypy checks it)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "publish":
            arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
            built = isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) \
                and arg.func.id in events
            if not (built or isinstance(arg, ast.Name)):
                found.append(ast.unparse(node))
    return found


def matched_types(function: ast.FunctionDef) -> set[str]:
    """The classes a function's ``match`` statements take apart."""
    return {case.pattern.cls.id for node in ast.walk(function) if isinstance(node, ast.Match)
            for case in node.cases
            if isinstance(case.pattern, ast.MatchClass) and isinstance(case.pattern.cls, ast.Name)}


def test_the_checker_finds_a_dict_publish():
    bad = ('self.publish("status", snapshot)\nself.publish({"event": "card"})\n'
           'self.publish("signal")\nhub.publish(event=StateChanged(s))\n'
           'self.publish(dict(status=s))\n')
    assert len(untyped_publishes(bad, {"StateChanged"})) == 5
    assert untyped_publishes("self.publish(StateChanged(s))\nself.publish(told)\n",
                             {"StateChanged"}) == []


def test_the_service_publishes_typed_events_and_every_face_matches_on_their_types():
    """One bus (issue 37): the service publishes only the frozen types of
    shuffler/service/events.py, never ``publish(kind, body)`` or a dict; every callback a
    face subscribes is a ``match`` over those types (no sniffing of a result's keys)."""
    import dataclasses
    import typing

    from shuffler.service import events, hub

    members = typing.get_args(events.Event)
    assert all(dataclasses.is_dataclass(t) and t.__dataclass_params__.frozen  # type: ignore[attr-defined]
               for t in members)
    names = {t.__name__ for t in members}
    hints = typing.get_type_hints(hub.Publisher.publish, vars(events))
    assert hints["event"] == events.Event
    callback = typing.get_type_hints(hub.Publisher.subscribe, vars(hub))["callback"]
    assert typing.get_args(callback)[0] == [events.Event]
    found = [f"{path.relative_to(ROOT)}: {call}"
             for folder in ("shuffler/service", "shuffler/control")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for call in untyped_publishes(path.read_text(), names)]
    assert found == [], found
    # every face's subscriber: a match over event types, and nothing else it could sniff
    faces = {path: ast.parse(path.read_text())
             for path in sorted((ROOT / "shuffler/faces").rglob("*.py"))}
    defs = {node.name: node for tree in faces.values() for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef)}
    subscribed = [ast.unparse(call.args[0]).rsplit(".", 1)[-1]
                  for tree in faces.values() for call in ast.walk(tree)
                  if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                  and call.func.attr == "subscribe"
                  and ast.unparse(call.func.value) in ("service", "self.service", "hub")]
    assert {"on_publish", "hear"} <= set(subscribed), subscribed
    for name in subscribed:
        function = defs[name]
        params = [a for a in function.args.args if a.arg != "self"]
        assert [ast.unparse(a.annotation) for a in params if a.annotation] == ["Event"], name
        told = matched_types(function)
        assert told and told <= names, (name, told)
