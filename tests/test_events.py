"""The service's typed events, its one bus: what the page and telemetry hear, never a plan."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from fractions import Fraction

import pytest

from hardware_sim import SimDevice, parse_fault_specs
from shuffler.control.touch import Ignore
from shuffler.device.clock import VirtualClock
from shuffler.service.events import (
    BatteryChanged,
    CardCounted,
    Event,
    FaultChanged,
    HandSummary,
    PassReported,
    PassStarted,
    ScoreChanged,
    SignalShown,
    StateChanged,
    TouchIgnored,
)
from shuffler.service.loop import Service
from tests.test_watchdog import run, serve, sim


def test_a_hand_is_told_in_typed_events_in_order(tmp_path, monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    clock = VirtualClock()
    service = serve(tmp_path, sim(SimDevice, clock), clock)
    heard: list = []
    service.subscribe(heard.append)
    assert run(service, "hand", passes=3)["ok"]

    kinds = [type(e) for e in heard]
    starts = [e for e in heard if isinstance(e, PassStarted)]
    assert [(e.number, e.of) for e in starts] == [(1, 3), (2, 3), (3, 3)]
    reports = [e.pass_ for e in heard if isinstance(e, PassReported)]
    assert [r.counted for r in reports] == [24, 24, 24]
    cards = [e for e in heard if isinstance(e, CardCounted)]
    assert len(cards) == 72 and cards[-1] == CardCounted(24, 24)
    # each pass: started, its cards, its report; then the summary and the new state
    assert kinds.index(PassStarted) < kinds.index(CardCounted) < kinds.index(PassReported)
    summary = kinds.index(HandSummary)
    assert summary > max(i for i, k in enumerate(kinds) if k is PassReported)
    assert StateChanged in kinds[summary:] and BatteryChanged in kinds
    state = [e.status for e in heard if isinstance(e, StateChanged)][-1]
    assert state.counters.passes == 3
    assert "labels" not in repr(heard) and "order" not in repr(heard)  # never a plan


def jammed_and_cleared(tmp_path) -> tuple[Service, list]:
    """A service whose pass jammed and was cleared, and all its faces heard."""
    clock = VirtualClock()
    device = SimDevice.for_cards(24, faults=parse_fault_specs(["jam:5:99"]), clock=clock)
    service = serve(tmp_path, device, clock)
    heard: list = []
    service.subscribe(heard.append)
    assert run(service, "pass")["result"]["pass"]["fault"]["kind"] == "jam"
    assert run(service, "clear")["result"]["cleared"]  # the simulated dealer freed it
    return service, heard


def test_a_jam_and_its_clearing_are_fault_changes(tmp_path, monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    service, heard = jammed_and_cleared(tmp_path)
    service.refresh()
    service.refresh()  # the state again, the fault unchanged: not told again
    faults = [e.fault for e in heard if isinstance(e, FaultChanged)]
    assert [f.kind.value if f else None for f in faults] == ["jam", None]
    assert sum(isinstance(e, StateChanged) for e in heard) == 4  # after each job, and twice


def test_every_light_the_dealer_sees_reaches_the_faces_first(tmp_path, monkeypatch):
    """The service hears each status through the controller's ``on_show``: the device's
    own ``show`` is not wrapped, and the faces hear every light the device shows (a hand,
    a jam, its clearing, a touch told again), in order, each before the device shows it
    (the simulated dealer acts inside ``show``)."""
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    clock = VirtualClock()
    device = SimDevice.for_cards(24, faults=parse_fault_specs(["jam:5:99"]), clock=clock)
    service = serve(tmp_path, device, clock)
    assert "show" not in vars(device)  # the class's show, as the backend wrote it
    signals: list = []

    def heard(event):
        if isinstance(event, SignalShown):
            assert len(device.shown) == len(signals)  # not shown yet
            signals.append(event.status)

    service.subscribe(heard)
    assert run(service, "pass")["result"]["pass"]["fault"]["kind"] == "jam"
    assert run(service, "clear")["result"]["cleared"]
    assert run(service, "hand", passes=2)["ok"]
    service._touch_ignored(Ignore("a test"))  # the last light, told again
    assert signals == device.shown and len(signals) >= 6
    assert signals[-1].told and not signals[-2].told


def test_the_first_state_tells_the_fault_and_the_battery(tmp_path, monkeypatch):
    """A face that subscribes before the service starts learns the fault (none) and the
    battery at once: a retained MQTT fault from an earlier run is replaced."""
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    clock = VirtualClock()
    service = serve(tmp_path, sim(SimDevice, clock), clock)
    heard: list = []
    service.subscribe(heard.append)
    service.refresh()
    assert [type(e) for e in heard] == [StateChanged, FaultChanged, BatteryChanged]
    assert heard[1] == FaultChanged(None)


def changeable(value, where: str) -> list[str]:
    """Where in ``value`` (an event) a dict, a list or a set is (a face could change it),
    or a bare mapping where a field's type names a record (a result passed untyped)."""
    if isinstance(value, dict | list | set | bytearray):
        return [f"{where}: {type(value).__name__}"]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        hints = typing.get_type_hints(type(value), localns={"Fraction": Fraction})
        found = []
        for f in dataclasses.fields(value):
            v, at = getattr(value, f.name), f"{where}.{f.name}"
            if isinstance(v, Mapping) and not isinstance(v, dict) \
                    and not mapping_typed(hints[f.name]):
                found.append(f"{at}: {type(v).__name__} for {hints[f.name]}")
            else:
                found += changeable(v, at)
        return found
    if isinstance(value, Mapping):
        return [w for k, v in value.items() for w in changeable(v, f"{where}[{k!r}]")]
    if isinstance(value, tuple):
        return [w for i, v in enumerate(value) for w in changeable(v, f"{where}[{i}]")]
    return []


def mapping_typed(hint) -> bool:
    """A field typed a mapping (a health's detail keys)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(mapping_typed(h) for h in typing.get_args(hint))
    return hint is Mapping or typing.get_origin(hint) is Mapping


def test_the_bus_check_finds_a_dict_or_an_untyped_result_inside_an_event():
    from types import MappingProxyType as frozen

    from shuffler.device.contract import Fault, FaultKind

    assert changeable(StateChanged({"counters": {"passes": 1}}), "e") == ["e.status: dict"]
    assert changeable(ScoreChanged({"hands": ()}), "e") == ["e.score: dict"]
    assert changeable(FaultChanged({"kind": "jam", "pile": [1]}), "e") == ["e.fault: dict"]
    # where a record belongs, a read-only mapping is refused too: the bus carries the types
    jam = Fault(FaultKind.JAM, "a jam", 5)
    assert changeable(FaultChanged(jam), "e") == []
    assert changeable(FaultChanged(frozen(jam.to_json())), "e") == [
        "e.fault: mappingproxy for shuffler.device.contract.Fault | None"]
    assert changeable(ScoreChanged(frozen({"hands": ()})), "e")[0].startswith(
        "e.score: mappingproxy for")
    assert changeable(BatteryChanged(frozen({"volts": (1.0,)})), "e")[0].startswith(
        "e.battery: mappingproxy for")
    assert changeable(PassStarted(1, 2), "e") == []
    assert changeable(PassReported(frozen({"a": (1,)})), "e") == [  # type: ignore[arg-type]
        "e.pass_: mappingproxy for <class 'shuffler.control.reports.PassResult'>"]


def test_everything_the_service_says_is_a_typed_event(tmp_path, monkeypatch):
    """A pass, a hand, a jam and its clearing, a score change and a touch ignored: every
    published item is one of the bus's frozen types, never a dict; the score change and
    the ignored touch are their own events."""
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    service, heard = jammed_and_cleared(tmp_path)
    assert run(service, "hand", passes=2)["ok"]
    assert run(service, "score", makers=0, tricks=3)["ok"]
    service._touch_ignored(Ignore("touch ignored: a test"))
    assert all(isinstance(e, typing.get_args(Event)) for e in heard), \
        {type(e).__name__ for e in heard}
    assert not any(isinstance(e, dict) for e in heard)
    # nor anywhere inside one: a report, a status, a game are frozen, for every face alike
    assert [where for e in heard for where in changeable(e, type(e).__name__)] == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        [e for e in heard if isinstance(e, StateChanged)][-1].status.notice = "x"  # type: ignore[misc]
    scores = [e.score for e in heard if isinstance(e, ScoreChanged)]
    assert len(scores) == 1 and scores[0].hands[0].points == 1  # made it: 1 to the makers
    assert [e.why for e in heard if isinstance(e, TouchIgnored)] == ["touch ignored: a test"]
    # each pass told once, as it ended: the lone pass and the hand's two
    assert len([e for e in heard if isinstance(e, PassReported)]) == 3


def test_the_battery_is_told_again_only_when_its_figures_change(tmp_path, monkeypatch):
    """The battery last told is the last snapshot's: the same figures are not told twice,
    a refresh that fails tells nothing and forgets nothing, and a pass's drain is told."""
    from shuffler.errors import BatteryMonitorError

    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    clock = VirtualClock()
    service = serve(tmp_path, sim(SimDevice, clock), clock)
    service.refresh()
    heard: list = []
    service.subscribe(heard.append)
    service.refresh()
    assert [type(e) for e in heard] == [StateChanged]
    looks = service.machine.run

    def no_battery(request, *args, **kwargs):
        if request["cmd"] == "battery":
            raise BatteryMonitorError("the monitor did not answer")
        return looks(request, *args, **kwargs)

    monkeypatch.setattr(service.machine, "run", no_battery)
    service.refresh()
    assert [type(e) for e in heard] == [StateChanged]  # nothing told, nothing forgotten
    monkeypatch.setattr(service.machine, "run", looks)
    service.refresh()
    assert [type(e) for e in heard] == [StateChanged, StateChanged]
    assert run(service, "pass")["ok"]
    told = [e.battery for e in heard if isinstance(e, BatteryChanged)]
    assert len(told) == 1 and told[0] == service.snapshot["battery"]
