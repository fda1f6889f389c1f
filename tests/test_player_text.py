"""What the dealer reads (issue 35's player text): in the order things happened, in
plain numbers and words, with the retries and refusals said as they were."""

from __future__ import annotations

import json


def test_revoke_all_with_no_phones_is_done_and_says_so(run):
    """Unpairing every phone when none is paired leaves what was asked (none paired): exit
    0 and a line that says so, not the usage error an unknown id gets."""
    said = run("pair", "--revoke", "all")
    assert said.exit_code == 0, said.output
    assert said.stdout == "no phones were paired: nothing to unpair\n"
    as_json = run("--json", "pair", "--revoke", "all")
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout) == {"schema": 1, "phones": [], "revoked": []}
    unknown = run("pair", "--revoke", "3fa2c1")
    assert unknown.exit_code == 2 and "no paired phone has that id" in unknown.stderr


def test_a_refused_hand_says_the_hand_was_not_started(run):
    """The battery refuses a whole hand before its first pass: the message names the hand,
    and a pass refused alone still names the pass."""
    hand = run("--sim-fault", "battery:7.0", "hand", "--passes", "30")
    assert hand.exit_code == 4
    assert "30 asked" in hand.stderr and hand.stderr.rstrip().endswith(
        "This hand was not started.")
    assert "This pass" not in hand.stderr
    lone = run("--sim-fault", "battery:6.4", "pass")
    assert lone.exit_code == 4 and lone.stderr.rstrip().endswith("This pass was not started.")


def test_counts_are_in_words_never_one_hands_or_about_0_passes(run):
    """``battery`` and ``status`` say "1 hand", "no hand", "not one pass", never "1 hands"
    or "about 0 passes of 24 cards left (0 to 0)"."""
    flat = run("--sim-fault", "battery:6.4", "battery").stdout
    assert "not one pass of 24 cards left, no hand of 5 passes" in flat
    assert "0 passes" not in flat and "(0 to 0)" not in flat
    assert "not one pass left" in run("--sim-fault", "battery:6.4", "status").stdout
    assert run("hand").exit_code == 0
    status = run("status").stdout
    assert "counters: 1 hand, 5 passes, 120 cards, 0 jams, 0 interrupted" in status
    for text in (flat, status):
        assert "1 hands" not in text and "1 passes" not in text
    low = run("--sim-fault", "battery:7.1", "battery").stdout
    assert "left (3 to 6), 1 hand of 5 passes" in low


def test_each_pass_is_reported_before_the_prompt_that_follows_it(run):
    """The dealer reads what the pass just did, then what to do next: pass N's line
    comes before the prompt to restack after it, once, and the hand's line last."""
    said = run("hand", "--passes", "3")
    assert said.exit_code == 0, said.output
    lines = [line for line in said.output.splitlines() if not line.startswith(("(", "shuffler:"))]
    kinds = ["pass" if line.startswith("pass ") else "prompt" if line.startswith("Put ")
             else "hand" if line.startswith("hand ") else line for line in lines]
    assert kinds == ["pass", "prompt"] * 3 + ["hand"], said.output
    assert [line.split(":")[0] for line in lines if line.startswith("pass ")] == [
        "pass 1/3", "pass 2/3", "pass 3/3"]
    assert said.stdout.count("pass 1/3:") == 1


def test_a_retry_is_said_in_the_pass_line_and_its_log(run):
    """``--sim-fault jam:5:1``: card 5 sticks once, backs out and feeds again; the pass
    ends well and its line says so (the JSON had ``retries: 1``, the text nothing)."""
    said = run("-v", "--sim-fault", "jam:5:1", "pass")
    assert said.exit_code == 0, said.output
    assert "24/24 cards counted" in said.stdout
    assert "1 retry to free a stuck card" in said.stdout
    assert "retries=1" in said.stderr
    assert "retr" not in run("pass").stdout


def pass_log_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if "] pass " in line)


def test_v_logs_each_pass_rounded_in_process_and_through_the_service(run, tmp_path):
    """-v's pass line gave the volts unrounded (min_volts=8.595248118107069) and, through
    the service, nothing at all (the service logged it in its own journal)."""
    import os
    import re
    import signal
    import subprocess
    import sys

    from tests.served import Service

    here = pass_log_line(run("-v", "pass").stderr)
    assert re.search(r"min_volts=\d\.\d{1,2} ", here), here
    service = Service(tmp_path, speed=1000.0).start()
    try:
        env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_SOCKET": str(service.socket),
               "SHUFFLER_STATE_DIR": str(tmp_path / "elsewhere")}
        env.pop("SHUFFLER_NO_SERVICE", None)
        out = subprocess.run([sys.executable, "-m", "shuffler", "-v", "pass"], env=env,
                             capture_output=True, text=True, timeout=60, check=False)
    finally:
        service.stop(signal.SIGTERM)
    assert out.returncode == 0, out.stderr
    there = pass_log_line(out.stderr)
    assert re.search(r"min_volts=\d\.\d{1,2} ", there) and "counted=24" in there, out.stderr


def test_a_normal_exit_on_sim_serial_warns_of_no_lost_link(run):
    """Every sim-serial command ended with 'serial link lost why=power off' on stderr: the
    virtual microcontroller switched off with the host's device is no lost link."""
    for args in (("status",), ("pass",), ("--sim-fault", "jam:5:1", "pass")):
        said = run("--device", "sim-serial", *args)
        assert said.exit_code == 0, said.output
        assert "link lost" not in said.stderr, (args, said.stderr)
    jammed = run("--device", "sim-serial", "--sim-fault", "jam:5", "pass")
    assert jammed.exit_code == 3 and "link lost" not in jammed.stderr


def test_a_card_stuck_in_the_throat_fails_the_clear_until_freed(run):
    """The guide's "if it still sees a card in the throat" could not be practised: a
    clear on the simulator always succeeded. ``jam:CARD:stuck``: the jam latches, the
    first clear finds the card still there (exit 3, saying so), the next one clears."""
    jam = ("--sim-fault", "jam:5:stuck")
    assert run(*jam, "pass").exit_code == 3
    missed = run(*jam, "clear")
    assert missed.exit_code == 3
    assert missed.stdout.startswith("not cleared: A card is still in the throat")
    as_json = json.loads(run("--json", *jam, "clear").stdout)
    assert as_json["cleared"] is False and as_json["still"]["kind"] == "jam"
    assert run("pass").exit_code == 3  # still latched
    assert run("clear").stdout == "cleared: jam\n"
    assert run("pass").exit_code == 0
    for device in ("sim-gpio", "sim-avr"):  # no stuck card there: refused, not ignored
        refused = run("--device", device, *jam, "pass")
        assert refused.exit_code == 2 and "runs on --device sim and sim-serial" in (
            refused.stderr), refused.output


def test_a_stuck_card_on_the_service_fails_one_clear(tmp_path):
    """On a service the simulated machine lives on: after the jam, the first clear
    misses the card and the second frees it."""
    import signal

    from tests.served import Service

    service = Service(tmp_path, speed=1000.0, faults=("jam:5:stuck",)).start()
    try:
        client = service.client()
        assert client.request("pass")["exit"] == 3
        assert client.request("clear")["cleared"] is False
        assert client.request("clear")["cleared"] is True
    finally:
        service.stop(signal.SIGTERM)
