"""The Nano's touch (issue 46): a touch is continuous contact. The firmware sends one
INPUT TOUCH at each press's debounced edge (3 ms) when the line was released at least
20 ms before it (TOUCH_REARM_MS, the Pi build's touch_debounce_s), and no long press at
all (the protocol has none). On the firmware's own ELF in simavr, as the host hears it:
20 taps at 2, 3, 5, 8 (and 12) a second are 20 touches and never a long press, a press
held for seconds is one, and a press or release that chatters is one. The virtual MCU
(hardware-sim/virtual_mcu.py) forwards its simulator's touches as they come, with no
lock-out either: the same 20 taps over it are 20 touches (the two in step)."""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections.abc import Iterator

import pytest

from firmware_bridge.device import SerialDevice
from hardware_sim import SimDevice
from hardware_sim.sim_avr import SimAvr, serial_on
from hardware_sim.virtual_mcu import VirtualMCU
from shuffler.device.clock import ScaledClock
from shuffler.device.contract import EventKind, InputEvent

from .test_firmware import MISSING


def in_simavr(test):
    """On the firmware's own ELF in simavr: slow, and skipped without avr-gcc and simavr."""
    return pytest.mark.slow(pytest.mark.skipif(MISSING is not None, reason=MISSING or "")(test))

RATES = [2, 3, 5, 8, 12]  # taps a second; 12 is faster than most people tap


def touches_after(dev, seconds: float) -> list[EventKind]:
    end, kinds = time.monotonic() + seconds, []
    while (left := end - time.monotonic()) > 0:
        event = dev.wait_event(min(left, 0.05))
        if event is not None:
            kinds.append(event.kind)
    return [k for k in kinds if k in (EventKind.TOUCH, EventKind.LONG_PRESS)]


def touches_until(chip, dev, command: str, done_prefix: str) -> list[EventKind]:
    """The touches the host hears from ``command`` until the harness says it is done
    (paced in the chip's time, whatever the machine's load), and half a second after."""
    done = chip.record(done_prefix)
    done.clear()
    chip.command(command)
    got: list[EventKind] = []
    deadline = time.monotonic() + 90
    while not done and time.monotonic() < deadline:
        got += touches_after(dev, 0.2)
    assert done, f"the harness never finished {command!r}"
    return got + touches_after(dev, 0.5)


@pytest.fixture
def nano():
    """The firmware's ELF in simavr and its host, the start's inputs heard."""
    chip = SimAvr("--cards=24")
    dev = serial_on(chip)
    try:
        touches_after(dev, 0.5)  # anything from the start
        yield chip, dev
    finally:
        dev.close()


@pytest.mark.parametrize("rate", RATES)
@in_simavr
def test_twenty_taps_at_any_rate_a_person_taps_are_twenty_touches(nano, rate):
    chip, dev = nano
    # each tap held 50 ms, released the rest of its period (12 a second: 33 ms)
    got = touches_until(chip, dev, f"taps 20 {1000 // rate}", "taps done")
    assert got == [EventKind.TOUCH] * 20, f"{len(got)} touches from 20 taps at {rate}/s"


@in_simavr
def test_a_press_held_for_seconds_is_one_touch(nano):
    chip, dev = nano
    chip.command("press")
    time.sleep(3.0)  # longer than any long_press_s
    chip.command("release")
    assert touches_after(dev, 0.5) == [EventKind.TOUCH]
    # and the next press is a touch of its own
    chip.command("touch")
    assert touches_after(dev, 0.5) == [EventKind.TOUCH]


@in_simavr
@pytest.mark.parametrize(("bounces", "apart_us"), [
    (5, 1000),    # contact bounce: 1 ms pulses, shorter than the 3 ms debounce
    (3, 10000),   # 10 ms flickers: debounced, but the release shorter than 20 ms
])
def test_a_press_and_a_release_that_chatter_are_one_touch(nano, bounces, apart_us):
    chip, dev = nano
    got = touches_until(chip, dev, f"chatter {bounces} {apart_us}", "chatter done")  # press
    time.sleep(0.2)
    got += touches_until(chip, dev, f"chatter {bounces} {apart_us}", "chatter done")  # release
    assert got == [EventKind.TOUCH]
    time.sleep(0.1)
    chip.command("touch")  # the chatter ended released: the next press is a touch
    assert touches_after(dev, 0.5) == [EventKind.TOUCH]


@contextlib.contextmanager
def virtual_nano(speed: float) -> Iterator[tuple[VirtualMCU, SerialDevice]]:
    """The virtual MCU (no simulated dealer freeing the throat) and its host."""
    sim = SimDevice.for_cards(24, rng=random.Random(1), clock=ScaledClock(speed))
    mcu = VirtualMCU(sim, seed=1, silence=3.0, dealer=False)
    try:
        dev = SerialDevice(mcu.path)
        try:
            yield mcu, dev
        finally:
            dev.close()
    finally:
        mcu.close()


def tap(sim: SimDevice, count: int, rate: float) -> list[float]:
    """``count`` touches ``1 / rate`` apart in the chip's time, paced as a finger makes
    them (the firmware's link holds 4 INPUTs unacknowledged, and so does the virtual
    MCU's): their stamps."""
    start, stamps = sim.now(), []
    for i in range(count):
        sim.clock.sleep(max(0.0, start + i / rate - sim.now()))
        stamps.append(start + i / rate)
        sim.events.put(InputEvent(EventKind.TOUCH, stamps[-1]))
    return stamps


#: the virtual MCU's taps a second in real time, whatever the rate in its own time: a
#: host on a loaded machine keeps up with 24 (the link holds 4 INPUTs unacknowledged:
#: 160 ms); 48 (12 a second at 4x, as before) dropped one at a load of 12
RELAYED = 24


@pytest.mark.parametrize("rate", RATES)
def test_the_virtual_mcu_forwards_the_same_taps_as_the_firmware(rate):
    # every rate on a clock that relays its taps 24 a second: the quick tier stays
    # quick, and the stamps are the chip's time at any speed
    with virtual_nano(speed=RELAYED / rate) as (mcu, dev):
        touches_after(dev, 0.2)
        tap(mcu.sim, 20, rate)
        got, deadline = [], time.monotonic() + 10
        while len(got) < 20 and time.monotonic() < deadline:
            if (event := dev.wait_event(0.1)) is not None and event.kind is EventKind.TOUCH:
                got.append(event.at)
        assert len(got) + len(touches_after(dev, 0.3)) == 20
        assert [b - a for a, b in itertools.pairwise(got)] == pytest.approx([1 / rate] * 19,
                                                                           abs=0.002)


@pytest.mark.slow
def test_taps_during_a_pass_over_serial_start_no_second_pass_and_each_is_told(tmp_path):
    """The host is ready for every tap: 20 taps at 8 a second while pass 1 of a 2-pass
    hand runs are each told "a pass was running"; the hand runs its 2 passes, no more,
    and its own dealer's touches start pass 2 as before."""
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.session import Session
    from shuffler.control.touch import PASS_RUNNING
    from shuffler.store.state import StateStore

    with virtual_nano(speed=1) as (mcu, dev):
        session = Session(PassController(dev, StateStore(tmp_path)), Config(),
                          random.Random(1))
        events: list[dict] = []
        stamps: list[float] = []

        def finger() -> None:
            while not mcu.sim.health().motor_on:
                time.sleep(0.005)
            stamps.extend(tap(mcu.sim, 20, 8))

        tapping = threading.Thread(target=finger, daemon=True)
        tapping.start()
        result = session.do_hand(session.terms(2),
                                 on_event=lambda e: events.append(e.to_json())).to_json()
        tapping.join(10)
        hand = result["hand"]
        assert hand["completed"] and hand["passes_done"] == 2
        # each pass dealt the whole pack, pass 2 only after the stack was seen
        assert [(p["number"], p["counted"]) for p in hand["pass_reports"]] == [(1, 24), (2, 24)]
        assert hand["pass_reports"][0]["stacked"] == "followed"
        assert len(stamps) == 20 and stamps[-1] - stamps[0] < hand["pass_reports"][0]["seconds"]
        told = [e["why"] for e in events if e["event"] == "touch_ignored"]
        assert told == [PASS_RUNNING.why] * 20
