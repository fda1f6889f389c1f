"""The command line as a dealer and a script use it: output, JSON and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

FAST = ["--sim-speed", "1000000"]


def out_json(result) -> dict:
    return json.loads(result.stdout)


def test_json_pass_has_the_documented_fields(run):
    result = run("--json", "pass", "--cards", "32")
    assert result.exit_code == 0, result.output
    p = out_json(result)["pass"]
    assert p["counted"] == p["expected"] == 32
    assert len(p["piles"]) == 2 and sum(p["piles"]) == 32
    assert p["fault"] is None and p["seconds"] > 0


@pytest.mark.parametrize("cards", [24, 32, 104])
def test_json_hand_counts_every_pass(run, cards):
    result = run("--json", "hand", "--passes", "4", "--cards", str(cards))
    assert result.exit_code == 0
    hand = out_json(result)["hand"]
    assert (hand["number"], hand["dealer"], hand["next_dealer"]) == (1, "North", "East")
    assert [p["counted"] for p in hand["pass_reports"]] == [cards] * 4
    assert all(sum(p["piles"]) == cards for p in hand["pass_reports"])


def test_text_hand_prints_a_line_per_pass_and_a_summary(run):
    result = run("hand", "--passes", "3")
    assert result.exit_code == 0
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("pass 1/3: 24/24 cards counted, piles ")
    assert lines[-1].startswith("hand 1: dealt by North; 3 of 3 passes done")
    assert lines[-1].endswith("East deals next")
    assert "hand 2: dealt by East" in run("hand", "--passes", "1").stdout


@pytest.mark.parametrize("cards", ["0", "105", "-3", "x"])
def test_a_load_outside_the_limits_is_refused_with_exit_2(run, cards):
    result = run("pass", "--cards", cards)
    assert result.exit_code == 2
    assert "--cards" in result.stderr


def test_a_jam_exits_3_and_tells_the_dealer_what_to_do(run):
    result = run("--sim-fault", "jam:13", "pass")
    assert result.exit_code == 3
    assert "Jam at card 13 of 24: 12 cards dealt" in result.stderr
    assert "shuffler clear" in result.stderr


def test_a_latched_jam_blocks_every_pass_until_cleared(run):
    assert run("--json", "--sim-fault", "jam:13", "hand").exit_code == 3
    status = out_json(run("--json", "status"))
    assert status["fault"]["kind"] == "jam" and status["health"]["ok"] is False
    blocked = run("--json", "pass")
    assert blocked.exit_code == 3 and "latched" in out_json(blocked)["error"]["message"]
    cleared = run("--json", "clear")
    assert cleared.exit_code == 0 and out_json(cleared)["cleared_fault"]["kind"] == "jam"
    assert run("pass").exit_code == 0


@pytest.mark.parametrize(("spec", "code", "kind"), [
    ("jam:13", 3, "jam"),
    ("misfeed:5", 3, "misfeed"),
    ("double:7", 3, "count_mismatch"),
    ("battery:5.0", 4, None),
])
def test_every_sim_fault_kind(run, spec, code, kind):
    result = run("--json", "--sim-fault", spec, "pass")
    assert result.exit_code == code
    data = out_json(result)
    if kind is None:
        assert data["error"]["kind"] == "low_battery"
    else:
        assert data["pass"]["fault"]["kind"] == kind


def test_a_stall_under_load_is_low_battery_with_exit_4(run, tmp_path):
    # thresholds set (unwisely) so low that the pass starts; the motor then stalls
    cfg = tmp_path / "lax.toml"
    cfg.write_text("[battery]\nlow_volts = 4.5\ncritical_volts = 4.0\ncutoff_load_volts = 3.0\n")
    result = run("--config", str(cfg), "--json", "--sim-fault", "battery:6.2", "pass")
    assert result.exit_code == 4
    fault = out_json(result)["pass"]["fault"]
    assert fault["kind"] == "low_battery" and "stalled" in fault["message"]


def test_a_flat_battery_is_refused_before_anything_moves(run):
    result = run("--json", "--sim-fault", "battery:6.4", "pass")
    assert result.exit_code == 4
    message = out_json(result)["error"]["message"]
    assert "6.40 V at rest" in message and "not one pass of 24 cards left, 1 asked" in message
    assert "%" in message and "This pass was not started" in message
    assert "Change the 9 V battery" in message
    assert out_json(run("--json", "status"))["counters"]["passes"] == 0


def test_a_hand_the_battery_cannot_finish_is_refused(run):
    # 7.0 V at rest: a few dozen passes by the curve, not a hand of 30
    assert run("--sim-fault", "battery:7.0", "pass").exit_code == 0
    result = run("--json", "--sim-fault", "battery:6.95", "hand", "--passes", "30")
    assert result.exit_code == 4 and "30 asked" in out_json(result)["error"]["message"]


def test_battery_json_has_the_documented_keys(run):
    data = out_json(run("--json", "battery"))
    assert {"volts", "percent", "passes_left", "hands_left", "state"} <= set(data)
    assert data["state"] == "ok" and data["percent"] > 95 and data["passes_left"] > 100
    low = out_json(run("--json", "--sim-fault", "battery:6.4", "battery"))
    assert low["state"] == "critical" and low["passes_left"] == 0


@pytest.mark.parametrize("spec", ["jam", "jam:x", "jam:0", "battery:lots", "smoke:3", "double:"])
def test_a_bad_fault_spec_is_exit_2_and_named(run, spec):
    result = run("--sim-fault", spec, "pass")
    assert result.exit_code == 2 and repr(spec) in result.stderr


def test_status_json(run):
    data = out_json(run("--json", "status"))
    assert data["device"]["kind"] == "sim" and data["health"]["ok"] is True
    assert data["fault"] is None and data["battery"]["volts"] > 8


def test_a_bad_config_file_is_exit_2_and_named(run, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[hand]\npasses = 99\n")
    result = run("--config", str(bad), "hand")
    assert result.exit_code == 2
    assert f"{bad}: [hand] passes: expected a whole number from 1 to 30, got 99" in result.stderr


def test_the_config_sets_passes_and_cards(run, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[hand]\npasses = 2\ncards = 32\n")
    hand = out_json(run("--config", str(cfg), "--json", "hand"))["hand"]
    assert [p["counted"] for p in hand["pass_reports"]] == [32, 32]


def test_devices_that_cannot_open_say_why(run):
    result = run("--device", "serial:/dev/no-such-port", "pass")
    assert result.exit_code == 3 and "cannot open the serial port /dev/no-such-port" in (
        result.stderr)
    result = run("--device", "usb", "pass")
    assert result.exit_code == 2 and "unknown device 'usb'" in result.stderr
    result = run("--device", "gpio", "--sim-seed", "3", "pass")
    assert result.exit_code == 2 and "only to a simulated device" in result.stderr
    result = run("--device", "gpio", "pass")  # no Raspberry Pi here
    assert result.exit_code == 3 and "cannot open the GPIO pins" in result.stderr
    assert "--device sim-gpio" in result.stderr


def test_a_seeded_simulator_repeats_itself(run):
    a = out_json(run("--json", "--sim-seed", "11", "pass", state="a"))["pass"]
    b = out_json(run("--json", "--sim-seed", "11", "pass", state="b"))["pass"]
    assert a["piles"] == b["piles"]


def test_the_installed_command_keeps_stdout_for_json_and_logs_on_stderr(tmp_path):
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path), "SHUFFLER_CONFIG": ""}
    proc = subprocess.run([sys.executable, "-m", "shuffler", *FAST, "-v", "--json", "hand",
                           "--passes", "2"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["hand"]["pass_reports"][1]["counted"] == 24
    assert "pass" in proc.stderr  # -v logs each pass, on stderr only


def test_a_hand_is_planned_by_default_and_reports_its_distance(run):
    five = out_json(run("--json", "hand", "--passes", "5"))["hand"]
    assert five["mode"] == "planned" and five["distance"] == 0.0 and five["tracking"]
    four = out_json(run("--json", "hand", "--passes", "4"))["hand"]
    assert four["distance"] == pytest.approx(0.0021187, rel=1e-4)
    coin = out_json(run("--json", "hand", "--passes", "4", "--mode", "coin"))["hand"]
    assert coin["mode"] == "coin" and coin["distance"] == pytest.approx(0.7225, abs=1e-4)
    text = run("hand", "--passes", "5").stdout
    assert "(planned, exactly random)" in text


def test_piles_lifted_together_are_warned_and_lifted_again(run):
    """Both at once (the sensors cannot tell) is refused like the other pile first: the
    dealer who ignores it is made to lift them one at a time, and the track holds. At a
    million times real time: the dealer reacts in machine time, so the host's own work
    between the warning and the dealer hearing it (a millisecond is 1,000 s) never
    counts against the 300 s the hand waits for a touch (SimDevice.now)."""
    hand = out_json(run("--json", "--sim-dealer", "both", "--sim-ignores", "hand",
                        "--passes", "5"))["hand"]
    assert hand["tracking"] and hand["distance"] == 0 and hand["distance_exact"]
    assert [p["stacked"] for p in hand["pass_reports"]] == ["corrected"] * 5


def test_a_bad_mode_is_exit_2(run):
    result = run("hand", "--mode", "riffle")
    assert result.exit_code == 2 and "--mode" in result.stderr


def test_no_output_or_log_line_holds_a_plan(tmp_path):
    """A plan (or the tracked order, which is as good) must never leave memory."""
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path), "SHUFFLER_CONFIG": ""}
    proc = subprocess.run([sys.executable, "-m", "shuffler", *FAST, "-vv", "--log-json", "--json",
                           "hand", "--passes", "5"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0
    written = proc.stdout + proc.stderr + "".join(p.read_text() for p in tmp_path.rglob("*")
                                                  if p.is_file())
    assert "labels" not in written and "codes" not in written and "order" not in written
    assert "restacked" in proc.stderr  # the debug log did run
    for line in written.splitlines():  # no list of 24 zeros and ones
        bits = [tok for tok in line.replace(",", " ").replace("[", " ").split() if tok in "01"]
        assert len(bits) < 24, line
