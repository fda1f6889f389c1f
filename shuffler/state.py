"""The persistent state: counters, the dealer, a latched fault. Written atomically.

A write goes to a temporary file in the same folder, is flushed to disk, then
renamed over the old file, so a crash leaves either the old or the new state,
never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import BadInputError

STATE_VERSION = 1


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "shuffler"


@dataclass
class State:
    hands_completed: int = 0
    dealer: int | None = None  # index into the configured seats; None: the first dealer
    passes: int = 0
    cards: int = 0
    jams: int = 0
    faults: int = 0
    fault: dict[str, Any] | None = None  # the latched fault, if any
    battery: list[list[float]] = field(default_factory=list)  # [cards, volts] per pass
    interrupted: int = 0  # passes cut short by a crash or a kill
    next_pass_id: int = 1
    in_flight: dict[str, Any] | None = None  # the pass running now, for crash recovery
    hand: dict[str, Any] | None = None  # the hand in progress: number, passes, cards, done
    deck: int = 0  # with two decks: the one the next hand shuffles (0 = A, 1 = B)
    score: dict[str, Any] | None = None  # the euchre game being scored (shuffler.score)
    version: int = STATE_VERSION
    extra: dict[str, Any] = field(default_factory=dict)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class StateStore:
    """``state.json`` in a state folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / "state.json"

    def load(self) -> State:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return State()
        except OSError as e:
            raise BadInputError(f"{self.path}: cannot read the state file: {e}") from None
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            known = {k: data[k] for k in State.__dataclass_fields__ if k in data}
            state = State(**known)
            for key in ("hands_completed", "dealer", "passes", "cards", "jams", "faults",
                        "interrupted", "next_pass_id", "deck"):
                value = getattr(state, key)
                is_count = type(value) is int and value >= 0
                if not is_count and not (key == "dealer" and value is None):
                    raise ValueError(f"{key} is not a count")
        except (ValueError, TypeError) as e:
            raise BadInputError(
                f"{self.path}: the state file is damaged ({e}); move it aside to start "
                "afresh (a latched fault recorded there would be forgotten)"
            ) from None
        return state

    def save(self, state: State) -> None:
        atomic_write(
            self.path, (json.dumps(asdict(state), indent=2, sort_keys=True) + "\n").encode()
        )
