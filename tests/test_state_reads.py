"""The state file is read once a hand, not once a step (issue 48: a one-pass hand read it
16 times). A store keeps what it last read or wrote with the file's identity; what
another writer puts there is read again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from shuffler.store import state as state_module
from shuffler.store.state import State, StateStore
from tests.cli import invoke


@pytest.fixture
def reads(monkeypatch) -> list[Path]:
    """Every read of a state file in this process, by path."""
    seen: list[Path] = []
    real = state_module.read_limited

    def counting(path, *args, **kwargs):
        if Path(path).name == "state.json":
            seen.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(state_module, "read_limited", counting)
    return seen


@pytest.mark.parametrize("passes", [1, 3])
def test_a_hand_reads_the_state_file_at_most_twice(tmp_path, reads, passes):
    """``shuffler hand`` without a service: the command's look for a pending hand, and
    the session's one read; none more for each pass, the stack, the record or the end."""
    result = invoke(tmp_path, "--json", "hand", "--passes", str(passes))
    assert result.exit_code == 0, result.output
    hand = json.loads(result.stdout)["hand"]
    assert hand["completed"] and hand["passes"] == passes
    assert len(reads) <= 2, reads
    # the hand's steps were written: the next command reads what they wrote
    again = invoke(tmp_path, "--json", "status")
    assert json.loads(again.stdout)["counters"] == {
        "hands": 1, "passes": passes, "cards": 24 * passes, "jams": 0, "faults": 0,
        "interrupted": 0}


def test_a_write_by_another_store_is_read(tmp_path, reads):
    mine, theirs = StateStore(tmp_path), StateStore(tmp_path)
    mine.save(State(passes=1))
    assert mine.load().passes == 1 and reads == []  # as written: not read again
    theirs.save(State(passes=2))  # another process: the file replaced
    assert mine.load().passes == 2 and len(reads) == 1
    assert mine.load().passes == 2 and len(reads) == 1


def test_a_file_changed_in_place_is_read(tmp_path, reads):
    store = StateStore(tmp_path)
    store.save(State(passes=1))
    doc = json.loads(store.path.read_text())
    doc["passes"] = 12345
    store.path.write_text(json.dumps(doc))  # same inode, another size
    assert store.load().passes == 12345
    os.utime(store.path, ns=(1, 1))  # same size, another time
    assert store.load().passes == 12345 and len(reads) == 2


def test_a_file_damaged_after_it_was_kept_is_refused(tmp_path):
    from shuffler.errors import StateFileError

    store = StateStore(tmp_path)
    store.save(State(passes=1))
    store.load()
    store.path.write_text('{"passes": "many"}')
    with pytest.raises(StateFileError, match="passes"):
        store.load()
    assert store.load().fault["kind"] == "state_damaged"  # the fresh one, latched


def test_a_file_removed_is_a_fresh_state(tmp_path):
    store = StateStore(tmp_path)
    store.save(State(passes=7))
    store.path.unlink()
    assert store.load().passes == 0


def test_what_a_caller_changes_is_not_the_stores(tmp_path, reads):
    store = StateStore(tmp_path)
    store.save(State(passes=1, battery=[[24, 0.5]]))
    loaded = store.load()
    loaded.passes, loaded.battery[0][0] = 99, 99
    again = store.load()
    assert (again.passes, again.battery) == (1, [[24, 0.5]]) and reads == []


def test_no_file_is_kept_until_one_is_written(tmp_path, reads):
    mine = StateStore(tmp_path)
    assert mine.load() == State() and mine.load() == State() and len(reads) == 1
    StateStore(tmp_path).save(State(passes=3))  # another process writes the first one
    assert mine.load().passes == 3 and len(reads) == 2


def test_a_file_removed_right_after_a_write_is_not_taken_for_it(tmp_path, monkeypatch):
    """The write, then the file gone before the store looks at it: the next load finds no
    file and says so (a fresh state), not the state this store wrote."""
    store = StateStore(tmp_path)
    real = state_module.write_file

    def write_then_removed(path, *args, **kwargs):
        real(path, *args, **kwargs)
        Path(path).unlink()

    monkeypatch.setattr(state_module, "write_file", write_then_removed)
    store.save(State(passes=5))
    assert store.load() == State()


def test_a_save_that_fails_keeps_nothing_stale(tmp_path, monkeypatch):
    """A write refused (a full disk): the store goes on with the unsaved state, and once
    written the file is read as it is."""
    from shuffler.errors import FileAccessError

    store = StateStore(tmp_path)
    store.save(State(passes=1))

    def full(*args, **kwargs):
        raise FileAccessError("state file: no space left on the device")

    monkeypatch.setattr(state_module, "write_file", full)
    with pytest.raises(FileAccessError):
        store.save(State(passes=2))
    assert store.load().passes == 2  # the unsaved one, trusted over the file
    monkeypatch.undo()
    assert store.load().passes == 2  # written at last by that load
    StateStore(tmp_path).save(State(passes=3))
    assert store.load().passes == 3
