"""The machine's own timings reach the microcontroller: ``[engine] soft_start_s`` (and the
beam filter, the flap's travel) change a pass on sim-serial and sim-avr as they do on
sim-gpio, and a change of limits sends them again."""

from __future__ import annotations

import functools
import random
from dataclasses import replace

import pytest

from firmware_bridge.device import SerialDevice, Timings, config_message, default_timings
from shuffler.config import load_config_text
from shuffler.core.planning import coin_plan
from shuffler.device.contract import EngineTimings, FaultLimits
from shuffler.device.registry import SimOptions, open_device
from shuffler.errors import DeviceError
from shuffler.pinmap import SERVO_FRAME_S

from .test_firmware import MISSING

BACKENDS = ["sim-gpio", "sim-serial",
            pytest.param("sim-avr", marks=pytest.mark.skipif(MISSING is not None,
                                                             reason=MISSING or ""))]


@functools.cache
def pass_seconds(name: str, soft_start: float, table: str = "engine") -> float:
    """A pass's own seconds on ``name`` (the device's time: the same every time, so a
    pass measured once serves every test that asks for it)."""
    config = load_config_text(f"[{table}]\nsoft_start_s = {soft_start}\n")
    dev = open_device(name, config, cards=24, sim=SimOptions(speed=20, seed=1))
    try:
        report = dev.run_pass(coin_plan(24, random.Random(1)))
        assert report.fault is None and report.counted == 24, report
        return report.seconds
    finally:
        dev.close()


@pytest.mark.parametrize("name", BACKENDS)
def test_soft_start_lengthens_the_pass_on_every_backend(name):
    """Five steps over 2 s: full speed (and the first card) 1.6 s later than with none.
    sim-avr runs in real time; the others count their own simulated seconds."""
    slow, quick = pass_seconds(name, 2.0), pass_seconds(name, 0.0)
    assert 1.4 <= slow - quick <= 2.2, (slow, quick)


@pytest.mark.parametrize("name", ["sim-gpio", "sim-serial"])
def test_a_soft_start_left_under_gpio_still_reaches_the_backend(name):
    """A 0.2.0 config (``[gpio] soft_start_s``) runs the pass as ``[engine]`` would."""
    assert pass_seconds(name, 2.0, "gpio") == pass_seconds(name, 2.0, "engine")


def test_every_backend_is_given_the_timings_when_it_is_opened():
    """Opened, not patched after: the simulator has the beam filter (and no soft start of
    its own), the pins' device and the bridge the whole set."""
    config = load_config_text("[engine]\nsoft_start_s = 0.3\nbeam_min_gap_s = 0.02\n")
    for name, soft in (("sim", 0.0), ("sim-gpio", 0.3), ("sim-serial", 0.3)):
        dev = open_device(name, config, cards=24, sim=SimOptions(speed=20, seed=1))
        try:
            engine = dev.timings.engine if name == "sim-serial" else dev.timings  # + the flap's
            assert (engine.soft_start_s, engine.min_gap_s) == (soft, 0.02), name
        finally:
            dev.close()


def test_the_config_carries_the_timings_and_the_servo_frame():
    t = Timings(EngineTimings(soft_start_s=0.25, min_blocked_s=0.004, min_gap_s=0.001), 0.08,
                0.63)
    msg = config_message(FaultLimits(), 5.0, t)
    assert (msg.soft_start_ms, msg.min_blocked_us, msg.min_gap_us) == (250, 4000, 1000)
    assert msg.max_duty_pct == 63
    assert msg.settle_ms == round((0.08 + SERVO_FRAME_S) * 1000) == 100


def test_timings_the_microcontroller_cannot_take_are_refused_before_anything_is_sent():
    with pytest.raises(DeviceError, match=r"settle_ms|diverter"):  # flap + frame > a card
        config_message(FaultLimits(), 10.0, replace(default_timings(), flap_travel_s=0.09))
    with pytest.raises(DeviceError, match="min_blocked_us"):
        config_message(FaultLimits(), 5.0, Timings(EngineTimings(min_blocked_s=0.2), 0.05, 0.63))


def test_new_limits_reach_the_virtual_mcu_with_the_timings():
    from hardware_sim import SimDevice
    from hardware_sim.virtual_mcu import VirtualMCU

    mcu = VirtualMCU(SimDevice.for_cards(24))
    dev = SerialDevice(mcu.path, timings=Timings(EngineTimings(soft_start_s=0.5), 0.05,
                                                               0.63))
    try:
        assert mcu.config is not None and mcu.config.soft_start_ms == 500
        dev.limits = FaultLimits(jam_seconds=0.7)
        assert mcu.config.jam_ms == 700 and mcu.config.soft_start_ms == 500
        assert mcu.sim.timings.soft_start_s == 0.5
    finally:
        dev.close()
        mcu.close()


def test_the_engine_timings_have_one_set_of_defaults_the_configs():
    """The bridge, the simulator and the GPIO backend take the config's values through
    one type; none of them keeps a default of its own (a second set drifted before)."""
    import ast
    from pathlib import Path

    from shuffler.config import Config

    assert default_timings().engine == Config().engine.timings()
    assert EngineTimings() == EngineTimings(0.0, 0.0, 0.0, 0.0)  # the engine's own: ideal
    names = {"soft_start_s", "glitch_s", "min_blocked_s", "min_gap_s", "min_blocked",
             "min_gap", "beam_glitch_s", "beam_min_blocked_s", "beam_min_gap_s"}
    top = Path(__file__).resolve().parents[1]
    found = []
    for folder in ("shuffler", "firmware_bridge", "hardware-sim", "cli"):
        for path in (top / folder).rglob("*.py"):
            if path.name == "config.py" and path.parent.name == "shuffler":
                continue  # the one place: [engine]'s keys
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                        and node.target.id in names and isinstance(node.value, ast.Constant)
                        and node.value.value):
                    found.append(f"{path.relative_to(top)}:{node.lineno} {node.target.id}")
                if isinstance(node, ast.arguments):
                    args = node.args[len(node.args) - len(node.defaults):] + node.kwonlyargs
                    defaults = list(node.defaults) + list(node.kw_defaults)
                    for arg, default in zip(args, defaults, strict=False):
                        if (arg.arg in names and isinstance(default, ast.Constant)
                                and default.value):
                            found.append(f"{path.relative_to(top)}:{arg.lineno} {arg.arg}")
    assert found == [], f"a second set of engine timing defaults: {found}"
