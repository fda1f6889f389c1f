"""The persistent state: counters, the dealer, a latched fault. Written atomically.

Every field has a type and a range (:data:`FIELDS`), checked on load. A file that
fails the check is never half-trusted: it is copied aside as ``state.json.bad-<time>``,
a fresh state holding a latched ``state_damaged`` fault (the damaged file may have
held a jam) replaces it, and the command refuses with exit 2, naming the file, the
field and the problem. The copy is made before the replacement, so a crash at any
step leaves the damaged file or the latched fresh one, never no state at all. The
fresh state's counters are rebuilt from the audit log's whole records. The dealer
continues with ``shuffler clear``, the only way any latched fault goes away.

A state that cannot be written (a full or failing disk) is kept in memory: this
process goes on seeing it (a latched fault still refuses the next pass) and writes it
as soon as it can. A preallocated reserve (:class:`shuffler.files.Reserve`) is given
up when a write fails, so the write that records a fault finds room. The state
folder's files are never opened through a symlink.

A store keeps the state it last read or wrote, with the file's identity then (its
inode, size and modification time): a load that finds the file as it was returns a copy
of it without reading the file again (a one-pass hand reads it once). One process
writes the file at a time (the machine's lock); any other write replaces it (a new
inode) or changes its time or size, and the next load reads it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import reprlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from shuffler.constants import MAX_CARDS
from shuffler.core.planning import Mode
from shuffler.device.contract import Fault, FaultKind
from shuffler.errors import FileAccessError, StateFileError
from shuffler.files import (
    Reserve,
    atomic_write,
    clean_temp_files,
    default_state_dir,
    read_limited,
    retry_with_reserve,
    why,
    write_file,
)

__all__ = ["FIELDS", "STATE_VERSION", "State", "StateStore", "atomic_write",
           "check_state", "default_state_dir"]

STATE_VERSION = 1
MAX_PASSES = 30  # per hand, as the config and the CLI allow
MAX_COUNT = 10**15  # far beyond any machine's life, short of absurd
MAX_HISTORY = 1000  # battery records; the controller keeps 200
MAX_TEXT = 4000


# -- the schema ----------------------------------------------------------------


class Invalid(Exception):
    """One field fails the schema: ``where`` names it (``fault.kind``)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


_short = reprlib.Repr()
_short.maxlevel, _short.maxstring, _short.maxother, _short.maxlist, _short.maxdict = 3, 40, 40, 4, 4

Check = Callable[[Any, str], None]


def _fail(where: str, expected: str, got: Any) -> NoReturn:
    raise Invalid(where, f"expected {expected}, got {_short.repr(got)}")


def whole(lo: int, hi: int, *, none: bool = False) -> Check:
    """A whole number (never a bool) from ``lo`` to ``hi``; None too with ``none``."""
    def check(v: Any, where: str) -> None:
        if v is None and none:
            return
        if type(v) is not int or not lo <= v <= hi:
            _fail(where, f"a whole number from {lo} to {hi}" + (" or null" if none else ""), v)
    return check


def number(lo: float, hi: float) -> Check:
    def check(v: Any, where: str) -> None:
        if type(v) not in (int, float) or not math.isfinite(v) or not lo <= v <= hi:
            _fail(where, f"a number from {lo} to {hi}", v)
    return check


def text(*, choices: tuple[str, ...] = ()) -> Check:
    def check(v: Any, where: str) -> None:
        if choices and v not in choices:
            _fail(where, " or ".join(map(repr, choices)), v)
        if not isinstance(v, str) or not v or len(v) > MAX_TEXT:
            _fail(where, f"a text of 1 to {MAX_TEXT} characters", v)
    return check


def _scalar(v: Any, where: str) -> None:
    """Keys a newer part of the program may add to a record: plain JSON values only."""
    if isinstance(v, list):
        for i, item in enumerate(v[:MAX_HISTORY + 1]):
            _scalar(item, f"{where}[{i}]")
        if len(v) > MAX_HISTORY:
            _fail(where, f"at most {MAX_HISTORY} items", v)
        return
    if v is None or type(v) in (bool, int) or (isinstance(v, str) and len(v) <= MAX_TEXT):
        return
    if type(v) is float and math.isfinite(v):
        return
    _fail(where, "a number, a text, true, false, null or a list of them", v)


def record(required: dict[str, Check], optional: dict[str, Check] | None = None, *,
           none: bool = True, then: Callable[[dict, str], None] | None = None) -> Check:
    """A JSON object with these keys (null too, with ``none``); other keys must hold
    plain values, so a field a newer release adds does not make the file unreadable."""
    optional = optional or {}

    def check(v: Any, where: str) -> None:
        if v is None and none:
            return
        if not isinstance(v, dict):
            _fail(where, "an object" + (" or null" if none else ""), v)
        for key, sub in required.items():
            if key not in v:
                raise Invalid(f"{where}.{key}", "missing")
            sub(v[key], f"{where}.{key}")
        for key, item in v.items():
            if key in optional:
                optional[key](item, f"{where}.{key}")
            elif key not in required:
                _scalar(item, f"{where}.{key}")
        if then:
            then(v, where)
    return check


def _battery(v: Any, where: str) -> None:
    if not isinstance(v, list) or len(v) > MAX_HISTORY:
        _fail(where, f"a list of at most {MAX_HISTORY} [cards, volts] pairs", v)
    cards, volts = whole(1, MAX_CARDS), number(0.0, 30.0)
    for i, pair in enumerate(v):
        if not isinstance(pair, list) or len(pair) != 2:
            _fail(f"{where}[{i}]", "a [cards, volts] pair", pair)
        cards(pair[0], f"{where}[{i}][0]")
        volts(pair[1], f"{where}[{i}][1]")


def _hand_done(v: dict, where: str) -> None:
    if v["done"] > v["passes"]:
        _fail(f"{where}.done", f"at most passes ({v['passes']})", v["done"])


def nullable(check: Check) -> Check:
    """``check``, or null."""
    def maybe(v: Any, where: str) -> None:
        if v is not None:
            check(v, where)
    return maybe


def boolean(v: Any, where: str) -> None:
    if type(v) is not bool:
        _fail(where, "true or false", v)


def items(each: Check, most: int) -> Check:
    """A list of at most ``most`` items, each passing ``each``."""
    def check(v: Any, where: str) -> None:
        if not isinstance(v, list) or len(v) > most:
            _fail(where, f"a list of at most {most} items", v)
        for i, item in enumerate(v):
            each(item, f"{where}[{i}]")
    return check


def _teams(v: Any, where: str) -> None:
    items(items(text(), 4), 2)(v, where)
    if len(v) != 2 or not all(v):
        _fail(where, "two teams of seat names", v)


#: the rules an older release's watch kept counters for (the ``watch`` field below)
RULES = ("last-card", "first-card", "taller", "not-last-card", "not-first-card", "shorter")


def _watch(v: Any, where: str) -> None:
    """Each seat's watch, as an older release wrote it: rule -> [run, seen, against]."""

    if not isinstance(v, dict) or len(v) > 8:
        _fail(where, "an object of at most 8 seats", v)
    counter = whole(0, MAX_COUNT)
    for seat, rules in v.items():
        text()(seat, f"{where} (a seat)")
        if not isinstance(rules, dict) or not set(rules) <= set(RULES):
            _fail(f"{where}.{seat}", f"an object of rules ({', '.join(RULES)})", rules)
        for rule, trail in rules.items():
            if not isinstance(trail, list) or len(trail) != 3:
                _fail(f"{where}.{seat}.{rule}", "[run, seen, against]", trail)
            for i, c in enumerate(trail):
                counter(c, f"{where}.{seat}.{rule}[{i}]")


def _extra(v: Any, where: str) -> None:
    if not isinstance(v, dict):
        _fail(where, "an object", v)


MODES = tuple(m.value for m in Mode)
FAULT = record({"kind": text(choices=tuple(k.value for k in FaultKind)), "message": text()},
               {"card": whole(1, MAX_CARDS, none=True)})
IN_FLIGHT = record({"id": whole(1, MAX_COUNT)},
                   {"cards": whole(1, MAX_CARDS), "started": text(), "device": text(),
                    "mode": text(choices=MODES), "hand": whole(1, MAX_COUNT),
                    "pass": whole(1, MAX_PASSES)})
HAND = record({"number": whole(1, MAX_COUNT), "passes": whole(1, MAX_PASSES),
               "cards": whole(1, MAX_CARDS), "mode": text(choices=MODES),
               "done": whole(0, MAX_PASSES)}, then=_hand_done)


#: the euchre game being scored, as shuffler.core.score.Game.to_dict writes it
_GAME_KEYS: dict[str, Check] = {
    "number": whole(1, MAX_COUNT), "target": whole(1, 1000), "teams": _teams,
    "hands": items(record({"makers": whole(0, 1), "tricks": whole(0, 5), "alone": boolean},
                          {"renege": whole(0, 1, none=True)}, none=False), 10_000)}
#: a game this table played before the current one (shuffler.core.score.Game.summary)
_PLAYED = record({"number": whole(1, MAX_COUNT), "target": whole(1, 1000),
                  "team_names": items(text(), 2), "totals": items(whole(0, 100_000), 2),
                  "winner": whole(0, 1, none=True), "hands": whole(0, 10_000)},
                 {"names": nullable(items(text(), 2))}, none=False)
_GAME_EXTRA: dict[str, Check] = {"version": whole(0, MAX_COUNT),
                                 "names": nullable(items(text(), 2)),
                                 "played": items(_PLAYED, 1000)}
#: one step of the score's undo or redo history: what it did, and the game before it
_STEP = record({"label": text(), "game": record(_GAME_KEYS, _GAME_EXTRA, none=False)},
               none=False)
SCORE = record(_GAME_KEYS, {**_GAME_EXTRA, "undo": items(_STEP, 50), "redo": items(_STEP, 50)})


def _last_fault(v: Any, where: str) -> None:
    """The fault that stopped the last hand: a whole fault (an older file: its kind, one
    the code still knows, as a whole fault's must be)."""
    if isinstance(v, str):
        text(choices=tuple(k.value for k in FaultKind))(v, where)
    else:
        FAULT(v, where)


#: the last hand's summary (shuffler.control.reports.last_hand)
LAST_HAND = record({"number": whole(1, MAX_COUNT), "passes_done": whole(0, MAX_PASSES),
                    "passes": whole(1, MAX_PASSES), "completed": boolean,
                    "tracking": boolean},
                   {"distance": nullable(number(0.0, 1.0)), "fault": _last_fault,
                    "dealer": text(), "distance_note": nullable(text()),
                    "distance_exact": nullable(boolean)})


def _schema(check: Check, *, required: bool = False) -> Any:
    return {"check": check, "required": required}


@dataclass
class State:
    hands_completed: int = field(default=0, metadata=_schema(whole(0, MAX_COUNT)))
    #: index into the configured seats; None: the first dealer
    dealer: int | None = field(default=None, metadata=_schema(whole(0, 7, none=True)))
    passes: int = field(default=0, metadata=_schema(whole(0, MAX_COUNT)))
    cards: int = field(default=0, metadata=_schema(whole(0, MAX_COUNT)))
    jams: int = field(default=0, metadata=_schema(whole(0, MAX_COUNT)))
    faults: int = field(default=0, metadata=_schema(whole(0, MAX_COUNT)))
    #: the latched fault, if any: only ``clear`` sets it back to None
    fault: dict[str, Any] | None = field(default=None, metadata=_schema(FAULT, required=True))
    #: [cards, volts under load] per pass
    battery: list[list[float]] = field(default_factory=list, metadata=_schema(_battery))
    #: passes cut short by a crash or a kill
    interrupted: int = field(default=0, metadata=_schema(whole(0, MAX_COUNT)))
    next_pass_id: int = field(default=1, metadata=_schema(whole(1, MAX_COUNT)))
    #: the pass running now, for crash recovery
    in_flight: dict[str, Any] | None = field(default=None, metadata=_schema(IN_FLIGHT))
    #: the hand in progress: number, passes, cards, mode, done
    hand: dict[str, Any] | None = field(default=None, metadata=_schema(HAND))
    #: with two decks: the one the next hand shuffles (0 = A, 1 = B)
    deck: int = field(default=0, metadata=_schema(whole(0, 1)))
    #: the euchre game being scored (shuffler.core.score)
    score: dict[str, Any] | None = field(default=None, metadata=_schema(SCORE))
    #: the last hand's summary, as the page and ``status`` show it
    last_hand: dict[str, Any] | None = field(default=None, metadata=_schema(LAST_HAND))
    #: an older release's watch on departures (counters only, never a plan): read so
    #: its state files load, never written now that every stack is held to the light
    watch: dict[str, dict[str, list[int]]] = field(default_factory=dict,
                                                   metadata=_schema(_watch))
    version: int = field(default=STATE_VERSION,
                         metadata=_schema(whole(1, STATE_VERSION), required=True))
    extra: dict[str, Any] = field(default_factory=dict, metadata=_schema(_extra))


#: field name -> its check and whether the file must hold it
FIELDS: dict[str, dict[str, Any]] = {f.name: dict(f.metadata) for f in fields(State)}


def check_state(doc: Any) -> State:
    """The State ``doc`` (parsed JSON) describes; :class:`Invalid` if any field fails."""
    if not isinstance(doc, dict):
        _fail("(top level)", "a JSON object", doc)
    if type(doc.get("version")) is int and doc["version"] > STATE_VERSION:
        raise Invalid("version", f"written by a newer shuffler (state version "
                                 f"{doc['version']}; this one reads {STATE_VERSION})")
    for name, spec in FIELDS.items():
        if name in doc:
            spec["check"](doc[name], name)
        elif spec["required"]:
            raise Invalid(name, "missing")
    flight = doc.get("in_flight")
    if flight is not None and flight["id"] >= doc.get("next_pass_id", 1):
        _fail("in_flight.id", f"less than next_pass_id ({doc.get('next_pass_id', 1)})",
              flight["id"])
    return State(**{name: doc[name] for name in FIELDS if name in doc})


# -- the store -------------------------------------------------------------------


#: the identity of a state file that is not there (no inode is 0)
NO_FILE = (0, -1, 0)


class StateStore:
    """``state.json`` in a state folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / "state.json"
        self.reserve = Reserve(self.folder)
        #: the state the last save could not write; this process trusts it over the file
        self.unsaved: State | None = None
        #: the file's identity when it was last read or written, and the state it held
        self._known: tuple[tuple[int, int, int], State] | None = None

    def _identity(self) -> tuple[int, int, int] | None:
        """The file's inode, size and modification time; :data:`NO_FILE` when there is
        none; None when it cannot be looked at (the read says why)."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return NO_FILE
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _remember(self, identity: tuple[int, int, int] | None, state: State) -> None:
        self._known = None if identity is None else (identity, copy.deepcopy(state))

    def load(self) -> State:
        if self.unsaved is not None:
            pending = self.unsaved
            with contextlib.suppress(FileAccessError):  # written at last: the disk has room
                self.save(pending)
            return pending
        identity = self._identity()  # taken first: a write after it is read next time
        known = self._known
        if known is not None and identity is not None and known[0] == identity:
            return copy.deepcopy(known[1])
        self._known = None
        raw = read_limited(self.path, "state file", error=FileAccessError, follow=False)
        if raw is None:
            self._remember(identity if identity == NO_FILE else None, State())
            return State()
        try:
            try:
                doc = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise Invalid("(file)", f"not UTF-8 text (byte {e.start})") from None
            except RecursionError:
                raise Invalid("(file)", "nested too deeply") from None
            except ValueError as e:
                raise Invalid("(file)", f"not valid JSON ({e})") from None
            state = check_state(doc)
        except Invalid as bad:
            raise self._set_aside(bad, raw) from None
        self._remember(identity, state)
        return state

    def save(self, state: State) -> None:
        """Write ``state``; if that fails it is kept in memory (see the module notes) and
        the :class:`FileAccessError` says why."""
        data = json.dumps(asdict(state), indent=2, sort_keys=True, allow_nan=False) + "\n"
        self._known = None
        try:
            write_file(self.path, data.encode(), "state file", self.reserve)
        except FileAccessError:
            self.unsaved = state
            raise
        self.unsaved = None
        written = self._identity()  # gone already (removed just after): nothing is kept
        self._remember(None if written == NO_FILE else written, state)

    def clean(self) -> list[str]:
        """Remove the temporary files a killed write left (with the machine's lock held)."""
        return clean_temp_files(self.folder, (self.path.name,))

    def _set_aside(self, bad: Invalid, raw: bytes) -> StateFileError:
        """Copy the damaged file aside, then put a fresh state with a latched fault in
        its place; the error to raise, saying what was wrong and how to go on."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        aside = self.path.with_name(f"{self.path.name}.bad-{stamp}")
        head = f"{self.path}: {bad.where}: {bad.problem}."
        try:
            retry_write(self.reserve, aside, raw)
        except OSError as e:
            return StateFileError(
                f"{head} It cannot be set aside ({why(e)}); nothing was started. Fix the "
                f"field, or move the file away and then run `shuffler clear`.")
        message = (f"The state file was damaged ({bad.where}: {bad.problem}) and was set aside "
                   f"as {aside.name}. Check the machine: no card in the throat, the pack in "
                   "the tray; then run `shuffler clear`.")
        fresh = self._rebuilt()
        fresh.fault = Fault(FaultKind.STATE_DAMAGED, message).to_json()
        try:
            self.save(fresh)
        except FileAccessError as e:
            return StateFileError(f"{head} A copy was set aside as {aside}, but a fresh state "
                                  f"cannot be written ({e}); nothing was started.")
        return StateFileError(
            f"{head} It was set aside as {aside}; nothing was started. A fresh state file "
            "holds a latched fault: check the machine (no card in the throat, the pack in "
            "the tray), then run `shuffler clear`. The counters were rebuilt from the audit "
            f"log (the old ones are in {aside.name}).")

    def _rebuilt(self) -> State:
        """A state whose counters and next pass id come from the audit log's whole
        records, so no pass id is used twice and no pass is forgotten."""
        from shuffler.store.audit import AuditLog, counters

        try:
            entries = list(AuditLog(self.folder / "audit.jsonl").read())
        except FileAccessError:
            entries = []
        state = State()
        for name, value in counters(entries).items():
            setattr(state, name, value)
        return state


def retry_write(reserve: Reserve, path: Path, data: bytes) -> None:
    retry_with_reserve(reserve, lambda: atomic_write(path, data))
