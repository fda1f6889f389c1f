"""The first power-on (docs/hardware.md, from shuffler.poweron) walked against a model of
the schematic: a good build reads inside every tolerance, and each miswiring of
poweron.FAULTS is caught at a step that names it before the host is connected (and so
before anything drives the motor). The figures are the schematic's."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from shuffler import limits, pinmap, poweron
from shuffler.core import battery
from shuffler.poweron import FAULTS, NANO_BUILD, PI_BUILD, Build

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: the words the catching reading must use to name each fault
NAMES = {"reversed_block": "on backwards", "q3_swapped": "drain and source are swapped",
         "divider_swapped": "R1 and R2 are swapped", "motor_shorted": "motor path is shorted",
         "d4_mirrored": "D4 is mirrored", "module_reversed": "VCC and GND swapped"}


def divider(build: Build) -> tuple[float, float]:
    if build is PI_BUILD:
        return pinmap.DIVIDER_TOP, pinmap.DIVIDER_BOTTOM
    return pinmap.NANO_DIVIDER_TOP, pinmap.NANO_DIVIDER_BOTTOM


def model(build: Build, fault: str | None, block: float = 9.6) -> dict[str, float]:
    """What a meter reads at each of the procedure's readings, on the schematic's circuit
    with ``fault`` wired in: Q3's body diode 0.6 V, its channel on whenever its gate is
    below its source (either way round), the motor's winding 9 Ω, the idle current through
    the block's worst internal resistance, F1 and Q3, OL as infinity. Across the logic rail
    with nothing powered: the modules' IR LEDs (1.15 V on the diode test, tens of kΩ on
    ohms); D4 mirrored, its two BAT54 diodes in series (2 × 0.29 V at 1 mA, about 600 Ω on
    ohms); a module on backwards, one silicon junction (0.62 V, about 1.3 kΩ)."""
    top, bottom = divider(build)
    if fault == "divider_swapped":
        top, bottom = bottom, top
    swapped, reversed_ = fault == "q3_swapped", fault == "reversed_block"
    at_j1 = -block if reversed_ else block
    # reversed, a correct Q3's channel is off and its body diode blocks; swapped, it conducts
    reversed_tp1 = -(block - 0.6) if swapped else 0.0
    path = limits.BLOCK_OHMS + limits.F1_OHMS + limits.Q3_OHMS
    tp1 = reversed_tp1 if reversed_ else block - battery.IDLE_AMPS * path
    return {
        "q3_forward": math.inf if swapped else 0.6,
        "q3_reverse": 0.6 if swapped else math.inf,
        "motor_path": 0.2 if fault == "motor_shorted" else 9.0,
        "rail_short": 133e3,  # C1 charged: the divider and the buck's input
        "rail_ohms": {"d4_mirrored": 600.0, "module_reversed": 1300.0}.get(fault or "", 40e3),
        "rail_diode": {"d4_mirrored": 0.58, "module_reversed": 0.62}.get(fault or "", 1.15),
        "block": at_j1, "tp1_off": 0.0, "tp1": tp1,
        "tp2": 5.0 if tp1 > 5.5 else 0.0,
        "tp3": tp1 * bottom / (top + bottom),
        "ain": 0.0,
        "logic": 3.3 if build is PI_BUILD else 4.7,
    }


def walk(build: Build, fault: str | None, block: float = 9.6):
    """The first reading outside its tolerance: (step number, reading, value), or None."""
    seen = model(build, fault, block)
    taken: dict[str, float] = {}
    for n, step in enumerate(poweron.steps(build), 1):
        for reading in step.readings:
            value = seen[reading.name]
            low, high = reading.bounds(taken)
            if not low <= value <= high:
                return n, step, reading, value
            taken[reading.name] = value
    return None


@pytest.mark.parametrize("build", [PI_BUILD, NANO_BUILD], ids=["pi", "nano"])
@pytest.mark.parametrize("block", [limits.BLOCK_MIN_VOLTS, 7.2, 9.6, 10.1,
                                   limits.DRIVER_VM_MAX_VOLTS])
def test_a_good_build_reads_inside_every_tolerance(build, block):
    assert walk(build, None, block) is None  # a fresh NiMH's 10.1 V included


@pytest.mark.parametrize("build", [PI_BUILD, NANO_BUILD], ids=["pi", "nano"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_miswiring_is_caught_by_name_before_the_host_is_connected(build, fault):
    caught = walk(build, fault)
    assert caught is not None, f"{fault} passes every reading"
    n, step, reading, _ = caught
    assert fault in reading.catches and NAMES[fault] in reading.outside, (n, reading.name)
    assert not step.host_connected  # and so nothing drives the motor yet
    first_host = next(i for i, s in enumerate(poweron.steps(build), 1) if s.host_connected)
    assert n < first_host


def test_a_reversed_block_is_caught_before_sw1_is_switched_on():
    _, step, reading, _ = walk(PI_BUILD, "reversed_block")
    assert "SW1 off" in step.title and reading.name == "block"


def test_a_swapped_q3_is_caught_with_nothing_powered():
    n, step, reading, _ = walk(PI_BUILD, "q3_swapped")
    assert n == 1 and "Nothing powered" in step.title and reading.mode == "diode test"


def test_the_tap_tolerance_covers_the_divider_spread_and_the_meter():
    """TP3 against TP1 read on the cheapest meter (docs/bom.md, "Tools"): the ratio's
    worst case, the meter's 10 MΩ across the tap's source, its gain on both readings and its
    digits on both at the lowest block, where they weigh most."""
    for build in (PI_BUILD, NANO_BUILD):
        top, bottom = divider(build)
        ratio = (top + bottom) / bottom
        spread = max(ratio / ((top * 0.99 + bottom * 1.01) / (bottom * 1.01)) - 1,
                     1 - ratio / ((top * 1.01 + bottom * 0.99) / (bottom * 0.99)))
        source = top * bottom / (top + bottom)
        loading = source / (source + limits.METER_INPUT_OHMS)
        digits = limits.METER_DIGITS * limits.METER_DIGIT_VOLTS
        low_tp1 = limits.BLOCK_MIN_VOLTS
        worst = (spread + loading + 2 * limits.METER_GAIN + digits / (low_tp1 / ratio)
                 + digits / low_tp1)
        assert worst <= limits.TAP_TOLERANCE, (build.name, worst)
        # and a swapped divider lies far outside it
        assert top / bottom > 1 + 3 * limits.TAP_TOLERANCE  # the tap reads that many times
    low, high = pinmap.divider_ratio_range()  # the schematic's own figures agree
    assert max(pinmap.divider_ratio() / low - 1, 1 - pinmap.divider_ratio() / high) < 0.016


@pytest.mark.parametrize("build", [PI_BUILD, NANO_BUILD], ids=["pi", "nano"])
@pytest.mark.parametrize("block", [limits.BLOCK_MIN_VOLTS, 9.6, limits.DRIVER_VM_MAX_VOLTS])
def test_a_meter_reading_its_last_digits_either_way_still_passes_tp1_and_tp3(build, block):
    """A good build read on the procedure's meter: TP1 and TP3 off by their 2 digits in
    either direction, the tap 0.5 % low from the gain and the meter's load, stay inside."""
    d = limits.METER_DIGITS * limits.METER_DIGIT_VOLTS
    for sign in (-1, 1):
        seen = model(build, None, block)
        seen["tp1"] += sign * d
        seen["tp3"] = seen["tp3"] * (1 - 0.0075 if sign < 0 else 1 + 0.005) + sign * d
        taken: dict[str, float] = {}
        for step in poweron.steps(build):
            for reading in step.readings:
                low, high = reading.bounds(taken)
                assert low <= seen[reading.name] <= high, (reading.name, seen[reading.name])
                taken[reading.name] = seen[reading.name]


def test_tp1s_sags_are_the_batterys_own_resistance_at_the_documented_currents():
    """The documented blocks' worst internal resistance, from their rest and load curves at
    the pass current, and the bounds TP1 quotes at idle, in a pass and at a stall."""
    worst = max(r - ld for c in battery.CURVES.values()
                for (q, r), (q2, ld) in zip(c.rest, c.load, strict=True) if q == q2)
    assert worst / battery.PASS_AMPS == pytest.approx(limits.BLOCK_OHMS, abs=0.05)
    path = limits.BLOCK_OHMS + limits.F1_OHMS + limits.Q3_OHMS
    digits = limits.METER_DIGITS * limits.METER_DIGIT_VOLTS
    assert battery.IDLE_AMPS * path + digits <= limits.IDLE_DROP_VOLTS
    in_f1_q3 = battery.PASS_AMPS * (limits.F1_OHMS + limits.Q3_OHMS)
    assert in_f1_q3 == pytest.approx(limits.PASS_DROP_VOLTS, abs=0.01)
    sag = battery.PASS_AMPS * path
    assert sag == pytest.approx(limits.PASS_SAG_VOLTS, abs=0.05)
    motor = next(d for d in battery.MECHANISM if "motor" in d.part)
    stall = (pinmap.motor_duty_cap(pinmap.MOTOR_RATED_VOLTS, 9.5) * limits.MOTOR_STALL_AMPS
             + battery.PASS_AMPS - motor.from_block_ma(True) / 1000)
    stalled = stall * path
    assert stalled == pytest.approx(limits.STALL_SAG_VOLTS, abs=0.05)
    # a fresh block less its stall sag is still above the budget's cut-off under load
    assert 9.5 - limits.STALL_SAG_VOLTS > battery.DEFAULT_CUTOFF_LOAD_VOLTS


def test_a_mirrored_d4_is_caught_across_the_rail_before_the_host_is_powered():
    for build in (PI_BUILD, NANO_BUILD):
        n, step, reading, _ = walk(build, "d4_mirrored")
        assert n == 1 and "Nothing powered" in step.title
        assert reading.name in ("rail_ohms", "rail_diode") and "pin 1 to GND" in reading.outside
        n, step, reading, _ = walk(build, "module_reversed")
        assert n == 1 and reading.name == "rail_diode"


def test_the_procedure_quotes_the_schematic_ratio_and_test_points():
    pi = poweron.procedure_md(PI_BUILD)
    assert f"TP1 ÷ {pinmap.divider_ratio():.2f} ± {limits.TAP_TOLERANCE:.0%}" in pi
    nano = poweron.procedure_md(NANO_BUILD)
    assert "TP1 ÷ 3.00" in nano and "TP4" not in nano and "J4" not in nano
    for text, svg in ((pi, "schematic.svg"), (nano, "schematic-nano.svg")):
        drawn = set(re.findall(r"TP\d", (DOCS / svg).read_text(encoding="utf-8")))
        assert set(re.findall(r"TP\d", text)) <= drawn, svg
    for tp, (_, expect, _) in pinmap.TEST_POINTS.items():
        assert tp in pi
        if tp == "TP2":
            assert f"{limits.BUCK_VOLTS[0]:.2f}–{limits.BUCK_VOLTS[1]:.2f} V" in expect


def test_hardware_md_holds_the_generated_procedures():
    text = (DOCS / "hardware.md").read_text(encoding="utf-8")
    for name, build in (("first power-on", PI_BUILD), ("first power-on nano", NANO_BUILD)):
        m = re.search(rf"<!-- generated: {name} -->\n(.*?)\n<!-- end generated: {name} -->",
                      text, re.S)
        assert m and m.group(1) == poweron.procedure_md(build), name
