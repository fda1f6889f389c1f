"""Nothing is lost (#22): the latch is on disk before the motor turns, a fault found
with the disk full is still shown and kept, a torn audit tail costs no later record,
the state folder's files are opened as what they are, and a removed lock is noticed."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from shuffler.control.controller import PassController
from shuffler.core.planning import coin_plan
from shuffler.device.contract import FaultKind
from shuffler.errors import FaultLatchedError, FileAccessError, StateFileError, UnsavedFaultError
from shuffler.files import Reserve, make_folder
from shuffler.store.audit import AuditLog
from shuffler.store.lock import LockLostError, MachineLock
from shuffler.store.state import State, StateStore
from tests.test_state import shuffler, small_disk

pytestmark = pytest.mark.slow


def controller(sim, folder: Path, faults=()) -> PassController:
    return PassController(sim.make(24, faults=faults), StateStore(folder))


def test_the_latch_is_on_disk_before_the_first_motor_command(sim, tmp_path):
    ctl = controller(sim, tmp_path)
    seen: list[State] = []
    real = ctl.device.run_pass

    def run_pass(plan, on_card=None, **kw):  # what a kill at the first motor command leaves
        seen.append(StateStore(tmp_path).load())
        return real(plan, on_card, **kw)

    ctl.device.run_pass = run_pass  # type: ignore[method-assign]
    report = ctl.run_pass(coin_plan(24, random.Random(1)))
    on_disk = seen[0]
    assert on_disk.in_flight is not None and on_disk.fault["kind"] == "interrupted"
    assert "back in the tray" in on_disk.fault["message"]
    assert report.ok and StateStore(tmp_path).load().fault is None  # a clean end lifts it


def test_a_pass_cut_off_by_an_exception_stays_latched_and_is_recorded(sim, tmp_path):
    ctl = controller(sim, tmp_path)

    def boom(plan, on_card=None, **kw):
        raise KeyboardInterrupt

    ctl.device.run_pass = boom  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        ctl.run_pass(coin_plan(24, random.Random(1)))
    state = StateStore(tmp_path).load()
    assert state.fault["kind"] == "interrupted" and state.interrupted == 1
    assert state.in_flight is None
    assert [e.get("interrupted") for e in AuditLog(tmp_path / "audit.jsonl").read()] == [True]
    with pytest.raises(FaultLatchedError, match="An interrupted fault is latched"):
        controller(sim, tmp_path).check_ready(24)


def test_a_kill_mid_pass_refuses_the_next_pass_until_clear(sim, tmp_path):
    """What SIGKILL leaves: the state as _begin wrote it, nothing after."""
    ctl = controller(sim, tmp_path)
    ctl._begin(24, {"hand": 3, "pass": 2})
    fresh = controller(sim, tmp_path)
    settled = fresh.recover()
    assert settled["interrupted"]
    with pytest.raises(FaultLatchedError, match="pass 2 of hand 3"):
        fresh.check_ready(24)
    assert fresh.clear()
    fresh.check_ready(24)


def test_a_failed_final_write_of_a_jam_is_exit_3_and_kept_in_memory(sim, tmp_path, monkeypatch):
    ctl = controller(sim, tmp_path, faults=("jam:13",))
    import shuffler.files as files

    real = files.atomic_write
    calls = {"n": 0}

    def failing(path, data):  # the pass started; then every write fails (EIO)
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(5, "Input/output error", str(path))
        real(path, data)

    monkeypatch.setattr(files, "atomic_write", failing)
    monkeypatch.setattr(AuditLog, "_append", lambda self, entry, there: (_ for _ in ()).throw(
        OSError(5, "Input/output error")))
    with pytest.raises(UnsavedFaultError) as info:
        ctl.run_pass(coin_plan(24, random.Random(1)))
    assert info.value.exit_code == 3 and "Jam at card 13" in str(info.value)
    assert ctl.store.load().fault["kind"] == "jam"  # in memory: this process refuses
    with pytest.raises(FaultLatchedError):
        ctl.check_ready(24)
    monkeypatch.undo()
    assert StateStore(tmp_path).load().fault["kind"] == "interrupted"  # on disk: latched
    assert ctl.store.load().fault["kind"] == "jam"  # the disk works again: written now
    assert StateStore(tmp_path).load().fault["kind"] == "jam"


@pytest.fixture
def tiny_disk(tmp_path):
    with small_disk(tmp_path, "1m") as mnt:
        yield mnt


def fill(folder: Path) -> None:
    """Fill the disk to the last byte (as journald would)."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 16, 4096, 1):
            while True:
                try:
                    os.write(fd, bytes(size))
                except OSError:
                    break
    finally:
        os.close(fd)


def test_a_disk_that_fills_mid_pass_still_records_the_jam(sim, tiny_disk):
    ctl = controller(sim, tiny_disk, faults=("jam:13",))

    def on_card(counted, expected):
        if counted == 5:
            fill(tiny_disk)  # journald fills the card while the pass runs

    report = ctl.run_pass(coin_plan(24, random.Random(1)), on_card)
    assert report.fault is not None and report.fault.kind is FaultKind.JAM
    (tiny_disk / "filler").unlink()  # space comes back
    state = StateStore(tiny_disk).load()
    assert state.fault["kind"] == "jam" and state.jams == 1
    assert [e["counted"] for e in AuditLog(tiny_disk / "audit.jsonl").read()] == [12]
    after = controller(sim, tiny_disk)
    assert after.clear()
    fill(tiny_disk)  # full again: no room for the reserve, so no pass starts
    with pytest.raises(FileAccessError, match="the disk is full; nothing was started"):
        after.run_pass(coin_plan(24, random.Random(2)))


def test_a_jam_on_a_full_disk_via_the_cli_is_exit_3_and_latched_afterwards(tiny_disk):
    result = shuffler(tiny_disk, "--sim-fault", "jam:13", "pass")
    assert result.returncode == 3
    fill(tiny_disk)
    status = shuffler(tiny_disk, "--json", "status")
    assert json.loads(status.stdout)["fault"]["kind"] == "jam"
    again = shuffler(tiny_disk, "pass")
    assert again.returncode == 3 and "Traceback" not in again.stderr
    (tiny_disk / "filler").unlink()
    assert json.loads(shuffler(tiny_disk, "--json", "status").stdout)["fault"]["kind"] == "jam"


def test_a_torn_audit_tail_costs_no_later_record(tmp_path, capsys):
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append({"id": 1, "counted": 24})
    with open(log.path, "ab") as f:
        f.write(b'{"id": 2, "coun')  # the power went mid-append
    log.append({"id": 3, "counted": 24})
    log.append({"id": 4, "counted": 24})
    assert [e["id"] for e in log.read()] == [1, 3, 4]
    assert [e["id"] for e in log.read()] == [1, 3, 4]
    assert log.reported == {2}  # reported once, however often it is read
    assert log.path.read_bytes().count(b"\n") == 4


def test_a_damaged_state_is_copied_aside_before_the_fresh_one_replaces_it(tmp_path,
                                                                          monkeypatch):
    AuditLog(tmp_path / "audit.jsonl").append({"id": 6, "counted": 24, "fault": None})
    (tmp_path / "state.json").write_text("{not json")
    import shuffler.files as files

    real = files.atomic_write

    def fail_on_state(path, data):  # EIO on the fresh state, after the copy was made
        if path.name == "state.json":
            raise OSError(5, "Input/output error", str(path))
        real(path, data)

    monkeypatch.setattr(files, "atomic_write", fail_on_state)
    with pytest.raises(StateFileError, match="cannot be written"):
        StateStore(tmp_path).load()
    assert (tmp_path / "state.json").read_text() == "{not json"  # never no state at all
    monkeypatch.undo()
    with pytest.raises(StateFileError):
        StateStore(tmp_path).load()
    state = StateStore(tmp_path).load()
    assert state.fault["kind"] == "state_damaged"
    assert (state.passes, state.cards, state.next_pass_id) == (1, 24, 7)  # from the log
    assert all(p.read_text() == "{not json" for p in tmp_path.glob("state.json.bad-*"))


@pytest.mark.parametrize("name", ["state.json", "audit.jsonl", "machine.lock"])
@pytest.mark.parametrize("command", ["status", "pass"])
def test_a_symlinked_state_file_is_never_followed(tmp_path, name, command):
    target = tmp_path / "precious"
    target.write_text("do not touch\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / name).symlink_to(target)
    result = shuffler(state, command)
    assert target.read_text() == "do not touch\n"
    if name != "audit.jsonl" or command == "pass":  # status never opens the log
        assert result.returncode == 2, result.stderr
        assert "symbolic link" in result.stderr and "Traceback" not in result.stderr


def test_a_removed_lock_file_is_noticed_and_the_holder_stops(sim, tmp_path):
    lock = MachineLock(tmp_path).acquire("shuffler serve")
    ctl = controller(sim, tmp_path)
    ctl.guard = lock.verify
    lock.verify()
    lock.path.unlink()
    second = MachineLock(tmp_path).acquire("shuffler pass")  # it gets in: a new file
    try:
        with pytest.raises(LockLostError) as info:
            ctl.run_pass(coin_plan(24, random.Random(1)))
        assert info.value.exit_code == 3
        assert StateStore(tmp_path).load().passes == 0  # the motor never started
    finally:
        second.release()
        lock.release()


def test_temp_files_left_by_a_kill_are_removed_at_start(sim, tmp_path):
    (tmp_path / ".state.json.k2j3ab").write_text("half")
    (tmp_path / "other").write_text("mine")
    controller(sim, tmp_path).recover()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]


def test_folders_are_0750_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        make_folder(tmp_path / "a" / "b")
        MachineLock(tmp_path / "c" / "d").acquire().release()
    finally:
        os.umask(old)
    for folder in ("a", "a/b", "c", "c/d"):
        assert (tmp_path / folder).stat().st_mode & 0o777 == 0o750


def test_a_read_only_state_folder_still_shows_the_latched_jam(tiny_disk):
    assert shuffler(tiny_disk, "--sim-fault", "jam:13", "pass").returncode == 3
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)  # the SD card
    try:
        status = shuffler(tiny_disk, "--json", "status")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["fault"]["kind"] == "jam"
        assert "cannot be written (read-only?)" in status.stderr
        for command in ("pass", "clear"):  # only what must write refuses
            result = shuffler(tiny_disk, command)
            assert result.returncode == 2 and "Traceback" not in result.stderr
            assert "Read-only file system" in result.stderr
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(tiny_disk)], check=False)


def test_a_retried_append_never_writes_the_record_twice(tmp_path, monkeypatch):
    log = AuditLog(tmp_path / "audit.jsonl", reserve=Reserve(tmp_path))
    log.append({"id": 1, "counted": 24})
    assert log.reserve is not None
    log.reserve.ensure()
    real, calls = os.fsync, {"n": 0}

    def fsync_fails_once(fd):  # the write landed, then fsync failed: the retry finds it there
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync_fails_once)
    assert log.append({"id": 2, "counted": 24}) is None
    monkeypatch.undo()
    assert calls["n"] == 2  # tried once more after giving the reserve back
    other = log.append({"id": 2, "counted": 24, "x": 1})  # another record for the same id
    assert other is not None and other["counted"] == 24 and "x" not in other
    assert [(e["id"], e["seq"]) for e in log.read()] == [(1, 1), (2, 2)]
