"""The touch sensor's long press: the dealer clears a jam without a terminal."""

from __future__ import annotations

import random

from hardware_sim import SimDevice, parse_fault_specs
from shuffler.backends import plan_source
from shuffler.clock import VirtualClock
from shuffler.config import Config
from shuffler.controller import PassController
from shuffler.device import EventKind, InputEvent, Signal
from shuffler.service import Service
from shuffler.session import Session
from shuffler.state import StateStore


def jammed_service(tmp_path) -> Service:
    device = SimDevice.for_cards(24, faults=parse_fault_specs(["jam:13"]),
                                 rng=random.Random(5), clock=VirtualClock())
    session = Session(PassController(device, StateStore(tmp_path)), Config(),
                      plan_source(device, 1))
    assert session.do_pass()["pass"]["fault"]["kind"] == "jam"
    return Service(session, tmp_path / "s.sock")


def press(service: Service, kind: EventKind = EventKind.LONG_PRESS) -> None:
    service.session.device.events.put(InputEvent(kind, at=0.0))
    service._idle()


def test_a_long_press_clears_a_jam_once_the_machine_is_clear(tmp_path):
    service = jammed_service(tmp_path)
    try:
        assert service.session.controller.latched_fault() is not None
        press(service)
        assert service.session.controller.latched_fault() is None
        assert service.session.device.shown[-1].signal is Signal.READY
        assert service.faces.board.snapshot()[1]["phase"] == "ready"
    finally:
        service.session.device.close()


def test_a_long_press_on_a_machine_still_jammed_answers_with_the_jam_pattern(tmp_path, mocker):
    service = jammed_service(tmp_path)
    try:
        mocker.patch.object(service.session.device, "clear_fault", return_value=False)
        press(service)
        assert service.session.controller.latched_fault().kind.value == "jam"
        assert service.session.device.shown[-1].signal is Signal.FAULT
        assert service.faces.board.snapshot()[1]["phase"] == "fault"
    finally:
        service.session.device.close()


def test_a_long_press_with_nothing_latched_starts_nothing(tmp_path):
    device = SimDevice.for_cards(24, rng=random.Random(5), clock=VirtualClock())
    session = Session(PassController(device, StateStore(tmp_path)), Config(),
                      plan_source(device, 1))
    service = Service(session, tmp_path / "s.sock")
    try:
        press(service)
        assert session.status()["counters"]["passes"] == 0
    finally:
        device.close()


def test_a_second_serve_on_the_same_machine_says_one_is_running(tmp_path):
    import subprocess

    from .served import SHUFFLER
    from .served import Service as Served

    first = Served(tmp_path, name="first").start()
    try:
        second = subprocess.run(
            [SHUFFLER, "--state-dir", str(first.state), "--socket",
             str(tmp_path / "other.sock"), "serve"],
            capture_output=True, text=True, timeout=60, check=False)
        assert second.returncode == 2, second.stderr
        assert "already running" in second.stderr and "Traceback" not in second.stderr
        client = first.client()
        assert client.request("status")["counters"]["passes"] == 0  # the first one goes on
        client.close()
    finally:
        first.stop()
