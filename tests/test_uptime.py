"""Time that wraps safely: the firmware's clock (2^32 us = 4,295 s, 2^32 ms = 49.7 days)
and the Python side's clocks, on sim-avr and sim-serial, started just before and just
after each wrap with --sim-uptime: every pass counts all its cards, with no fault."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from firmware_bridge.device import SerialDevice
from hardware_sim import SimDevice
from hardware_sim.virtual_mcu import VirtualMCU
from shuffler.core.planning import coin_plan
from shuffler.device.clock import ScaledClock

from .test_firmware import MISSING

pytestmark = pytest.mark.slow

WRAP_US, WRAP_MS = 2**32 / 1e6, 2**32 / 1e3  # 4294.967296 s, 4294967.296 s
#: started 1 s before a wrap, the passes run across it; 0.5 s after, they run past it
UPTIMES = [WRAP_US - 1.0, WRAP_US + 0.5, WRAP_MS - 1.0, WRAP_MS + 0.5]


@pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
@pytest.mark.parametrize("uptime", UPTIMES)
def test_passes_on_the_chip_across_its_clock_wraps(uptime):
    from hardware_sim.sim_avr import SimAvr, serial_on

    chip = SimAvr("--cards=24", "--card-rate=50", "--spinup=0.01", "--flap-travel=0.01",
                  "--frame-scale=0.1", f"--uptime={uptime}")
    dev = serial_on(chip)
    try:
        for i in range(5):  # about 0.6 s each, back to back: one of them spans the wrap
            report = dev.run_pass(coin_plan(24, random.Random(i)))
            assert report.fault is None and report.counted == 24, (i, report)
            chip.command("gather")
        assert dev.health().ok
        clock_ms = int(chip.state()["clock_ms"])  # the chip's clock went past the wrap
        assert (clock_ms * 1000) % 2**32 < 10**7 if uptime < WRAP_MS else clock_ms < 10**4
    finally:
        dev.close()


@pytest.mark.parametrize("uptime", UPTIMES)
def test_passes_on_the_virtual_mcu_across_the_clock_wraps(uptime):
    sim = SimDevice.for_cards(24, clock=ScaledClock(50, start=uptime))
    mcu = VirtualMCU(sim)
    dev = SerialDevice(mcu.path)
    try:
        for i in range(3):
            report = dev.run_pass(coin_plan(24, random.Random(i)))
            assert report.fault is None and report.counted == 24, (i, report)
            sim.mechanism.gather()
    finally:
        dev.close()
        mcu.close()


def test_input_times_continue_past_the_ms_wrap():
    """The MCU's INPUT ms wraps at 2^32 ms; the host's event times keep going."""
    sim = SimDevice.for_cards(24, clock=ScaledClock(50, start=WRAP_MS - 0.001))
    mcu = VirtualMCU(sim)
    dev = SerialDevice(mcu.path)
    try:
        seen = [dev._clock.unwrap(ms) for ms in (2**32 - 2, 2**32 - 1, 0, 5)]
        assert seen == [2**32 - 2, 2**32 - 1, 2**32, 2**32 + 5]
    finally:
        dev.close()
        mcu.close()


@pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
@pytest.mark.parametrize("uptime", [WRAP_US - 1.0, WRAP_MS - 1.0])
def test_the_cli_deals_a_hand_across_a_wrap_on_the_chip(tmp_path, uptime):
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path), "SHUFFLER_CONFIG": ""}
    out = subprocess.run([sys.executable, "-m", "shuffler", "--device", "sim-avr",
                          "--sim-uptime", str(uptime), "--json", "hand", "--passes", "3"],
                         capture_output=True, text=True, timeout=120, check=False, env=env)
    assert out.returncode == 0, out.stderr
    hand = json.loads(out.stdout)["hand"]
    assert all(p["counted"] == p["expected"] == 24 and p["fault"] is None
               for p in hand["pass_reports"])
