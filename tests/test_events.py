"""The service's typed events: what a page or telemetry would hear, and never a plan."""

from __future__ import annotations

from hardware_sim import SimDevice, parse_fault_specs
from shuffler.device.clock import VirtualClock
from shuffler.service.events import (
    BatteryChanged,
    CardCounted,
    FaultChanged,
    HandSummary,
    PassReported,
    PassStarted,
    StateChanged,
)
from tests.test_watchdog import run, serve, sim


def test_a_hand_is_told_in_typed_events_in_order(tmp_path, monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    clock = VirtualClock()
    service = serve(tmp_path, sim(SimDevice, clock), clock)
    heard: list = []
    service.subscribe_events(heard.append)
    assert run(service, "hand", passes=3)["ok"]

    kinds = [type(e) for e in heard]
    starts = [e for e in heard if isinstance(e, PassStarted)]
    assert [(e.number, e.of) for e in starts] == [(1, 3), (2, 3), (3, 3)]
    reports = [e.report for e in heard if isinstance(e, PassReported)]
    assert [r["counted"] for r in reports] == [24, 24, 24]
    cards = [e for e in heard if isinstance(e, CardCounted)]
    assert len(cards) == 72 and cards[-1] == CardCounted(24, 24)
    # each pass: started, its cards, its report; then the summary and the new state
    assert kinds.index(PassStarted) < kinds.index(CardCounted) < kinds.index(PassReported)
    summary = kinds.index(HandSummary)
    assert summary > max(i for i, k in enumerate(kinds) if k is PassReported)
    assert StateChanged in kinds[summary:] and BatteryChanged in kinds
    state = [e.status for e in heard if isinstance(e, StateChanged)][-1]
    assert state["counters"]["passes"] == 3
    assert "labels" not in repr(heard) and "order" not in repr(heard)  # never a plan


def test_a_jam_and_its_clearing_are_fault_changes(tmp_path, monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    clock = VirtualClock()
    device = SimDevice.for_cards(24, faults=parse_fault_specs(["jam:5:99"]), clock=clock)
    service = serve(tmp_path, device, clock)
    heard: list = []
    service.subscribe_events(heard.append)
    assert run(service, "pass")["result"]["pass"]["fault"]["kind"] == "jam"
    assert run(service, "clear")["result"]["cleared"]  # the simulated dealer freed it
    faults = [e.fault for e in heard if isinstance(e, FaultChanged)]
    assert [f["kind"] if f else None for f in faults] == ["jam", None]


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

    def heard(kind, body):
        if kind == "signal":
            assert len(device.shown) == len(signals)  # not shown yet
            signals.append(body)

    service.subscribe(heard)
    assert run(service, "pass")["result"]["pass"]["fault"]["kind"] == "jam"
    assert run(service, "clear")["result"]["cleared"]
    assert run(service, "hand", passes=2)["ok"]
    service._touch_ignored("a test")  # the last light, told again
    assert signals == device.shown and len(signals) >= 6
    assert signals[-1].told and not signals[-2].told
