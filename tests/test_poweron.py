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
from shuffler.poweron import FAULTS, NANO_BUILD, PI_BUILD, Build

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: the words the catching reading must use to name each fault
NAMES = {"reversed_block": "on backwards", "q3_swapped": "drain and source are swapped",
         "divider_swapped": "R1 and R2 are swapped", "motor_shorted": "motor path is shorted"}


def divider(build: Build) -> tuple[float, float]:
    if build is PI_BUILD:
        return pinmap.DIVIDER_TOP, pinmap.DIVIDER_BOTTOM
    return pinmap.NANO_DIVIDER_TOP, pinmap.NANO_DIVIDER_BOTTOM


def model(build: Build, fault: str | None, block: float = 9.6) -> dict[str, float]:
    """What a meter reads at each of the procedure's readings, on the schematic's circuit
    with ``fault`` wired in: Q3's body diode 0.6 V, its channel on whenever its gate is
    below its source (either way round), the motor's winding 9 Ω, the idle 15 mA through
    F1 (0.3 Ω) and Q3 (50 mΩ), OL as infinity."""
    top, bottom = divider(build)
    if fault == "divider_swapped":
        top, bottom = bottom, top
    swapped, reversed_ = fault == "q3_swapped", fault == "reversed_block"
    at_j1 = -block if reversed_ else block
    # reversed, a correct Q3's channel is off and its body diode blocks; swapped, it conducts
    reversed_tp1 = -(block - 0.6) if swapped else 0.0
    tp1 = reversed_tp1 if reversed_ else block - 0.015 * 0.35
    return {
        "q3_forward": math.inf if swapped else 0.6,
        "q3_reverse": 0.6 if swapped else math.inf,
        "motor_path": 0.2 if fault == "motor_shorted" else 9.0,
        "rail_short": 133e3,  # C1 charged: the divider and the buck's input
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
    low, high = pinmap.divider_ratio_range()
    ratio = pinmap.divider_ratio()
    worst = max(ratio / low - 1, 1 - ratio / high)
    assert worst + 2 * 0.005 <= limits.TAP_TOLERANCE  # a 0.5 % meter, on TP1 and TP3
    # and a swapped divider lies far outside it on both builds
    for build in (PI_BUILD, NANO_BUILD):
        top, bottom = divider(build)
        assert top / bottom > 1 + 3 * limits.TAP_TOLERANCE  # the tap reads that many times


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
