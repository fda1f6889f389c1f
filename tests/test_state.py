"""The state file and the audit log under damage and failing disks: exit 2 naming the
path, never a traceback, never a latch lost, never a pass the log cannot record."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from shuffler.control.controller import PassController
from shuffler.core.score import Result, new_game
from shuffler.device.contract import FaultKind
from shuffler.errors import FileAccessError, StateFileError
from shuffler.store.audit import AuditLog
from shuffler.store.state import FIELDS, State, StateStore

from .cli import SHUFFLER, process

JAM = {"kind": "jam", "message": "Jam at card 13 of 24: free the throat.", "card": 13}


def shuffler(state_dir: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The installed command, as a dealer runs it (fast simulator, no service), on
    ``state_dir``: for the tests whose promise a process checks (a timeout, a real disk);
    the others run the CLI in-process (conftest's ``run``, the same command line)."""
    return process(state_dir, "--no-service", *args, state=str(state_dir), timeout=timeout)


def latched_state(**changes) -> dict:
    doc = json.loads(json.dumps(State(passes=7, cards=168, jams=1, faults=1, next_pass_id=8,
                                      fault=JAM).__dict__))
    doc.update(changes)
    return doc


def write(folder: Path, content: bytes | dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "state.json"
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return path


def test_every_field_of_the_state_has_a_check():
    assert set(FIELDS) == set(State.__dataclass_fields__)
    assert all(callable(spec["check"]) for spec in FIELDS.values())


def test_a_saved_state_reads_back(tmp_path):
    store = StateStore(tmp_path)
    state = State(**{k: v for k, v in latched_state(
        in_flight={"id": 7, "cards": 24, "started": "t", "device": "sim", "mode": "planned",
                   "hand": 2, "pass": 1},
        hand={"number": 2, "passes": 4, "cards": 24, "mode": "coin", "done": 1},
        battery=[[24, 8.5], [24, 8.49]],
        score=new_game(("N", "E", "S", "W")).add(Result(0, 5, True)).to_dict()).items()})
    store.save(state)
    assert store.load() == state


@pytest.mark.parametrize(("changes", "field"), [
    ({"fault": {}}, "fault.kind"),
    ({"fault": False}, "fault"),
    ({"fault": 0}, "fault"),
    ({"fault": ""}, "fault"),
    ({"fault": []}, "fault"),
    ({"fault": {"kind": "jammed", "message": "x"}}, "fault.kind"),
    ({"fault": {"kind": "jam", "message": "x", "card": "13"}}, "fault.card"),
    ({"in_flight": 5}, "in_flight"),
    ({"in_flight": {"id": "7"}}, "in_flight.id"),
    ({"in_flight": {"id": 9}}, "in_flight.id"),  # not below next_pass_id: ids would repeat
    ({"battery": {"24": 8.5}}, "battery"),
    ({"battery": [[24, "8.5"]]}, "battery[0][1]"),
    ({"battery": [[24]]}, "battery[0]"),
    ({"hand": []}, "hand"),
    ({"hand": {"number": 1, "passes": 4, "cards": 24, "mode": "coin", "done": 5}}, "hand.done"),
    ({"hand": {"number": 1, "passes": 4, "cards": 24, "mode": "coin"}}, "hand.done"),
    ({"passes": True}, "passes"),
    ({"dealer": -1}, "dealer"),
    ({"deck": 2}, "deck"),
    ({"version": 2}, "version"),
    ({"extra": [1]}, "extra"),
    ({"score": {"number": 1}}, "score.target"),
    ({"score": {"number": 1, "target": 10, "teams": [["N", "S"], ["E", "W"]],
                "hands": [{"makers": 2, "tricks": 3, "alone": False}]}}, "score.hands[0].makers"),
])
def test_a_wrong_field_is_refused_by_name_and_the_latch_is_kept(tmp_path, changes, field):
    path = write(tmp_path, latched_state(**changes))
    with pytest.raises(StateFileError) as err:
        StateStore(tmp_path).load()
    message = str(err.value)
    assert err.value.exit_code == 2
    assert message.startswith(f"{path}: {field}: ") and "shuffler clear" in message
    aside = list(tmp_path.glob("state.json.bad-*"))
    assert len(aside) == 1 and json.loads(aside[0].read_bytes()) == latched_state(**changes)
    fresh = StateStore(tmp_path).load()  # the fresh state keeps the machine locked
    assert fresh.fault["kind"] == FaultKind.STATE_DAMAGED.value and fresh.next_pass_id == 1


@pytest.mark.parametrize(("content", "problem"), [
    (b'{"fault": null, "version": 1, "passes": 3\xff}', "(file): not UTF-8 text"),
    (b"[" * 100_000 + b"]" * 100_000, "(file): nested too deeply"),
    (b'{"version": 1}', "fault: missing"),
    (b"{", "(file): not valid JSON"),
    (b"", "(file): not valid JSON"),
    (b"[]", "(top level): expected a JSON object"),
    (b'{"version": 1, "fault": null, "passes": NaN}', "passes: expected a whole number"),
    (b'{"version": 1, "fault": null, "battery": [[24, Infinity]]}', "battery[0][1]"),
])
def test_a_damaged_file_is_set_aside(tmp_path, content, problem):
    write(tmp_path, content)
    with pytest.raises(StateFileError, match=f"state.json: {problem}".replace("(", r"\(")
                       .replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        StateStore(tmp_path).load()
    assert (tmp_path / "state.json").exists() and len(list(tmp_path.glob("*.bad-*"))) == 1


def test_a_fresh_state_never_reuses_a_pass_id_of_the_audit_log(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl")
    for i in (1, 2, 41):
        log.append({"id": i, "counted": 24})
    write(tmp_path, b"garbage")
    with pytest.raises(StateFileError):
        StateStore(tmp_path).load()
    assert StateStore(tmp_path).load().next_pass_id == 42


@pytest.mark.parametrize("bad", [{}, False, 0, ""])
def test_a_falsy_fault_never_drops_a_latched_jam(run, tmp_path, bad):
    """Before: `fault: {}` read as "no fault" and the next pass ran."""
    state_dir = tmp_path / "s"
    write(state_dir, latched_state(fault=bad))
    first = run("pass", state=str(state_dir))
    assert first.exit_code == 2 and "Traceback" not in first.stderr
    assert f"{state_dir / 'state.json'}: fault" in first.stderr
    again = run("pass", state=str(state_dir))
    assert again.exit_code == 3 and "state_damaged" in again.stderr
    assert run("clear", state=str(state_dir)).exit_code == 0
    assert run("pass", state=str(state_dir)).exit_code == 0


@pytest.mark.parametrize(("command", "content"), [
    ("status", json.dumps(latched_state(fault="jam")).encode()),
    ("clear", json.dumps(latched_state(in_flight=[1])).encode()),
    ("battery", json.dumps(latched_state(battery=[["a", 1]])).encode()),
    ("hand", json.dumps(latched_state(hand={"passes": "4"})).encode()),
    ("status", b"\xff\xfe{}"),
    ("clear", b"[" * 5000),
    # an older file's last hand keeps its fault as the kind alone: one the code knows
    ("status", json.dumps(latched_state(last_hand={
        "number": 3, "passes_done": 2, "passes": 5, "completed": False, "tracking": True,
        "distance": None, "fault": "stall"})).encode()),
], ids=["fault", "in_flight", "battery", "hand", "bytes", "nesting", "last_fault"])
def test_no_command_crashes_on_a_damaged_state_file(run, tmp_path, command, content):
    """Before: 179 of 921 such runs exited 1 with a traceback, status and clear included."""
    write(tmp_path, content)
    result = run(command, state=str(tmp_path))
    assert result.exit_code == 2, result.stderr
    assert "Traceback" not in result.stderr and str(tmp_path / "state.json") in result.stderr
    assert "set aside" in result.stderr


def test_a_pass_never_starts_when_its_audit_record_cannot_be_written(run, tmp_path):
    """Before: the pass dealt its cards, exited 1 and left a pass in flight that broke
    every later command."""
    (tmp_path / "audit.jsonl").mkdir()  # not a file: no record can be appended
    result = run("--json", "pass", state=str(tmp_path))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    message = json.loads(result.stdout)["error"]["message"]  # --json: on stdout only
    assert f"{tmp_path / 'audit.jsonl'}: cannot write the audit log" in message
    assert "nothing was started" in message and result.stderr == ""
    assert StateStore(tmp_path).load().in_flight is None
    assert StateStore(tmp_path).load().passes == 0
    status = run("status", state=str(tmp_path))  # nothing left broken behind
    assert status.exit_code == 0, status.stderr


@pytest.mark.parametrize(("make", "says"), [
    (lambda p: os.mkfifo(p), "a FIFO, not a regular file"),
    (lambda p: p.symlink_to("/dev/full"), "a symbolic link, which is never followed")])
def test_an_audit_log_that_is_not_a_file_stops_the_pass_before_the_motor(run, tmp_path, make,
                                                                        says):
    make(tmp_path / "audit.jsonl")
    result = run("hand", "--passes", "2", state=str(tmp_path))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "audit.jsonl: cannot write the audit log" in result.stderr and says in result.stderr
    assert StateStore(tmp_path).load().passes == 0


@pytest.mark.parametrize("where", ["file-as-folder", "proc"])
def test_a_state_folder_that_cannot_be_made_is_exit_2_with_the_path(run, tmp_path, where):
    if where == "file-as-folder":
        (tmp_path / "plain").write_text("x")
        state_dir = tmp_path / "plain" / "state"
    else:
        state_dir = Path("/proc/shuffler-state")
    for command in ("pass", "clear"):  # status only reads: a missing folder is no state
        result = run(command, state=str(state_dir))
        assert result.exit_code == 2, result.stderr
        assert str(state_dir) in result.stderr and "Traceback" not in result.stderr


def test_a_state_file_that_is_a_fifo_or_a_folder_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "state.json")
    result = shuffler(tmp_path, "status", timeout=20)
    assert result.returncode == 2 and "FIFO" in result.stderr


def test_a_folder_of_another_user_is_exit_2_naming_it(tmp_path):
    """Permission denied, as the non-root user a service runs as sees it."""
    if os.geteuid() == 0:
        pytest.skip("root reads any folder; the folder tests above cover the path")
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"shuffler-perm-{os.getpid()}"
    folder.mkdir(mode=0o755, exist_ok=True)
    try:
        write(folder / "state", latched_state())
        os.chmod(folder / "state", 0o000)
        env = {**os.environ, "SHUFFLER_CONFIG": "", "HOME": str(folder)}
        result = subprocess.run([SHUFFLER, "--state-dir", str(folder / "state"), "status"],
                                capture_output=True, text=True, timeout=60, env=env)
        assert result.returncode == 2, result.stderr
        assert "Permission denied" in result.stderr and str(folder / "state") in result.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def small_disk(tmp_path: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` mounted under ``tmp_path`` (skips unless root)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                                            "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("needs root and tmpfs to make a tiny disk")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_disk_under_the_state_is_exit_2(run, tmp_path):
    with small_disk(tmp_path, "16k") as mnt:
        (mnt / "filler").write_bytes(b"\0" * 12288)  # leaves less than a state file needs
        store = StateStore(mnt)
        with pytest.raises(FileAccessError, match=f"{mnt}.*No space left"):
            store.save(State(battery=[[24, 8.0]] * 500))
        # the audit log's disk is full: the motor never starts
        result = run("pass", state=str(mnt))
        assert result.exit_code == 2 and "Traceback" not in result.stderr
        assert "the disk is full; nothing was started" in result.stderr
        assert StateStore(mnt).load().passes == 0


def test_a_kill_between_the_audit_record_and_the_counters_keeps_the_latch(sim, tmp_path):
    """A pass that jammed reached the audit log, then the process died before the state
    was saved: recovery restores the counters and the latch (before: the jam was lost)."""
    controller = PassController(sim.make(24), StateStore(tmp_path))
    controller.update(lambda s: setattr(s, "in_flight", {"id": 1, "cards": 24})
                      or setattr(s, "next_pass_id", 2))
    controller.audit.append({"id": 1, "counted": 12, "expected": 24, "fault": JAM})
    controller.recover()
    state = StateStore(tmp_path).load()
    assert state.fault == JAM and (state.passes, state.cards, state.jams) == (1, 12, 1)
    assert state.in_flight is None
