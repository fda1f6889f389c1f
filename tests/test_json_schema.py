"""The JSON contract: schemas that are valid, documented, and met by every output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from shuffler import schemas
from shuffler.constants import SCHEMA
from shuffler.device.contract import FaultKind
from shuffler.errors import LowBatteryError
from shuffler.schemas import SchemaMismatch, load, names, validate
from shuffler_cli.main import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--sim-speed", "1000000"]



@pytest.mark.parametrize("name", names())
def test_every_schema_is_a_valid_json_schema(name):
    schema = load(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == f"{schemas.BASE_URI}{name}.json"


def test_the_reference_page_is_rendered_from_the_schemas():
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "render_json.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_the_schemas_carry_the_one_version():
    """The version every output's ``schema`` key carries (shuffler.constants; a second
    definition of it anywhere fails tests/test_constants.py) is the schemas' own."""
    assert load("defs")["$defs"]["schema"]["const"] == SCHEMA


def test_the_fault_kinds_are_the_devices():
    kinds = load("defs")["$defs"]["fault"]["properties"]["kind"]["enum"]
    assert sorted(kinds) == sorted(k.value for k in FaultKind)


def test_every_command_that_prints_json_has_a_schema():
    assert set(COMMANDS) - {"serve"} <= set(names())


@pytest.mark.parametrize(("args", "name"), [
    (["pass"], "pass"),
    (["hand", "--passes", "2"], "hand"),
    (["status"], "status"),
    (["battery"], "battery"),
    (["clear"], "clear"),
    (["mixing", "--passes", "3", "--trials", "10"], "mixing"),
    (["simulate", "--trials", "20", "--seed", "3"], "simulate"),
    (["--sim-fault", "jam:4", "hand"], "hand"),
    (["--sim-fault", "battery:6.4", "pass"], "error"),
    (["pass", "--cards", "0"], "error"),
])
def test_outputs_validate(run, args, name):
    result = run("--json", *args)
    obj = json.loads(result.stdout)
    assert obj["schema"] == 1
    validate(obj, name)
    if name == "error":
        assert obj["error"]["exit"] == result.exit_code


def test_a_mismatch_is_reported_with_its_place():
    with pytest.raises(SchemaMismatch, match=r"/counted: 'x' is not of type 'integer'"):
        validate({"schema": 1, "device": {}, "pass": {"counted": "x"}}, "pass")
    with pytest.raises(SchemaMismatch, match="no schema called 'no_such_output'"):
        validate({}, "no_such_output")


def test_a_hand_stopped_half_way_reports_the_passes_it_ran(run, monkeypatch):
    from shuffler.control.controller import PassController

    real = PassController.run_pass
    calls = {"n": 0}

    def flat_on_the_third(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise LowBatteryError("the battery cannot finish the hand: 2 passes done")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(PassController, "run_pass", flat_on_the_third)
    result = run("--json", "hand", "--passes", "5")
    assert result.exit_code == 4
    obj = validate(json.loads(result.stdout), "error")
    assert obj["error"]["kind"] == "low_battery"
    assert [p["number"] for p in obj["pass_reports"]] == [1, 2]


def test_socket_messages_validate_against_their_schemas(tmp_path):
    """A real service: greeting, events and replies as a client reads them."""
    import os
    import time

    from shuffler.service.client import ServiceClient

    env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_CHECK_SCHEMAS": "1"}
    sock = tmp_path / "s.sock"
    proc = subprocess.Popen([sys.executable, "-m", "shuffler", "--sim-speed", "100000",
                             "--state-dir", str(tmp_path / "state"), "--socket", str(sock),
                             "serve"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        client = None
        while client is None and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            client = ServiceClient.connect(sock)
            time.sleep(0.05)
        assert client is not None
        validate(client.greeting, "greeting")
        events: list[dict] = []
        hand = client.request("hand", events.append, passes=2)
        validate(hand, "hand")
        for event in events:
            validate(event, "event")
        validate(client.request("status"), "status")
        validate(client.request("battery", cards=24), "battery")
        validate(client.request("clear"), "clear")
        validate(client.request("stop"), "stop")
        with pytest.raises(Exception, match="cards"):
            client.request("pass", cards=500)
        client.close()
    finally:
        proc.terminate()
        proc.wait(20)
