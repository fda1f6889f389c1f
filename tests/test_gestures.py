"""The touch sensor's long press: the dealer clears a jam without a terminal."""

from __future__ import annotations

import random

from hardware_sim import SimDevice, parse_fault_specs
from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.session import Session
from shuffler.device.clock import VirtualClock
from shuffler.device.contract import EventKind, InputEvent, Signal
from shuffler.device.registry import plan_source
from shuffler.faces.router import Faces
from shuffler.service.events import TouchIgnored
from shuffler.service.loop import Job, Service
from shuffler.store.state import StateStore


def jammed_service(tmp_path) -> Service:
    device = SimDevice.for_cards(24, faults=parse_fault_specs(["jam:13"]),
                                 rng=random.Random(5), clock=VirtualClock())
    session = Session(PassController(device, StateStore(tmp_path)), Config(),
                      plan_source(device, 1))
    assert session.do_pass()["pass"]["fault"]["kind"] == "jam"
    return Service(session, tmp_path / "s.sock", faces=Faces)


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
    service = Service(session, tmp_path / "s.sock", faces=Faces)
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


# -- at the pin: the rig presses the touch sensor as a finger does ----------------------

def rigged(tmp_path, faults=(), noise=None):
    from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice

    rig = GpioRig.for_cards(24, faults=parse_fault_specs(list(faults)), rng=random.Random(2),
                            noise=noise)
    device = RiggedGpioDevice(rig)
    session = Session(PassController(device, StateStore(tmp_path)), Config(),
                      plan_source(device, 1))
    return rig, device, Service(session, tmp_path / "s.sock", faces=Faces)


def kinds(events) -> list[str]:
    """The touch sensor's gestures among ``events`` (the tray and piles report too)."""
    return [e.kind.value for e in events if e.kind.value in ("touch", "long_press")]


def test_a_bouncing_touch_is_one_touch_counted_on_its_release(tmp_path):
    rig, device, _ = rigged(tmp_path)
    try:
        rig.touch(0.08)  # three bounces at each edge
        rig.clock.sleep(0.05)
        assert kinds(device.drain_events()) == []  # still held: nothing yet
        rig.clock.sleep(1.0)
        assert kinds(device.drain_events()) == ["touch"]
    finally:
        device.close()


def test_a_long_press_is_never_a_touch_and_its_bounce_is_ignored(tmp_path):
    rig, device, _ = rigged(tmp_path)
    try:
        start = rig.clock.now()
        rig.long_press(2.5)
        rig.clock.sleep(1.0)
        assert kinds(device.drain_events()) == []  # its leading edge is no touch
        rig.clock.sleep(3.0)
        events = [e for e in device.drain_events() if e.kind.value == "long_press"]
        assert kinds(events) == ["long_press"] and events[0].at == start
        assert kinds(device.drain_events()) == []  # the release's bounce: nothing more
    finally:
        device.close()


def test_a_long_press_with_nothing_latched_starts_nothing_and_says_so(tmp_path):
    rig, device, service = rigged(tmp_path)
    seen: list = []
    service.subscribe(seen.append)
    try:
        rig.long_press(2.5)
        rig.clock.sleep(3.5)
        service._idle()
        assert service.session.status()["counters"]["passes"] == 0
        assert rig.motor_off_at == [] and not rig.forward()
        assert any(isinstance(e, TouchIgnored) and "nothing to clear" in e.why
                   for e in seen)
        assert rig.led() == (0.0, 1.0, 0.0)  # the ready light: nothing to clear
    finally:
        device.close()


def test_a_press_begun_before_the_jam_does_not_clear_it(tmp_path):
    rig, device, service = rigged(tmp_path, faults=["jam:5"])
    try:
        rig.long_press(8.0)  # held from before the pass until long after the jam
        answer = service._execute(Job({"cmd": "pass", "cards": None, "mode": None}))
        assert answer["result"]["pass"]["fault"]["kind"] == "jam"
        rig.clock.sleep(9.0)
        service._idle()
        assert service.session.controller.latched_fault() is not None  # not cleared
        rig.long_press(2.5)  # a press begun after it: the dealer's clear
        rig.clock.sleep(3.5)
        service._idle()
        assert service.session.controller.latched_fault() is None
    finally:
        device.close()


def test_a_beam_dropping_out_inside_every_card_counts_each_card_once(tmp_path):
    from hardware_sim.gpio_rig import SensorNoise

    # 3 ms drop-outs: longer than the glitch filter (1 ms), shorter than beam_min_gap_s
    rig, device, _ = rigged(tmp_path, noise=SensorNoise(glitch_s=0.003))
    try:
        from shuffler.core.planning import coin_plan

        report = device.run_pass(coin_plan(24, random.Random(1)))
        assert report.counted == 24 and report.fault is None
        assert len(rig.landed) == 24
    finally:
        device.close()


def test_a_flickering_beam_does_not_hold_off_the_misfeed(tmp_path):
    rig, device, _ = rigged(tmp_path, faults=["misfeed:1"])
    try:
        from shuffler.core.planning import coin_plan

        start = rig.clock.now()
        for k in range(2000):  # a 2 ms flicker every 20 ms: never a card
            rig.blip("beam", True, start + 0.2 + k * 0.02, 0.002)
        report = device.run_pass(coin_plan(24, random.Random(1)))
        assert report.fault is not None and report.fault.kind.value == "misfeed"
        limits = device.limits
        bound = (limits.retries + 1) * (limits.misfeed_seconds + limits.reverse_seconds + 0.5)
        assert report.seconds < bound < limits.max_pass_seconds and report.counted == 0
    finally:
        device.close()


def test_a_hand_waiting_for_a_touch_on_the_rig_times_out(tmp_path):
    import dataclasses
    import threading

    from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
    from shuffler.device.clock import EventClock
    from shuffler.errors import DeviceTimeoutError

    class Shy(GpioRig):  # a dealer who restacks but never touches
        def touch(self, hold: float = 0.05) -> None:
            pass

    clock = EventClock(start=1e6)  # far from 0: a float's step there is 1e-10 s
    rig = Shy.for_cards(24, rng=random.Random(1), clock=clock)
    device = RiggedGpioDevice(rig)
    config = Config()
    config = dataclasses.replace(config, hand=dataclasses.replace(config.hand,
                                                                  touch_timeout_s=20.0))
    session = Session(PassController(device, StateStore(tmp_path)), config, random.Random(1))
    out: list = []

    def hand() -> None:
        try:
            session.do_hand(passes=3)
        except DeviceTimeoutError as e:
            out.append(e)
    worker = threading.Thread(target=hand, daemon=True)
    worker.start()
    worker.join(60)
    try:
        assert not worker.is_alive(), "the hand never timed out"
        assert out and "No touch within 20 s after pass 1" in str(out[0])
        assert 20 <= clock.now() - 1e6 < 60
    finally:
        device.close()


def test_the_light_is_ready_again_after_a_single_pass(tmp_path):
    rig, device, service = rigged(tmp_path)
    try:
        assert service.session.do_pass()["pass"]["fault"] is None
        assert rig.led() == (0.0, 1.0, 0.0)  # green, not left white
    finally:
        device.close()
