"""A touch the machine does not take is told, and the simulated dealers touch again,
so a hand on every simulated backend finishes at every ``--sim-speed``."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys

import pytest

from hardware_sim import SimDevice
from hardware_sim.dealer import SimDealer
from hardware_sim.device import SimTiming
from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.session import Session
from shuffler.device.clock import VirtualClock
from shuffler.device.contract import Signal
from shuffler.service.events import CardCounted, PassStarted, TouchIgnored
from shuffler.store.state import StateStore

pytestmark = pytest.mark.slow


def test_a_touch_inside_the_restack_lockout_is_told_and_a_second_touch_goes(tmp_path):
    # a hasty dealer: restacks and touches 0.25 s after the pass, inside the 0.5 s lock-out
    # (the piles 0.2 s apart: further than "at once", which the machine warns of)
    device = SimDevice.for_cards(24, rng=random.Random(4), clock=VirtualClock(),
                                 timing=SimTiming(restack_pause=0.0))
    device.dealer = SimDealer(rng=random.Random(4), lift_gap=0.2, settle=0.05)
    session = Session(PassController(device, StateStore(tmp_path)), Config(),
                      random.Random(1))
    events: list[dict] = []
    result = session.do_hand(session.terms(3), on_event=lambda e: events.append(e.to_json()))
    assert result.hand.completed
    told = [e for e in events if e["event"] == "touch_ignored"]
    assert told and all("restacking" in e["why"] for e in told)
    stacks = [s for s in device.shown if s.signal is Signal.STACK]
    assert len(stacks) == 3 + len(told)  # each ignored touch: the prompt (one beep) again


def avr_missing() -> str | None:
    from hardware_sim.sim_avr import AVR_PACKAGES, build_firmware
    from shuffler.errors import DeviceError

    try:
        build_firmware()
    except DeviceError as e:
        return f"needs the packages {AVR_PACKAGES} ({e})"
    return None


@pytest.mark.parametrize("speed", [1, 5, 20, 100])
@pytest.mark.parametrize("device", ["sim-serial", "sim-avr"])
def test_a_hand_on_the_serial_simulators_finishes_at_every_speed(tmp_path, device, speed):
    if device == "sim-avr" and (why := avr_missing()):
        pytest.skip(why)
    out = subprocess.run(
        [sys.executable, "-m", "shuffler", "--device", device, "--sim-speed", str(speed),
         "--state-dir", str(tmp_path / "state"), "--no-service", "--json", "hand"],
        capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    hand = json.loads(out.stdout)["hand"]
    assert hand["completed"] and len(hand["pass_reports"]) == hand["passes"]
    assert "Traceback" not in out.stderr


def test_a_touch_the_service_ignores_between_jobs_beeps_once_and_is_an_event(tmp_path):
    from .test_gestures import rigged

    rig, device, service = rigged(tmp_path)
    seen: list = []
    service.subscribe(seen.append)
    buzzer = rig.pins["buzzer"]
    try:
        rig.touch(0.08)
        rig.clock.sleep(1.0)  # released and settled: a touch
        # a pass has only just ended (the touch was pressed during it)
        service.session.controller.touch.pass_ended(device.now() - 0.1)
        buzzer.clear_states()
        service._idle()
        told = [e for e in seen if isinstance(e, (TouchIgnored, PassStarted, CardCounted))]
        assert [type(e) for e in told] == [TouchIgnored]
        assert "restack" in told[0].why or "only just ended" in told[0].why
        assert service.session.controller.store.load().passes == 0 and not rig.forward()
        import time

        deadline = time.monotonic() + 10  # the buzzer's blink runs on real time
        while buzzer.state and time.monotonic() < deadline:
            time.sleep(0.02)
        beeps = [s.state for s in buzzer.states]
        assert sum(1 for a, b in itertools.pairwise(beeps) if b > a) == 1  # one short beep
        assert buzzer.state == 0 and rig.led() == (0.0, 1.0, 0.0)  # the light stays ready
    finally:
        device.close()
