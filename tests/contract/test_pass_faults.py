"""Every fault, and stop(), gives the same report and latch on every backend.

The pass engine (shuffler/device/engine.py) owns the rules, so the simulator, the GPIO
backend on its rig and the serial backend on the virtual microcontroller must
agree on what each fault does. Each test runs the fault on one backend and on the
plain simulator and compares what a dealer would read: the fault's kind, message
and card, the count, the piles, the retries, whether it latched.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace

import pytest

from shuffler.core.planning import coin_plan
from shuffler.device.contract import FaultKind, PassReport
from tests.conftest import BACKENDS, SimHarness
from tests.waiting import wait_for

UNDER_TEST = ("sim", "gpio", "serial")


@pytest.fixture(params=UNDER_TEST)
def backend(request):
    h = BACKENDS[request.param]()
    h._open = []
    yield h
    if hasattr(h, "close"):
        h.close()


def now(backend, dev) -> float:
    """Device time: the simulator's and the rig's own clocks; the host's for serial."""
    return dev.clock.now() if hasattr(dev, "clock") else time.monotonic()


def let_time_pass(backend, dev, seconds: float) -> None:
    if backend.name == "gpio":
        dev.clock.sleep(seconds)  # the rig's time: its dealer and its motor watcher act
    elif backend.name == "serial":
        time.sleep(seconds / 50)  # the virtual MCU runs fifty times faster than real time


def summary(report: PassReport) -> tuple:
    fault = report.fault
    return (fault.kind if fault else None, fault.message if fault else None,
            fault.card if fault else None, report.expected, report.counted, report.piles,
            report.retries, report.tray_empty)


def run(harness, faults, cards=24):
    dev = harness.make(cards, faults)
    return dev, dev.run_pass(coin_plan(cards, random.Random(5)))


CASES = {
    "hard jam": ["jam:13"],
    "jam freed by a retry": ["jam:5:1"],
    "misfeed": ["misfeed:3"],
    "misfeed freed by two retries": ["misfeed:8:2"],
    "double feed": ["double:7"],
    "battery too weak": ["battery:5.9"],
    "clean": [],
}


@pytest.mark.parametrize("case", CASES)
def test_each_fault_gives_the_same_report_and_latch_as_the_simulator(backend, case):
    ref_dev, ref = run(SimHarness(), CASES[case])
    dev, report = run(backend, CASES[case])
    assert summary(report) == summary(ref)
    assert dev.health().ok == ref_dev.health().ok  # latched (or not) alike
    assert not dev.health().motor_on


def test_the_pass_time_limit_is_a_timeout_that_does_not_latch(backend):
    dev = backend.make(104)
    dev.limits = replace(dev.limits, max_pass_seconds=2.0)
    report = dev.run_pass(coin_plan(104, random.Random(5)))
    assert report.fault is not None and report.fault.kind is FaultKind.TIMEOUT
    assert "longer than 2 s" in report.fault.message
    assert 0 < report.counted < 104 and report.seconds == pytest.approx(2.0, abs=0.05)
    assert dev.health().ok and not dev.health().motor_on


def test_stop_mid_pass_turns_the_motor_off_within_a_card_and_it_stays_off(backend):
    dev = backend.make(24)
    asked: list[float] = []

    def on_card(counted, expected):
        if counted == 10:
            asked.append(now(backend, dev))
            dev.stop()

    report = dev.run_pass(coin_plan(24, random.Random(5)), on_card)
    assert report.fault is not None and report.fault.kind is FaultKind.STOPPED
    assert "stopped on request" in report.fault.message
    # at most the card already in the beam; on serial, from when the STOP reached the MCU
    # (its machine runs 50x faster: a busy host's 20 ms is a card there, not on a Pi)
    asked_at = 10
    if backend.name == "serial":  # noted just after the stop, whose PASS_DONE may come first
        mcu = backend.mcus[id(dev)]
        wait_for(lambda: mcu.dealt_at_stop is not None, 10.0, "the MCU to note the STOP")
        asked_at = mcu.dealt_at_stop
    assert asked_at >= 10 and report.counted in (asked_at, asked_at + 1)
    health = dev.health()
    assert health.ok and not health.motor_on  # a stop is not a fault to clear
    dealt = sum(len(p) for p in backend.piles(dev))
    let_time_pass(backend, dev, 5.0)  # longer than every limit: no retry, no refeed
    assert sum(len(p) for p in backend.piles(dev)) == dealt == report.counted
    assert not dev.health().motor_on
    if backend.name == "gpio":  # the pins themselves: off at once, never on again
        motor = backend.rigs[id(dev)].pins["motor"]
        t, changes = motor._last_change, []
        for change in reversed(motor.states):
            changes.append((t, change.state))
            t -= change.timestamp
        after = [(t, s) for t, s in changes if t >= asked[0]]
        assert after and all(not s for _, s in after)
        assert min(t for t, _ in after) - asked[0] <= 1 / backend.card_rate
    again = dev.run_pass(coin_plan(24 - report.counted, random.Random(6)))
    assert again.fault is None  # the next pass runs: nothing latched, nothing stuck


def test_on_tick_comes_at_least_every_tenth_of_a_second_of_device_time(backend):
    dev = backend.make(24)
    ticks: list[float] = []
    start = now(backend, dev)
    report = dev.run_pass(coin_plan(24, random.Random(5)),
                          on_tick=lambda: ticks.append(now(backend, dev)))
    end = now(backend, dev)
    assert report.fault is None and len(ticks) >= 20
    gaps = [b - a for a, b in zip([start, *ticks], [*ticks, end], strict=True)]
    # serial: the host's clock, which a busy machine can hold up past 0.1 s (a second is
    # still far inside any watchdog); its ticks are counted above all the same
    assert max(gaps) <= (1.0 if backend.name == "serial" else 0.1)
