"""The first power-on, as data: each step's switch positions and readings, each reading with
its tolerance and what a reading outside it means. Pure.

docs/hardware.md's "First power-on" (both builds) is written from :func:`procedure_md` by
docs/make_schematic.py; ``tests/test_poweron.py`` walks the steps against a model of the
schematic with each miswiring of :data:`FAULTS` and checks that the first reading outside
its tolerance is at a step that names the fault, before the host is connected or the motor
driven. The figures come from :mod:`shuffler.limits` and :mod:`shuffler.pinmap`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from shuffler import limits, pinmap
from shuffler.limits import (
    BODY_DIODE_VOLTS,
    BUCK_VOLTS,
    IDLE_DROP_VOLTS,
    METER_DIGIT_VOLTS,
    METER_DIGITS,
    MOTOR_OHMS,
    NANO_5V,
    PASS_DROP_VOLTS,
    PASS_SAG_VOLTS,
    PI_3V3,
    RAIL_DIODE_VOLTS,
    RAIL_OHMS,
    SHORT_OHMS,
    STALL_SAG_VOLTS,
    TAP_TOLERANCE,
    ZERO_VOLTS,
)

#: the miswirings the procedure catches before anything that can be hurt is connected
FAULTS = {
    "reversed_block": "the block on backwards (or the snap's leads swapped at J1)",
    "q3_swapped": "Q3's drain and source swapped: it conducts through its channel either "
                  "way, so nothing shows it until a reversed block reaches C1, U5 and U1",
    "divider_swapped": "R1 and R2 swapped",
    "motor_shorted": "a short across the motor path (J2, AOUT1 to AOUT2)",
    "d4_mirrored": "D4 (BAT54S, SOT-23) fitted mirrored, pins 1 and 2 swapped: its two "
                   "diodes in series across the logic rail, a short of the host's 3V3 (5V) "
                   "the moment the host is powered",
    "module_reversed": "a sensor module's VCC and GND swapped: its chips' protection diode "
                       "across the logic rail",
}

Bounds = Callable[[dict[str, float]], tuple[float, float]]


def fixed(low: float, high: float) -> Bounds:
    return lambda _: (low, high)


@dataclass(frozen=True)
class Reading:
    """One reading: where the probes go, the meter's mode, the bounds (from the readings
    taken before it, by name), and what a reading outside them means."""

    name: str
    probes: str
    mode: str  # "diode test", "DC volts", "ohms", "continuity"
    expect: str  # the bounds in words
    bounds: Bounds
    outside: str
    catches: tuple[str, ...] = ()  # the faults of FAULTS its ``outside`` names


@dataclass(frozen=True)
class Step:
    title: str  # the switch positions and what is connected
    readings: tuple[Reading, ...]
    host_connected: bool = False
    then: str = ""  # what to do after the readings


@dataclass(frozen=True)
class Build:
    """What differs between the Pi build and the Nano build."""

    name: str
    host: str  # "the Pi", "the Nano"
    socket: str  # where the host plugs in
    ratio: float
    logic: tuple[str, str, tuple[float, float]]  # the logic rail's test: where, what, bounds
    rail: str  # the logic rail's probe point with the host out: "TP4 (3V3, U2 VDD)"


def _ratio_words(build: Build) -> str:
    nominal = 9.6 / build.ratio
    return (f"TP1 ÷ {build.ratio:.2f} ± {TAP_TOLERANCE:.0%} ({nominal:.2f} V at 9.6 V: "
            f"{nominal * (1 - TAP_TOLERANCE):.2f}–{nominal * (1 + TAP_TOLERANCE):.2f} V)")


def _tap(build: Build, catches: tuple[str, ...]) -> Reading:
    swapped = 9.6 * (build.ratio - 1) / build.ratio
    return Reading(
        "tp3", "TP3 (the divider's tap)", "DC volts", _ratio_words(build),
        lambda r: (r["tp1"] / build.ratio * (1 - TAP_TOLERANCE),
                   r["tp1"] / build.ratio * (1 + TAP_TOLERANCE)),
        f"about {swapped:.1f} V at 9.6 V: R1 and R2 are swapped; any other reading: a wrong "
        "value (read the bands, bom.md). SW1 off and fix it before going on", catches)


def _digits() -> float:
    """What the meter's last digits may add to a reading (its 20 V range)."""
    return METER_DIGITS * METER_DIGIT_VOLTS


#: what a low reading across the logic rail means, and where to look
_RAIL_LOW = ("D4 is mirrored (pins 1 and 2 swapped: fit it as drawn, pin 1 to GND, pin 2 to "
             "the rail, pin 3 to R10's end) or a sensor module has its VCC and GND swapped "
             "(U3, U4, U6–U8: unplug them one at a time; if the reading stays low, it is D4)")


def _rail_to_ground(build: Build) -> tuple[Reading, ...]:
    """The logic rail to GND with the host out: a mirrored D4 or a module on backwards
    shorts the host's rail the moment it is powered, so it is found here, unpowered."""
    where = f"red on {build.rail}, black on TP5 (GND)"
    both = ("d4_mirrored", "module_reversed")
    return (
        Reading("rail_ohms", f"{where}; let it settle while the capacitors charge", "ohms",
                f"over {RAIL_OHMS / 1000:g} kΩ, climbing", fixed(RAIL_OHMS, math.inf),
                "under 10 Ω: a solder bridge or a wire from the rail to GND; 10 Ω to "
                f"{RAIL_OHMS / 1000:g} kΩ: a diode across the rail: {_RAIL_LOW}. Do not "
                f"connect {build.host}", both),
        Reading("rail_diode", where, "diode test",
                f"{RAIL_DIODE_VOLTS:.2f} V or more, or OL (the modules' IR LEDs conduct from "
                "about 1.0 V)", fixed(RAIL_DIODE_VOLTS, math.inf),
                f"0.3–0.8 V: {_RAIL_LOW}; under 0.1 V: a short. Do not connect "
                f"{build.host}", both),
    )


def steps(build: Build) -> tuple[Step, ...]:
    vm, low = limits.DRIVER_VM_MAX_VOLTS, limits.BLOCK_MIN_VOLTS
    lo, hi = BODY_DIODE_VOLTS
    where, what, logic = build.logic
    return (
        Step(f"Nothing powered: no block on the snap, SW1 off, {build.host} not connected "
             f"(nothing in {build.socket}), R10 not fitted yet.", (
            Reading("q3_forward", "red on J1 + (the snap's red lead: through F1 to Q3's "
                    "drain, pin 3), black on SW1's input lug (Q3's source, pin 2)",
                    "diode test", f"{lo:.2f}–{hi:.2f} V (Q3's body diode)", fixed(lo, hi),
                    "OL: Q3's drain and source are swapped (or Q3, F1 not soldered); "
                    "under 0.2 V: Q3 shorted", ("q3_swapped",)),
            Reading("q3_reverse", "the probes the other way round (red on SW1's input lug, "
                    "black on J1 +)", "diode test", "OL (over range)", fixed(2.0, math.inf),
                    f"{lo:.2f}–{hi:.2f} V: Q3's drain and source are swapped, and a reversed "
                    "block would reach C1, U5 and U1: fit it as drawn (pin 3 D to F1, pin 2 S "
                    "to SW1, pin 1 G to R14)", ("q3_swapped",)),
            Reading("motor_path", "across J2 (AOUT1 to AOUT2, the motor connected); turn the "
                    "roller a little by hand", "ohms",
                    f"{MOTOR_OHMS[0]:g}–{MOTOR_OHMS[1]:g} Ω (the winding; it moves with the "
                    "brushes)", fixed(*MOTOR_OHMS),
                    "under 1 Ω: the motor path is shorted (a pinched lead, a bridge between "
                    "AOUT1 and AOUT2, a motor's whisker): F1 would trip at every start; OL: "
                    "a lead is open", ("motor_shorted",)),
            Reading("rail_short", "TP1 to TP5, then TP2 to TP5", "continuity",
                    f"no steady beep (a chirp while C1 charges is fine; over {SHORT_OHMS:g} Ω "
                    "once it has charged)", fixed(SHORT_OHMS, math.inf),
                    "a steady beep: a short on the 9 V or 5 V side (C1 or C2 reversed, a "
                    "solder bridge at U1 or U5)"),
            *_rail_to_ground(build),
        )),
        Step(f"Block in, SW1 off, {build.host} not connected. Black probe on TP5 (GND) from "
             "here on.", (
            Reading("block", "red on J1 +", "DC volts",
                    f"the block's volts, +{low:.1f} to +{vm:g} V", fixed(low, vm),
                    "negative: the block is on backwards (or the snap's leads are swapped at "
                    f"J1): unclip now. Above {vm:g} V: not a 9 V block (a 12 V supply, "
                    "8 NiMH cells): unclip now. Under 6 V: a spent block",
                    ("reversed_block",)),
            Reading("tp1_off", "TP1 (U1 VIN)", "DC volts", f"under {ZERO_VOLTS:g} V",
                    fixed(-ZERO_VOLTS, ZERO_VOLTS),
                    "the block's volts: SW1 is wired across its lugs, or shorted"),
        )),
        Step(f"SW1 on, {build.host} still not connected, R10 still out.", (
            Reading("tp1", "TP1 (U1 VIN)", "DC volts",
                    f"the J1 reading less 0 to {IDLE_DROP_VOLTS:g} V (the idle 14 mA through "
                    "the block's own resistance, F1 and Q3; the meter's last digit either "
                    f"way). In a pass TP1 reads up to {PASS_SAG_VOLTS:g} V under the block's "
                    f"rest volts ({PASS_DROP_VOLTS:g} V of it in F1 and Q3), with the motor "
                    f"stalled up to {STALL_SAG_VOLTS:g} V",
                    lambda r: (r["block"] - IDLE_DROP_VOLTS, r["block"] + _digits()),
                    "negative: unclip now (Q3's drain and source swapped and the block "
                    "reversed); about 0 V: F1 tripped (a short: SW1 off, find it) or SW1 not "
                    "conducting", ("q3_swapped", "reversed_block")),
            Reading("tp2", "TP2 (U5 VOUT, 5V_MECH)", "DC volts",
                    f"{BUCK_VOLTS[0]:.2f}–{BUCK_VOLTS[1]:.2f} V (the D24V5F5's ±4 %)",
                    fixed(*BUCK_VOLTS), "U5's VIN and VOUT swapped, or its output loaded "
                    "(the servo's lead reversed on J3: brown is GND)"),
            _tap(build, ("divider_swapped",)),
            Reading("ain", "U1's AIN1 and AIN2", "DC volts",
                    f"under {ZERO_VOLTS:g} V (R11, R12); the motor does not turn",
                    fixed(-ZERO_VOLTS, ZERO_VOLTS), "a pull-down missing or the wrong value"),
        )),
        Step(f"SW1 off. Fit R10. With {build.host} off and unplugged, fit it to "
             f"{build.socket}; then {build.host}'s USB supply, SW1 still off.", (
            Reading("logic", where, "DC volts", f"{logic[0]:.2f}–{logic[1]:.2f} V ({what})",
                    fixed(*logic), f"{build.host}'s supply, or a short on that rail"),
        ), host_connected=True,
            then=f"Then SW1 on: TP3 reads {_ratio_words(build)} again, now with the clamp "
                 f"powered, and nothing moves (the pull-downs; {build.host}'s pins are "
                 "inputs until the software drives them)."),
    )


PI_BUILD = Build("Pi", "the Pi", "J4", pinmap.divider_ratio(),
                 ("TP4 (U2 VDD)", "the Pi's 3V3", PI_3V3), "TP4 (3V3, U2 VDD)")
NANO_BUILD = Build("Nano", "the Nano", "A1's socket",
                   (pinmap.NANO_DIVIDER_TOP + pinmap.NANO_DIVIDER_BOTTOM)
                   / pinmap.NANO_DIVIDER_BOTTOM,
                   ("the Nano's 5V pin", "USB's 5 V less the Nano's diode", NANO_5V),
                   "the 5V pin of A1's socket (the 5V rail)")


def procedure_md(build: Build) -> str:
    """The numbered steps of ``build``'s first power-on (Markdown)."""
    out = []
    for n, step in enumerate(steps(build), 1):
        out.append(f"{n}. **{step.title}**")
        for r in step.readings:
            out.append(f"   - {r.mode[0].upper()}{r.mode[1:]}, {r.probes}: **{r.expect}**. Else: "
                       f"{r.outside}.")
        if step.then:
            out.append(f"   {step.then}")
    return "\n".join(out)
