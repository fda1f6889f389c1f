"""The touch sensor's long press: the dealer clears a jam without a terminal."""

from __future__ import annotations

import random

import pytest

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
    assert session.do_pass().pass_.fault.kind.value == "jam"
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
        assert session.controller.store.load().passes == 0
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


def heard(tmp_path):
    """A rigged service and what it publishes."""
    rig, device, service = rigged(tmp_path)
    seen: list = []
    service.subscribe(seen.append)
    return rig, device, service, seen


def test_a_long_press_with_nothing_latched_starts_nothing_and_says_so(tmp_path):
    rig, device, service, seen = heard(tmp_path)
    try:
        rig.long_press(2.5)
        rig.clock.sleep(3.5)
        service._idle()
        assert service.session.controller.store.load().passes == 0
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
            session.do_hand(session.terms(3))
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
        assert service.session.do_pass().pass_.fault is None
        assert rig.led() == (0.0, 1.0, 0.0)  # green, not left white
    finally:
        device.close()


# -- a touch is continuous contact: taps stay taps (issue 46) ---------------------------

def gestures(events) -> list[tuple[str, float]]:
    return [(e.kind.value, e.at) for e in events if e.kind.value in ("touch", "long_press")]


@pytest.mark.parametrize(("rate", "count", "hold"), [
    (2, 20, None), (3, 20, None), (5, 20, None), (8, 20, None),
    (4, 9, 0.1),  # the issue's: 0.1 s long, 0.25 s apart; 9 of them were a long press
    (8, 20, 0.1)])  # 0.1 s long at 8 a second: 25 ms between taps, with bounce
def test_quick_taps_stay_taps_each_a_touch_never_a_long_press(tmp_path, rate, count, hold):
    rig, device, _ = rigged(tmp_path)
    try:
        device.drain_events()
        began = rig.taps(count, rate, hold)
        rig.clock.sleep(count / rate + 1.0)
        # each tap a touch, stamped when its press began (the restack lock-out's edge)
        assert gestures(device.drain_events()) == [("touch", t) for t in began]
    finally:
        device.close()


def test_taps_between_passes_start_each_pass_of_a_hand(tmp_path):
    """Taps faster than about 3 a second used to join into one gesture that never ended
    while they went on, then counted as a long press: the hand waited for a touch and
    ended ``device_timeout``. A dealer who taps 20 times at 8 a second for each pass
    finishes the hand: the first tap starts the pass, those while it deals start nothing."""
    import threading

    from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice

    class Tapper(GpioRig):
        def touch(self, hold: float = 0.05) -> None:
            self.taps(20, 8.0)

    rig = Tapper.for_cards(24, rng=random.Random(4))
    device = RiggedGpioDevice(rig)
    session = Session(PassController(device, StateStore(tmp_path)), Config(), random.Random(4))
    out: list = []
    worker = threading.Thread(target=lambda: out.append(session.do_hand(session.terms(3))),
                              daemon=True)
    start = rig.clock.now()
    worker.start()
    worker.join(120)
    try:
        assert not worker.is_alive(), "the hand never finished"
        hand = out[0].hand
        assert hand.completed and hand.passes_done == 3 and hand.fault is None
        assert hand.departures == ()  # no long press kept a stack
        assert rig.clock.now() - start < 60  # no touch waited out (300 s)
    finally:
        device.close()


@pytest.mark.parametrize("bounces", [0, 3])
def test_a_press_held_long_press_s_is_exactly_one_long_press(tmp_path, bounces):
    rig, device, _ = rigged(tmp_path)
    try:
        device.drain_events()
        start = rig.clock.now() + 0.1
        rig.press("touch", device.gpio.long_press_s, bounces=bounces, at=start)
        rig.clock.sleep(device.gpio.long_press_s + 1.0)
        assert gestures(device.drain_events()) == [("long_press", start)]
    finally:
        device.close()


def test_a_release_at_long_press_s_is_a_long_press_and_just_before_it_a_touch(tmp_path):
    rig, device, _ = rigged(tmp_path)
    try:
        device.drain_events()
        long_press_s, start = device.gpio.long_press_s, 0.1 + rig.clock.now()
        rig.blip("touch", True, start, long_press_s)  # released exactly at long_press_s
        rig.blip("touch", True, start + 3.0, long_press_s - 0.001)
        rig.clock.sleep(6.0)
        assert gestures(device.drain_events()) == [("long_press", start),
                                                   ("touch", start + 3.0)]
    finally:
        device.close()


def chatter(rig, start: float, seconds: float, gap: float) -> None:
    """Pressed ``seconds`` from ``start``, released for ``gap`` every 0.1 s."""
    rig.blip("touch", True, start, seconds)
    for k in range(1, round(seconds / 0.1)):
        rig.blip("touch", False, start + k * 0.1, gap)


def test_chatter_at_the_bounce_boundary(tmp_path):
    """A release shorter than the bounce time is the same contact: chatter just under it
    for longer than long_press_s is one long press; at the bounce time exactly each
    release ends a touch, and none is a long press."""
    rig, device, _ = rigged(tmp_path)
    try:
        device.drain_events()
        bounce, start = device.gpio.touch_debounce_s, rig.clock.now() + 0.1
        chatter(rig, start, 2.5, bounce * 0.99)
        rig.clock.sleep(3.5)
        assert gestures(device.drain_events()) == [("long_press", start)]
        start = rig.clock.now() + 0.1
        chatter(rig, start, 2.5, bounce)
        rig.clock.sleep(3.5)
        got = gestures(device.drain_events())
        assert [k for k, _ in got] == ["touch"] * 25
        assert got[0][1] == start
    finally:
        device.close()


def test_a_press_held_across_a_pass_is_one_long_press_that_starts_nothing(tmp_path):
    rig, device, service, seen = heard(tmp_path)
    try:
        device.drain_events()
        rig.long_press(12.0)  # held from before the pass until after it
        answer = service._execute(Job({"cmd": "pass", "cards": None, "mode": None}))
        assert answer["result"]["pass"]["counted"] == 24
        rig.clock.sleep(14.0)
        service._idle()
        rig.clock.sleep(2.0)
        service._idle()
        assert service.session.controller.store.load().passes == 1  # no second pass
        told = [e.why for e in seen if isinstance(e, TouchIgnored)]
        assert told == ["nothing to clear: no fault is latched"]  # one long press, no touch
    finally:
        device.close()


def test_a_bounce_time_that_would_join_quick_taps_is_refused_naming_the_key():
    from shuffler.config import load_config_text
    from shuffler.errors import ConfigError

    with pytest.raises(ConfigError, match=r"\[gpio\] touch_debounce_s: expected a number "
                                          r"from 0\.0 to 0\.05, got 0\.3"):
        load_config_text("[gpio]\ntouch_debounce_s = 0.3\n")
    assert load_config_text("[gpio]\ntouch_debounce_s = 0.05\n").gpio.touch_debounce_s == 0.05
