"""The simulator's battery carries its charge from one in-process run to the next, in
the state folder, as a real one does (issue 46: it was new on every run)."""

from __future__ import annotations

import json
import os
import subprocess

from tests.cli import SHUFFLER


def run(tmp_path, *args: str) -> dict:
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path / "state"),
           "SHUFFLER_CONFIG": str(tmp_path / "none.toml"), "SHUFFLER_CHECK_SCHEMAS": "1"}
    (tmp_path / "none.toml").write_text("")
    done = subprocess.run([SHUFFLER, "--no-service", "--sim-speed", "1000000", "--json", *args],
                          env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode in (0, 4), done.stderr
    return json.loads(done.stdout)


def charge(tmp_path) -> float:
    return json.loads((tmp_path / "state" / "sim-battery.json").read_text())["charge"]


def test_each_pass_starts_on_the_battery_the_last_one_left(tmp_path):
    first = run(tmp_path, "pass")["pass"]
    after_one = charge(tmp_path)
    second = run(tmp_path, "pass")["pass"]
    assert 0.99 < charge(tmp_path) < after_one < 1.0
    assert second["min_volts"] <= first["min_volts"]


def test_a_status_keeps_the_charge_and_a_battery_fault_leaves_it_alone(tmp_path):
    run(tmp_path, "pass")
    kept = charge(tmp_path)
    run(tmp_path, "status")
    run(tmp_path, "--sim-fault", "battery:7.0", "pass")  # a battery put in for one run
    assert charge(tmp_path) == kept


def test_a_flat_kept_battery_is_changed_for_a_new_one(tmp_path):
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "sim-battery.json").write_text('{"charge": 0.02}')
    run(tmp_path, "pass")
    assert 0.99 < charge(tmp_path) < 1.0  # a new one, less one pass
    (tmp_path / "state" / "sim-battery.json").write_text("not json")
    run(tmp_path, "pass")
    assert 0.99 < charge(tmp_path) < 1.0
