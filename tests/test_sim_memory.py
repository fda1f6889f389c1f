"""A simulated evening that stays flat: the rig keeps no unbounded history (its pins'
states, the latency samples, what the LED showed), so ``serve`` on sim-gpio holds its
memory over a hundred hands (it grew 7.4 MB a hand: gpiozero's MockPin.states filled
with the simulated MCP3008's SPI clock edges). The evening itself, RSS hand by hand:
``benchmarks/bench_sim_memory.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware_sim import SimDevice
from hardware_sim.gpio_rig import STATES_KEPT, GpioRig, RiggedGpioDevice
from shuffler.device.contract import Signal, Status
from shuffler.gpio.device import LATENCY_KEPT
from tests.served import Service

#: the acceptance's evening: hands, the hand the baseline is read after, the slack (MB)
HANDS, AFTER, SLACK_MB = 100, 5, 10.0


def test_every_rig_pin_keeps_a_bounded_history():
    rig = GpioRig.for_cards(24)
    dev = RiggedGpioDevice(rig)
    try:
        clock = rig.adc.clock_pin
        trims = reads = 0
        while trims < 2:  # the battery monitor's SPI reads, over and over, till trimmed twice
            before = len(clock.states)
            dev.battery()
            reads += 1
            trims += len(clock.states) < before
            assert reads <= 3 * STATES_KEPT, "the SPI clock's history was never trimmed"
        pins = rig.factory.pins.values()
        assert max(len(p.states) for p in pins) <= 2 * STATES_KEPT
        assert len(clock.states) >= STATES_KEPT  # the newest are kept, not dropped
        beam = rig.pins["beam"]
        for k in range(3 * STATES_KEPT):
            beam.drive_high() if k % 2 else beam.drive_low()
        assert STATES_KEPT <= len(beam.states) <= 2 * STATES_KEPT
        assert beam.states[-1].state == beam.state  # the latest change is the last
        for _ in range(2 * LATENCY_KEPT):
            dev.latency.add(0.001)
        assert len(dev.latency.samples) == LATENCY_KEPT
    finally:
        dev.close()


def test_the_simulators_led_history_is_bounded():
    dev = SimDevice.for_cards(24)
    for _ in range(10_000):
        dev.show(Status(Signal.READY))
    assert 1000 <= len(dev.shown) <= 2000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.mark.slow
def test_serve_on_sim_gpio_holds_its_memory_over_a_hundred_hands(tmp_path):
    """Issue 33's acceptance: the real ``serve`` process on sim-gpio at a high sim speed
    (300: the quickest evening here, about 0.6 s a hand), a hundred hands asked on its
    socket; its RSS never rises 10 MB above its value after hand 5 (it grew 7.4 MB a
    hand). Two passes a hand keep the 200 passes inside one battery block (about 370), as
    the service cannot change the block."""
    svc = Service(tmp_path, speed=300)
    svc.args = ["--device", "sim-gpio", *svc.args]
    svc.start()
    try:
        assert svc.proc is not None
        rss: dict[int, float] = {}
        for number in range(1, HANDS + 1):
            result = svc.client().request("hand", passes=2)
            assert result["hand"]["completed"], result
            rss[number] = rss_mb(svc.proc.pid)
        grown = {n: round(v - rss[AFTER], 1) for n, v in rss.items() if n > AFTER}
        assert max(grown.values()) < SLACK_MB, grown
    finally:
        assert svc.stop() == 0, svc.log.read_text()
