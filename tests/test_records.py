"""The result records (shuffler/control/reports.py, the events of shuffler/control/events.py)
held to shuffler/schemas: each field is its JSON object's key, in the schema's order, and
a real one's JSON is what its schema says."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import pytest

from hardware_sim import SimDevice, parse_fault_specs
from shuffler.config import Config
from shuffler.control import reports, scorebook
from shuffler.control.controller import PassController
from shuffler.control.events import (
    CardCounted,
    PassReported,
    PassStarted,
    Progress,
    Resumed,
    StackAsked,
    TouchIgnored,
)
from shuffler.control.session import Session
from shuffler.core.battery import Figures, MonitorFault
from shuffler.core.record import Record, key
from shuffler.device.contract import DeviceInfo, Fault
from shuffler.schemas import load, validate
from shuffler.store.state import StateStore


def defs(name: str) -> dict[str, Any]:
    return load("defs")["$defs"][name]


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The object of a ``{"anyOf": [object, null]}`` property."""
    return next(s for s in schema.get("anyOf", [schema]) if s.get("type") == "object")


def prop(schema: dict[str, Any], name: str) -> dict[str, Any]:
    return nullable(schema["properties"][name])


#: every record, and the object of the schema its JSON keeps (without the envelope's
#: "schema", which the CLI adds at its edge)
RECORDS: dict[type[Record], dict[str, Any]] = {
    Fault: defs("fault"),
    DeviceInfo: defs("device"),
    Figures: defs("battery"),
    MonitorFault: prop(load("battery"), "monitor"),
    reports.PassResult: defs("pass_report"),
    reports.PassAnswer: load("pass"),
    reports.HandResult: prop(load("hand"), "hand"),
    reports.HandAnswer: load("hand"),
    reports.LastHand: prop(load("status"), "last_hand"),
    reports.HandInProgress: prop(load("status"), "hand_in_progress"),
    reports.Counters: prop(load("status"), "counters"),
    reports.HealthReport: prop(load("status"), "health"),
    reports.ServiceStatus: load("status"),
    reports.BatteryReport: load("battery"),
    reports.Cleared: load("clear"),
    reports.Stopped: load("stop"),
    scorebook.ScoreAnswer: load("score"),
    scorebook.Score: prop(load("score"), "score"),
    scorebook.ScoredHand: prop(load("score"), "score")["properties"]["hands"]["items"],
    scorebook.PlayedGame: prop(load("score"), "score")["properties"]["played"]["items"],
}


def event(name: str) -> dict[str, Any]:
    """The socket event ``name``'s object in event.json."""
    for choice in load("event")["oneOf"]:
        if choice["properties"]["event"].get("const") == name:
            return choice
    raise AssertionError(f"no event {name!r} in event.json")


EVENTS: list[type[Progress]] = [PassStarted, CardCounted, PassReported, StackAsked, Resumed,
                                TouchIgnored]


def keys(record: type[Record]) -> list[str]:
    """The JSON keys a record's fields make, in order (a spread field's keys are the
    schema's extra properties: not named)."""
    return [key(f.name) for f in dataclasses.fields(record) if not f.metadata.get("spread")]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_a_records_fields_are_its_schemas_properties_in_order(record):
    schema = RECORDS[record]
    assert keys(record) == [k for k in schema["properties"] if k != "schema"]


@pytest.mark.parametrize("progress", EVENTS, ids=lambda r: r.__name__)
def test_an_events_fields_are_its_schemas_properties_in_order(progress):
    assert ["event", *keys(progress)] == list(event(progress.event)["properties"])


def test_the_status_record_is_the_schema_less_the_services_notice():
    assert [*keys(reports.StatusReport), "notice"] == keys(reports.ServiceStatus)


def test_every_result_record_is_listed_here():
    """A record added to reports.py is held to its schema by the test above."""
    made = {v for v in vars(reports).values()
            if isinstance(v, type) and issubclass(v, Record) and v.__module__ == reports.__name__}
    assert made - set(RECORDS) == {reports.StatusReport}
    kept = {v for v in vars(scorebook).values()
            if isinstance(v, type) and issubclass(v, Record) and v.__module__ == scorebook.__name__}
    assert kept <= set(RECORDS)


def status_of(session: Session) -> reports.StatusReport:
    return reports.StatusReport.of(session.controller, session.config)


@pytest.fixture
def session(tmp_path):
    """A session on the simulator whose third card double-feeds (a degraded pass)."""
    config = Config()
    device = SimDevice.for_cards(24, faults=parse_fault_specs(["double:3"]),
                                 rng=random.Random(5))
    yield Session(PassController(device, StateStore(tmp_path / "state"), config.battery,
                                 config.hand.passes), config, random.Random(1))
    device.close()


def test_real_records_round_trip_through_their_schemas(session):
    """A pass, a hand with a degraded pass in it, the status after, the battery and a
    clear, and every progress event they emitted: each JSON is what its schema says,
    survives a trip through text, and the record cannot be changed."""
    heard: list[Progress] = []
    answers = [session.do_hand(session.terms(2), on_event=heard.append),
               session.do_pass(24, on_event=heard.append)]
    status = reports.ServiceStatus(**vars(status_of(session)), notice="a notice")
    answers += [status, reports.BatteryReport.of(session.controller, session.config, 32),
                session.do_clear()]
    for answer, schema in zip(answers, ("hand", "pass", "status", "battery", "clear"),
                              strict=True):
        obj = answer.to_json()
        assert validate(obj, schema) == json.loads(json.dumps(obj))
        with pytest.raises(dataclasses.FrozenInstanceError):
            answer.exit = 9  # type: ignore[misc]
    hand = answers[0].hand  # type: ignore[attr-defined]
    assert hand.fault is not None and hand.fault.kind.value == "count_mismatch"
    assert status.last_hand == reports.LastHand.of(hand)  # as the state file keeps it
    assert {type(e) for e in heard} >= {PassStarted, CardCounted, PassReported, StackAsked}
    for e in heard:
        validate(e.to_json(), "event")


def test_the_score_round_trips_through_its_schema_and_cannot_be_changed(session):
    """A game with a loner, a euchre and a renege, after a played game and an undo: its
    answer is what score.json says, its hands and played games records, none changeable."""
    book = session.scores
    book.record(0, 5, alone=True)
    book.new_game(target=5, names=["Us", "Them"])
    book.record(1, 2)
    book.record(0, 3, renege=1)
    answer = book.undo()
    obj = answer.to_json()
    assert validate(obj, "score") == json.loads(json.dumps(obj))
    game = answer.score
    assert game.totals == (2, 0) and game.names == ("Us", "Them") and game.redo is not None
    assert [(h.scored_by, h.points, h.euchre) for h in game.hands] == [(0, 2, True)]
    assert [(p.number, p.totals, p.hands) for p in game.played] == [(1, (4, 0), 1)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        game.hands[0].points = 9  # type: ignore[misc]


def test_the_omitted_and_spread_fields_are_left_out_or_spread():
    """A clear that cleared has no ``still``; a backend's health detail stands before
    ``device_fault`` as before."""
    from shuffler.device.contract import FaultKind, Health

    jam = Fault(FaultKind.JAM, "a jam", 5)
    assert list(reports.Cleared(True, jam, None, 0).to_json()) == [
        "cleared", "cleared_fault", "exit"]
    assert reports.Cleared(False, jam, jam, 3).to_json()["still"] == jam.to_json()
    health = reports.HealthReport.of(Health(True, False, True, None, {"cards_in_machine": 2}),
                                     jam)
    assert health.to_json() == {"ok": False, "motor_on": False, "tray_loaded": True,
                                "cards_in_machine": 2, "device_fault": None}
    assert list(health.to_json()) == ["ok", "motor_on", "tray_loaded", "cards_in_machine",
                                      "device_fault"]
    with pytest.raises(TypeError):
        health.detail["cards_in_machine"] = 3  # type: ignore[index]


def test_an_older_state_files_last_hand_reads_whole(session):
    """A last hand kept by an older release (its fault the kind alone, no dealer or
    note) is a whole record, its fault a fault object, and the status that shows it
    keeps its schema."""
    old = {"number": 3, "passes_done": 1, "passes": 4, "completed": False,
           "tracking": False, "distance": None, "fault": "jam"}
    last = reports.LastHand.kept(old)
    assert last is not None and last.fault is not None
    assert last.to_json()["fault"] == {"kind": "jam", "message": "the last hand stopped: jam",
                                       "card": None}
    assert "dealer" not in last.to_json()  # not a null the schema refuses: left out
    assert reports.LastHand.kept(last.to_json()) == last  # as the state file keeps it
    session.controller.update(lambda s: setattr(s, "last_hand", old))
    shown = validate(status_of(session).to_json(), "status")["last_hand"]
    assert shown["fault"]["kind"] == "jam" and "dealer" not in shown


def test_the_last_hand_reads_the_same_from_memory_and_from_the_file(session, tmp_path):
    """The status a second process gives (its state read back from the file, whose keys
    are sorted) is the same JSON, key for key in the schema's order, as the one the
    process that dealt the hand gives: one order for every face."""
    session.do_hand(session.terms(2))
    here = json.dumps(status_of(session).to_json())
    config = Config()
    device = SimDevice.for_cards(24, rng=random.Random(5))
    try:
        other = Session(PassController(device, StateStore(tmp_path / "state"), config.battery,
                                       config.hand.passes), config, random.Random(1))
        there = status_of(other).to_json()
    finally:
        device.close()
    assert json.loads(here)["last_hand"] == there["last_hand"]
    assert list(there["last_hand"]) == keys(reports.LastHand)
    assert json.dumps(there["last_hand"]) == json.dumps(json.loads(here)["last_hand"])
