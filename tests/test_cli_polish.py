"""The hour after the first minute: suggestions, seats in any case, completion values,
any count of -v, and the CLI saying what it does with the simulator and the state."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from shuffler_cli.main import cli
from tests.served import SHUFFLER, Service

FAST = ["--sim-speed", "1000000"]



@pytest.mark.parametrize("typed, meant", [("hnad", "hand"), ("statsu", "status"),
                                          ("Battery", "battery"), ("clera", "clear")])
def test_a_mistyped_command_gets_a_suggestion(run, typed, meant):
    result = run(typed)
    assert result.exit_code == 2
    assert f"Did you mean '{meant}'?" in result.stderr


def test_no_suggestion_for_nonsense(run):
    result = run("xyzzy")
    assert result.exit_code == 2 and "No such command 'xyzzy'" in result.stderr
    assert "Did you mean" not in result.stderr


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
def test_any_count_of_v_after_the_command_is_the_global_option(run, count):
    result = run("status", "-" + "v" * count)
    assert result.exit_code == 0, result.output


def test_vv_adds_debug_detail(tmp_path):
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path / "s"),
           "SHUFFLER_NO_SERVICE": "1"}
    quiet = subprocess.run([SHUFFLER, "-v", "status"], env=env, capture_output=True,
                           text=True, timeout=60)
    loud = subprocess.run([SHUFFLER, "-vv", "status"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "resolved" not in quiet.stderr
    assert "resolved" in loud.stderr and str(tmp_path / "s") in loud.stderr


def test_seats_are_taken_in_any_case(run):
    result = run("--json", "score", "add", "north", "3")
    assert result.exit_code == 0, result.output
    assert run("--json", "score", "new", "--first-dealer", "EAST").exit_code == 0
    bad = run("score", "add", "nowhere", "3")
    assert bad.exit_code == 2 and "North, East, South, West" in bad.stderr


def complete(args: str, tmp_path) -> list[str]:
    env = {**os.environ, "_SHUFFLER_COMPLETE": "bash_complete", "COMP_WORDS": args,
           "COMP_CWORD": str(len(args.split()) - (0 if args.endswith(" ") else 1)),
           "HOME": str(tmp_path)}
    out = subprocess.run([SHUFFLER], env=env, capture_output=True, text=True, timeout=60)
    return [line.split(",", 1)[1] for line in out.stdout.splitlines() if "," in line]


def test_completion_offers_devices_seats_and_modes(tmp_path):
    assert set(complete("shuffler --device ", tmp_path)) >= {"sim", "sim-gpio", "gpio"}
    assert complete("shuffler --device sim-", tmp_path) == ["sim-avr", "sim-gpio",
                                                            "sim-serial"]
    assert complete("shuffler score add ", tmp_path) == ["North", "East", "South", "West"]
    assert complete("shuffler score add so", tmp_path) == ["South"]
    assert complete("shuffler hand --mode ", tmp_path) == ["planned", "coin"]


def test_a_first_run_says_where_its_state_lives(run, tmp_path):
    first = run("status")
    assert "first run here" in first.stderr and str(tmp_path / "state") in first.stderr
    assert "first run" not in run("status").stderr


def test_the_simulated_dealer_is_announced_once(run):
    result = run("hand", "--passes", "3")
    assert result.exit_code == 0
    assert result.stderr.count("the simulator plays the dealer: piles restacked, touched") == 1
    assert "simulator plays" not in run("--json", "hand", "--passes", "2").stderr


def test_serve_v_logs_the_requests_it_answers(tmp_path):
    service = Service(tmp_path, speed=1e6).start()
    try:
        env = {**os.environ, "SHUFFLER_SOCKET": str(service.socket)}
        assert subprocess.run([SHUFFLER, "status"], env=env, capture_output=True,
                              timeout=60).returncode == 0
        assert subprocess.run([SHUFFLER, "pass"], env=env, capture_output=True,
                              timeout=60).returncode == 0
    finally:
        service.stop()
    requests = [json.loads(line) for line in service.log.read_text().splitlines()
                if '"request"' in line]
    assert [r["cmd"] for r in requests] == ["status", "pass"]


def test_every_option_variable_follows_the_readme_rule():
    """SHUFFLER_, the command, the option's long name: click's own name stays an alias."""
    import click

    from shuffler_cli.main import COMMANDS

    ctx = click.Context(cli, info_name="shuffler")
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        for p in command.params:
            longs = [o for o in p.opts if o.startswith("--")]
            if not isinstance(p, click.Option) or not longs:
                continue
            rule = f"SHUFFLER_{name}_{longs[0][2:]}".replace("-", "_").upper()
            first = p.envvar[0] if isinstance(p.envvar, list | tuple) else p.envvar
            assert first in (None, rule), (name, p.opts, p.envvar)


@pytest.mark.parametrize("var, note", [("SHUFFLER_SELFTEST_YES", False),
                                       ("SHUFFLER_SELFTEST_UNATTENDED", True)])
def test_an_old_variable_still_works_and_says_it_is_deprecated(tmp_path, var, note):
    env = {**os.environ, var: "1", "SHUFFLER_STATE_DIR": str(tmp_path / "s"),
           "SHUFFLER_CONFIG": str(tmp_path / "config.toml")}
    (tmp_path / "config.toml").write_text("")
    result = subprocess.run([SHUFFLER, "--device", "sim-gpio", "--json", "selftest"],
                            env=env, capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("deprecated: set SHUFFLER_SELFTEST_YES instead" in result.stderr) is note


def test_the_status_words_never_say_a_thing_twice_or_in_the_wrong_number(run):
    """Issue 46: "stopped (stopped)", "1 of 1 passes", "random to within 0 (exactly
    random)" read as a person would write them."""
    from shuffler_cli.render import distance_text, ended_by, of_passes

    hand = run("hand", "--passes", "1")
    assert hand.exit_code == 0, hand.output
    assert "1 of 1 pass done" in hand.stdout
    status = run("status").stdout
    assert "last hand: 1, done: 1 of 1 pass, " in status
    assert ended_by({"kind": "stopped", "message": "", "card": 3}) == "stopped on request"
    assert ended_by({"kind": "count_mismatch", "message": "", "card": 3}) == (
        "stopped (count mismatch)")
    assert ended_by(None) == "stopped (no touch)"
    assert of_passes(2, 5) == "2 of 5 passes"
    assert distance_text(0, exact=False) == "exactly random"  # a bound of 0 is no bound


def test_a_departure_the_plan_still_covers_says_exactly_random_once():
    from fractions import Fraction

    from shuffler.control.reports import distance_note

    # a departure, and a distance of 0
    note = distance_note((), (3,), Fraction(0), resumed_at=None, plan_lost=False)
    assert note is not None and note.endswith("this hand is still exactly random")
    assert "within 0" not in note
