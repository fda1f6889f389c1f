"""The Nano's touch (issue 46): the firmware times no gesture. It sends one INPUT TOUCH
at a press's debounced edge (3 ms), none within its 0.3 s lock-out of the last, and no
long press at all (the protocol has none), so on the firmware in simavr quick taps never
join into a long press and a held press is one touch."""

from __future__ import annotations

import time

import pytest

from hardware_sim.sim_avr import SimAvr, serial_on
from shuffler.device.contract import EventKind

from .test_firmware import MISSING

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]


def touches_after(dev, seconds: float) -> list[EventKind]:
    end, kinds = time.monotonic() + seconds, []
    while (left := end - time.monotonic()) > 0:
        event = dev.wait_event(min(left, 0.05))
        if event is not None:
            kinds.append(event.kind)
    return [k for k in kinds if k in (EventKind.TOUCH, EventKind.LONG_PRESS)]


def test_taps_at_any_rate_are_never_a_long_press_and_a_held_press_is_one_touch():
    chip = SimAvr("--cards=24")
    dev = serial_on(chip)
    try:
        touches_after(dev, 0.5)  # anything from the start
        counts = {}
        done = chip.record("taps done")
        for rate in (2, 3, 5, 8):
            chip.command(f"taps 20 {1000 // rate}")  # each held 50 ms, in the chip's time
            got: list[EventKind] = []
            deadline = time.monotonic() + 60
            while not done and time.monotonic() < deadline:
                got += touches_after(dev, 0.2)
            done.clear()
            got += touches_after(dev, 0.5)
            assert EventKind.LONG_PRESS not in got
            assert 1 <= len(got) <= 20
            counts[rate] = len(got)
        assert counts[2] == counts[3] == 20  # past the 0.3 s lock-out: every tap a touch
        chip.command("press")
        time.sleep(3.0)  # longer than any long_press_s
        chip.command("release")
        held = touches_after(dev, 0.5)
        assert held == [EventKind.TOUCH]
        print("touches from 20 taps:", ", ".join(f"{n} at {r}/s" for r, n in counts.items()))
    finally:
        dev.close()
