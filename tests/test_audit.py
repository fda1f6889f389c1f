"""The audit log (#33): one record per pass id whatever happens to the machine's lock
file, and a ``seq`` beside the wall-clock ``time`` that only grows, even when the wall
clock steps back (a Pi without a real-time clock before NTP)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from shuffler.control.controller import PassController
from shuffler.core.planning import coin_plan
from shuffler.errors import ShufflerError
from shuffler.store.audit import AuditLog
from shuffler.store.lock import LOCK_NAME, MachineLock
from shuffler.store.state import StateStore


def records(folder: Path) -> list[dict]:
    return list(AuditLog(folder / "audit.jsonl").read())


def stepping_back() -> Iterator[str]:
    """A wall clock that jumps a day back after every reading."""
    for day in range(28, 0, -1):
        yield f"2026-01-{day:02d}T12:00:00.000+00:00"


def test_seq_grows_while_the_wall_clock_steps_back(sim, tmp_path):
    ctl = PassController(sim.make(24), StateStore(tmp_path))
    wall = stepping_back()
    ctl.wall = lambda: next(wall)  # type: ignore[method-assign]
    for seed in range(3):
        ctl.run_pass(coin_plan(24, random.Random(seed)))
        ctl.device.mechanism.gather()  # type: ignore[attr-defined]  # the dealer restacks
    log = records(tmp_path)
    assert [e["time"] for e in log] == sorted((e["time"] for e in log), reverse=True)
    assert [e["seq"] for e in log] == [1, 2, 3]


def test_seq_goes_on_across_writers_past_a_torn_tail_and_an_old_log(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_text('{"id": 1, "counted": 24}\n{"id": 2, "counted": 24}\n')  # before seq
    AuditLog(path).append({"id": 3, "counted": 24})
    with path.open("a") as f:
        f.write('{"id": 4, "cou')  # a power cut mid-append
    AuditLog(path).append({"id": 5, "counted": 24})
    assert [(e["id"], e.get("seq")) for e in AuditLog(path).read()] == [
        (1, None), (2, None), (3, 3), (5, 4)]


def test_one_record_per_pass_id_from_many_writers_at_once(tmp_path):
    path = tmp_path / "audit.jsonl"
    start = threading.Barrier(8)

    def write(n: int) -> None:
        start.wait()
        AuditLog(path).append({"id": 7, "writer": n})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [e["id"] for e in AuditLog(path).read()] == [7]


def test_a_lock_file_removed_mid_pass_leaves_one_record_for_the_pass(sim, tmp_path):
    """The issue's race: the lock file goes mid-pass, a second process takes a fresh lock,
    finds the pass in flight and records it interrupted; the first then ends the pass.
    One record for that id, the second's, and the first says so (exit 3), never a
    second line that counts the pass as well."""
    lock = MachineLock(tmp_path).acquire("shuffler serve")
    first = PassController(sim.make(24), StateStore(tmp_path))
    first.guard = lock.verify
    seen: list[dict | None] = []

    def meddle(card: int, *rest) -> None:
        if seen:
            return
        (tmp_path / LOCK_NAME).unlink()
        second_lock = MachineLock(tmp_path).acquire("shuffler status")
        try:
            seen.append(PassController(sim.make(24), StateStore(tmp_path)).recover())
        finally:
            second_lock.release()

    with pytest.raises(ShufflerError) as caught:
        first.run_pass(coin_plan(24, random.Random(1)), on_card=meddle)
    assert seen and seen[0] is not None and seen[0]["interrupted"]
    assert caught.value.exit_code == 3 and "already recorded pass 1" in str(caught.value)
    log = records(tmp_path)
    assert [(e["id"], e.get("interrupted")) for e in log] == [(1, True)]
    state = StateStore(tmp_path).load()
    assert state.fault["kind"] == "interrupted" and state.passes == 0 and state.interrupted == 1
    lock.release()
