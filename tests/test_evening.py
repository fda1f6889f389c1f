"""The evening of hands on the real controller (hardware-sim/evening.py) that
benchmarks/last_stack.py times: its audit log holds only the hand in progress, which
changes no hand (the same orders, labels, machine seconds and stops as a log kept all
evening), and its scratch folder goes when the evening ends, or is left early."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

import hardware_sim.evening as evening_mod
from hardware_sim.dealer import DealerHabit
from hardware_sim.evening import evening
from hardware_sim.exhaustive import ANSWERS

ROOT = Path(__file__).resolve().parents[1]
STOPS_HIGH = ANSWERS[5]


def _hands(monkeypatch, forget: bool, dealer=(DealerHabit.LAST_CARD, STOPS_HIGH), n=15):
    if not forget:
        monkeypatch.setattr(evening_mod, "_forget_hands_before", lambda controller: None)
    hands = [(h.order, h.label, h.seconds, h.stops)
             for h in evening(*dealer, n, random.Random(5))]
    monkeypatch.undo()
    return hands


@pytest.mark.parametrize("answer", [STOPS_HIGH, ANSWERS[1], ANSWERS[4]],
                         ids=lambda a: a.name)
def test_forgetting_finished_hands_changes_no_hand(monkeypatch, answer):
    """The stopping dealer (its hands paused and resumed on their plans), and dealers who
    are refused and warned: hand for hand the same as with the whole evening's log."""
    dealer = (DealerHabit.LAST_CARD, answer)
    kept = _hands(monkeypatch, forget=False, dealer=dealer)
    assert _hands(monkeypatch, forget=True, dealer=dealer) == kept
    assert (sum(h[3] for h in kept) > 0) is answer.stops_high


@pytest.fixture
def folders(monkeypatch) -> list[Path]:
    """The scratch folders the evenings make, as they make them."""
    made: list[Path] = []
    mkdtemp = evening_mod.tempfile.mkdtemp

    def remembered(**kwargs):
        made.append(Path(mkdtemp(**kwargs)))
        return str(made[-1])

    monkeypatch.setattr(evening_mod.tempfile, "mkdtemp", remembered)
    return made


def test_the_audit_log_holds_the_hand_in_progress_every_pass_once(folders):
    hands = evening(DealerHabit.LAST_CARD, STOPS_HIGH, 40, random.Random(9))
    records = []
    for i, hand in enumerate(hands):
        records = [json.loads(line)
                   for line in (folders[0] / "audit.jsonl").read_text().splitlines()]
        # this hand's five passes, each once, after every stop and resume
        assert [r["pass"] for r in records] == [1, 2, 3, 4, 5], (i, hand.stops)
        assert len({r["id"] for r in records}) == 5
        assert all(r["fault"] is None and r["counted"] == 24 for r in records)
    assert records[-1]["id"] == 200  # ids kept growing through the evening
    assert not folders[0].exists()  # the evening over, its folder went with it


def test_an_evening_left_early_removes_its_folder(folders):
    hands = evening(DealerHabit.INSTRUCTED, None, 10, random.Random(1))
    next(hands)
    assert folders[0].is_dir()
    hands.close()
    assert not folders[0].exists()


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "benchmarks/last_stack.py", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_benchmark_keeps_each_dealer_after_each_turn_and_prints_it_again(tmp_path):
    """Dealers take turns (3 hands, 2 a turn): a run cut short leaves every dealer's
    row as far as it got; the table is the last row of each."""
    out = tmp_path / "rows.jsonl"
    run = _bench("--hands", "3", "--every", "2", "--dealers", "6,0", "--out", str(out))
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["dealer"], r["answer"], r["hands"]) for r in rows] == [
        ("last-card", "corrects 1/2, stops-high", 2), ("instructed", "corrects", 2),
        ("last-card", "corrects 1/2, stops-high", 3), ("instructed", "corrects", 3)]
    assert all(r["exact"] == r["hands"] and r["seed"] == 47 for r in rows)
    assert rows[2]["stops"] > 0 and rows[3]["stops"] == 0
    assert json.loads(run.stdout.splitlines()[-1]) == rows[2:]
    again = _bench("--table", str(out))
    assert again.returncode == 0 and again.stdout == run.stdout  # the table, then the JSON
    assert again.stdout.startswith("| dealer | answer | hands | exact | top p | bottom p |")


def _refused(monkeypatch, capsys, *args: str) -> tuple[str, str]:
    """The benchmark's main() on ``args`` in this process (the script as a process is
    above): it exits 2 from its argument parser, before any hand; its stdout and stderr.
    Anything else it raised, a traceback, fails the test."""
    bench = _benchmark_module()
    monkeypatch.setattr(sys, "argv", ["last_stack.py", *args])
    with pytest.raises(SystemExit) as exited:
        bench.main()
    out, err = capsys.readouterr()
    assert exited.value.code == 2, (out, err)
    return out, err


@pytest.mark.parametrize("dealers", ["9", "a", "0,,1"])
def test_the_benchmark_refuses_a_dealer_it_does_not_have(monkeypatch, capsys, dealers):
    _, err = _refused(monkeypatch, capsys, "--hands", "1", "--dealers", dealers)
    assert f"--dealers {dealers}" in err


@pytest.mark.parametrize("args", [("--hands", "0"), ("--every", "0")])
def test_the_benchmark_refuses_no_hands(monkeypatch, capsys, args):
    out, err = _refused(monkeypatch, capsys, "--hands", "1", *args)
    assert "at least 1" in err and not out


def _benchmark_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("last_stack", ROOT / "benchmarks" /
                                                  "last_stack.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_mixing_page_carries_the_acceptance_run_as_the_benchmark_printed_it():
    """docs/mixing.md ("The last stack") shows the rows of benchmarks/last_stack_rows.jsonl
    as `last_stack.py --table` prints them; the run is the acceptance's (24 cards, seed
    47) and every hand of it was labelled exact, top and bottom card within noise."""
    bench = _benchmark_module()
    rows = bench._last_rows(ROOT / "benchmarks" / "last_stack_rows.jsonl")
    page = (ROOT / "docs" / "mixing.md").read_text(encoding="utf-8")
    assert bench.table(rows) in page
    assert {(r["dealer"], r["answer"]) for r in rows} >= {
        ("last-card", a.name) for a in ANSWERS}
    for row in rows:
        assert row["seed"] == 47 and row["exact"] == row["hands"] >= 1000
        assert min(row[k] for k in ("top_p", "bottom_p", "top_all_p", "bottom_all_p")) > 1e-3
        assert (row["stops"] > 0) is row["answer"].endswith("stops-high")
