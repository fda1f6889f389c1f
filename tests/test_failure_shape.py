"""One failure shape: every command that fails prints `error` (a documented kind) and
keeps the passes it ran under `pass_reports`, in-process and through the service alike."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import shuffler
from shuffler.errors import ERROR_KINDS, ShufflerError, class_kind, error_kind
from shuffler.schemas import load, validate
from shuffler_cli.main import cli
from tests.served import Service

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--sim-speed", "1000000"]



def failure(result) -> dict:
    obj = validate(json.loads(result.stdout), "error")
    assert obj["error"]["exit"] == result.exit_code != 0
    assert obj["error"]["kind"] in ERROR_KINDS
    assert result.stderr == ""  # --json: nothing said twice
    return obj


def test_the_schema_allows_exactly_the_documented_kinds():
    kinds = load("defs")["$defs"]["error"]["properties"]["kind"]["enum"]
    assert kinds == sorted(ERROR_KINDS)


def every_error_class() -> list[type]:
    import firmware_bridge
    import shuffler_cli

    for package in (shuffler, firmware_bridge, shuffler_cli):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith(("__main__", "pwm_chip")):
                importlib.import_module(info.name)
    found, todo = [], [ShufflerError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [c for c in found if c is not ShufflerError]


def test_every_error_class_has_a_documented_kind():
    for cls in every_error_class():
        own = cls.__dict__.get("kind")
        kind = own if isinstance(own, str) else class_kind(cls)
        if "kind" in inspect.signature(cls.__init__).parameters:
            continue  # the kind is given where it is raised (listed: test below)
        assert kind in ERROR_KINDS, f"{cls.__module__}.{cls.__name__}: add {kind!r}"


def test_every_kind_written_in_the_code_is_documented():
    written = set()
    for folder in ("shuffler", "firmware_bridge", "cli"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            written |= set(re.findall(r'"kind": "([a-z_]+)"', text))
            written |= set(re.findall(r'Error\([^()]*(?:\([^()]*\)[^()]*)*, "([a-z_]+)"\)',
                                      text, re.S))
    assert written - set(ERROR_KINDS) == set()


def test_an_unlisted_kind_falls_back_to_a_listed_one():
    class Odd(ShufflerError):
        kind = "no_such_kind"

    assert error_kind(Odd("x")) == "internal"
    assert error_kind(ValueError("x")) == "internal"


def test_a_jam_mid_hand_is_a_failure_with_its_passes(run, monkeypatch):
    """The dealer must act: exit 3, error.kind jam, the passes that ran, the hand; the
    text names `clear` as the next step."""
    from hardware_sim import SimDevice

    real, seen = SimDevice.run_pass, []

    def jam_in_the_second(self, plan, *args, **kwargs):
        seen.append(plan)
        if len(seen) == 2:
            self.mechanism.faults.jams[13] = None
        return real(self, plan, *args, **kwargs)

    monkeypatch.setattr(SimDevice, "run_pass", jam_in_the_second)
    result = run("--json", "hand", "--passes", "4")
    obj = failure(result)
    assert result.exit_code == 3 and obj["error"]["kind"] == "jam"
    assert "shuffler clear" in obj["error"]["message"]
    assert [p["number"] for p in obj["pass_reports"]] == [1, 2]
    assert obj["pass_reports"][1]["fault"]["kind"] == "jam"
    assert obj["hand"]["completed"] is False and obj["hand"]["passes_done"] == 1
    text = run("status")
    assert "1 of 4 passes done" in text.stdout
    seen.clear()
    monkeypatch.setattr(SimDevice, "run_pass", real)
    assert run("clear").exit_code == 0
    stopped = run("--sim-fault", "jam:5", "hand")
    assert stopped.exit_code == 3
    assert "run `shuffler clear`, then `shuffler hand`" in stopped.stdout


def test_a_jam_through_the_service_has_the_same_shape(tmp_path):
    import subprocess

    from tests.served import SHUFFLER

    service = Service(tmp_path, speed=1e6, faults=("jam:13",)).start()
    try:
        result = subprocess.run([SHUFFLER, "--socket", str(service.socket), "--json",
                                 "hand", "--passes", "3"], capture_output=True, text=True,
                                timeout=60)
    finally:
        service.stop()
    assert result.returncode == 3, result.stderr
    obj = validate(json.loads(result.stdout), "error")
    assert obj["error"]["kind"] == "jam" and obj["error"]["exit"] == 3
    assert [p["number"] for p in obj["pass_reports"]] == [1]
    assert result.stderr == ""


def test_no_touch_between_passes_keeps_the_pass_that_ran(run, monkeypatch):
    from hardware_sim import SimDevice

    monkeypatch.setattr(SimDevice, "show", lambda self, status: None)  # dealer walked away
    obj = failure(run("--json", "hand", "--passes", "3"))
    assert obj["error"]["kind"] == "device_timeout"
    assert [p["number"] for p in obj["pass_reports"]] == [1]


def test_a_finished_hand_with_a_double_feed_is_done(run):
    result = run("--json", "--sim-fault", "double:3", "hand", "--passes", "3")
    assert result.exit_code == 0
    hand = validate(json.loads(result.stdout), "hand")["hand"]
    assert hand["completed"] and hand["pass_reports"][0]["fault"]["kind"] == "count_mismatch"


def test_a_resumed_hand_says_so_in_its_report(run):
    assert run("--sim-fault", "jam:13", "hand", "--passes", "3").exit_code == 3
    assert run("clear").exit_code == 0
    result = run("--json", "hand")
    hand = validate(json.loads(result.stdout), "hand")["hand"]
    assert hand["resumed_at"] == 1 and hand["completed"]


def test_json_version_is_json(run):
    result = run("--json", "--version")
    assert result.exit_code == 0
    obj = validate(json.loads(result.stdout), "version")
    assert obj["version"] == shuffler.__version__


def test_the_json_page_has_no_broken_anchor():
    page = (ROOT / "docs" / "json.md").read_text()
    targets = set(re.findall(r'<a id="([^"]+)"></a>', page))
    links = set(re.findall(r"\]\(#([^)]+)\)", page))
    assert links and links <= targets, sorted(links - targets)
    assert "or null or null" not in page
    assert "`pass_reports[].counted`" in page or "[pass_report](#defs-pass-report)" in page


@pytest.mark.parametrize("args, kind, code, passes", [
    (["--sim-fault", "jam:13", "pass"], "jam", 3, 1),
    (["--sim-fault", "misfeed:5", "hand", "--passes", "2"], "misfeed", 3, 1),
    (["--sim-fault", "battery:6.4", "pass"], "low_battery", 4, 0),
    (["pass", "--cards", "0"], "usage", 2, 0),
    (["--sim-fault", "double:3", "pass"], "count_mismatch", 3, 1),
    (["--sim-fault", "jam:99", "pass"], "bad_input", 2, 0),
])
def test_every_failure_has_the_one_shape(run, args, kind, code, passes):
    result = run("--json", *args)
    obj = failure(result)
    assert (obj["error"]["kind"], result.exit_code) == (kind, code)
    assert len(obj.get("pass_reports", [])) == passes


def test_the_last_hands_fault_is_a_fault_object_also_from_an_older_state(run, tmp_path):
    assert run("--sim-fault", "jam:13", "hand", "--passes", "2").exit_code == 3
    status = validate(json.loads(run("--json", "status").stdout), "status")
    fault = status["last_hand"]["fault"]
    assert fault["kind"] == "jam" and "shuffler clear" in fault["message"]
    assert status["hand_in_progress"]["passes_done"] == 0
    path = tmp_path / "state" / "state.json"
    state = json.loads(path.read_text())
    state["last_hand"]["fault"] = "jam"  # as an older release kept it
    path.write_text(json.dumps(state))
    older = validate(json.loads(run("--json", "status").stdout), "status")
    assert older["last_hand"]["fault"]["kind"] == "jam"
    assert "stopped (jam)" in run("status").stdout


@pytest.mark.slow
@pytest.mark.parametrize("device", ["sim", "sim-gpio", "sim-serial"])
def test_a_clean_hand_reads_the_same_on_every_backend(tmp_path, device):
    """tracking, distance and the last stacking mean the same whatever the backend: the
    last pass waits for the dealer's lifts, who acts a moment after the light on a rig."""
    env = {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_CONFIG": "",
           "SHUFFLER_NO_SERVICE": "1"}
    # the virtual microcontroller's machine runs on the wall clock times the sim speed: at
    # the default 20 the wait for the last lifts (3 s of its time) is 150 ms of the host's,
    # which a loaded host (two test workers) can miss; at 5 it is 600 ms
    speed = ["--sim-speed", "5"] if device == "sim-serial" else []
    result = CliRunner().invoke(cli, ["--device", device, *speed, "--json", "hand"], env=env,
                                catch_exceptions=False)
    hand = validate(json.loads(result.stdout), "hand")["hand"]
    assert result.exit_code == 0
    assert hand["tracking"] is True and hand["distance"] == 0 and hand["distance_exact"]
    assert all(p["stacking"] == "left" for p in hand["pass_reports"])
