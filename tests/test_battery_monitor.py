"""A missing or broken battery monitor is reported as such, never as a low battery.

On the rig: gpiozero's real ``MCP3008`` reading over mock SPI from the rig's
``MockMCP3008`` (hardware_sim.gpio_rig), or from nothing at all (``adc_absent``: the
chip taken off the bus, so DOUT rests low, as on a machine with no MCP3008 fitted), or
a DOUT stuck high (``adc_dout_high``). Adversarial: a reading that flickers between the
block's volts and the floor, and a block that truly sags, which must stay low_battery.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from cli import render
from hardware_sim import parse_fault_specs
from hardware_sim.bench import miswire
from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
from shuffler.config import Config, GpioConfig
from shuffler.control.controller import PassController
from shuffler.control.reports import BatteryReport
from shuffler.core import battery as batt
from shuffler.core.planning import coin_plan
from shuffler.device.contract import FaultKind, FaultLimits
from shuffler.errors import BatteryMonitorError, LowBatteryError, error_kind
from shuffler.schemas import validate
from shuffler.store.state import StateStore


@pytest.fixture
def machine(tmp_path):
    made = []

    def make(wrong=None, faults=(), gpio=None):
        rig = GpioRig.for_cards(24, faults=parse_fault_specs(faults), gpio=gpio or GpioConfig(),
                                rng=random.Random(5))
        dev = RiggedGpioDevice(rig, limits=FaultLimits(retries=1))
        made.append(dev)
        if wrong:
            miswire(rig, wrong)
        return dev, PassController(dev, StateStore(tmp_path / f"state{len(made)}"))

    yield make
    for dev in made:
        dev.close()


def flicker(dev, every: int = 2):
    """CH0 reads the block's volts, but every ``every``-th conversion the floor: a loose
    wire at the tap."""
    real, n = dev.rig.adc.read_volts, [0]

    def read(channel: int) -> float:
        n[0] += 1
        return 0.004 if n[0] % every == 0 else real(channel)
    dev.rig.adc.read_volts = read


def battery_json(ctl) -> dict:
    return validate({"schema": 1} | BatteryReport.of(ctl, Config(), 24).to_json(), "battery")


@pytest.mark.parametrize(("wrong", "problem", "words"), [
    ("adc_absent", "no_reading", "SW1"), ("adc_dout_high", "full_scale", "R2 open")])
def test_a_monitor_at_the_floor_or_full_scale_refuses_as_a_monitor_fault(machine, wrong,
                                                                         problem, words):
    dev, ctl = machine(wrong)
    reading = dev.battery()
    assert reading.measured and reading.monitor is not None
    assert reading.monitor.problem == problem and reading.monitor.blocks
    with pytest.raises(BatteryMonitorError) as raised:
        ctl.check_ready(24)
    e = raised.value
    assert not isinstance(e, LowBatteryError)
    assert error_kind(e) == "battery_monitor" and e.exit_code == 3
    assert words in str(e) and "[gpio] adc_channel = false" in str(e)
    assert "Change the 9 V battery" not in str(e)
    out = battery_json(ctl)
    assert out["state"] == "monitor_fault" and out["monitor"]["problem"] == problem
    assert out["volts"] is None and out["passes_left"] is None
    line = render.battery_line(out)
    assert line.startswith("battery: monitor fault") and "adc_channel = false" in line
    assert not dev.motor_on and ctl.store.load().battery == []  # nothing ran, nothing learned


def test_the_floor_message_names_the_spi_pins_and_the_reading(machine):
    dev, _ctl = machine("adc_absent")
    message = dev.battery().monitor.message
    assert "0.00 V at MCP3008 CH0" in message
    for pin in ("GPIO8 (pin 24)", "GPIO9 (pin 21)", "GPIO10 (pin 19)", "GPIO11 (pin 23)"):
        assert pin in message


def test_a_build_without_a_monitor_runs_its_passes(machine):
    dev, ctl = machine(gpio=replace(GpioConfig(), adc_channel=None))
    assert dev.adc is None and not dev.battery().measured
    report = ctl.run_pass(coin_plan(24, random.Random(2)))
    assert report.ok and report.counted == 24 and report.min_volts is None
    assert battery_json(ctl)["state"] == "not_measured"


def test_a_well_wired_monitor_reports_no_monitor_fault(machine):
    dev, ctl = machine()
    assert dev.battery().monitor is None
    report = ctl.run_pass(coin_plan(24, random.Random(2)))
    assert report.ok and report.min_volts is not None and report.min_volts > 7
    out = battery_json(ctl)
    assert out["state"] == "ok" and out["monitor"] is None


def test_a_flickering_reading_runs_the_pass_and_never_reaches_the_battery_figures(machine):
    dev, ctl = machine()
    flicker(dev)
    report = ctl.run_pass(coin_plan(24, random.Random(2)))
    assert report.ok and report.counted == 24
    assert report.min_volts is not None and report.min_volts > 7  # the floor was dropped
    assert all(v > 7 for _, v in ctl.store.load().battery)  # the history learned no 0 V
    out = battery_json(ctl)
    assert out["state"] == "ok" and out["monitor"]["problem"] == "unsteady"
    assert "readings in the last pass" in out["monitor"]["message"]
    assert "battery monitor unsteady" in render.battery_text(out)
    # the monitor settles (the wire fixed): the next pass drops nothing, the warning goes
    dev.rig.adc.read_volts = lambda ch: dev.rig._adc_volts(ch)
    dev.rig.mechanism.gather()
    dev.rig._sensors()
    assert ctl.run_pass(coin_plan(24, random.Random(3))).ok
    assert battery_json(ctl)["monitor"] is None


def test_a_flicker_does_not_turn_a_misfeed_into_low_battery(machine):
    dev, ctl = machine(faults=["misfeed:9"])
    flicker(dev)
    report = ctl.run_pass(coin_plan(24, random.Random(2)))
    assert report.fault is not None and report.fault.kind is FaultKind.MISFEED


def test_a_block_that_truly_sags_is_still_low_battery_with_a_flicker(machine):
    dev, ctl = machine(faults=["battery:5.9"])
    flicker(dev, every=3)
    with pytest.raises(LowBatteryError):  # the controller refuses it at rest ...
        ctl.check_ready(24)
    # ... and the device, made to run, stalls: low battery
    report = dev.run_pass(coin_plan(24, random.Random(2)))
    assert report.fault is not None and report.fault.kind is FaultKind.LOW_BATTERY


def test_a_flat_block_at_rest_is_refused_as_low_battery_not_as_the_monitor(machine):
    dev, ctl = machine(faults=["battery:6.2"])
    assert dev.battery().monitor is None
    with pytest.raises(LowBatteryError) as raised:
        ctl.check_ready(24)
    assert error_kind(raised.value) == "low_battery"
    assert battery_json(ctl)["state"] == "critical"


def test_every_reading_at_the_floor_is_no_reading_even_with_noise_near_it():
    # a flat alkaline block under the motor's load (4.8 V) is still a reading
    assert batt.monitor_problem(4.8 / 4.03) is None
    assert batt.monitor_problem(0.29) == "no_reading"
    assert batt.monitor_problem(3.25) == "full_scale"
    assert batt.monitor_problem(2.68) is None  # 10.8 V, the most the 9 V side takes
    assert batt.monitor_problem(2.45, vref=2.5) == "full_scale"  # saturates at its VREF
    assert batt.sort_readings([0.01, 3.3]) == ([], "no_reading")
    assert batt.sort_readings([3.3, 3.29]) == ([], "full_scale")
    assert batt.sort_readings([2.3, 2.3]) == ([2.3, 2.3], None)
