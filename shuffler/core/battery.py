"""The 9 V battery: charge from voltage, charge used per pass, passes left. Pure.

A 9 V block sags under the motor's load, so a reading means little without
knowing whether the motor was running. Each chemistry has two curves against
the fraction of charge left: the voltage at rest and the voltage under the
motor's load (about 350 mA). Readings under load are the ones that count; rest
readings are labelled as such and read against the rest curve.

The block drives the mechanism only (the Pi takes 5 V from USB): the feed
motor, the motor driver, the diverter servo and the IR emitter (through a 5 V
buck), the battery divider. :data:`MECHANISM` lists what each draws during a
pass and between passes; the load curve is at that pass current, and the charge
a pass uses counts the wait before the next pass too (docs/hardware.md, "Power
budget", is made from these figures).

The curves follow the shape of the makers' published discharge curves for 9 V
blocks (digitised by eye, to about 0.1 V; capacity is the capacity delivered at
the pass current, not the light-load rating, which :data:`RATED` cites):

- alkaline: Energizer 522 datasheet, constant-current discharge at 500 mA and
  the open-circuit curve; Duracell MN1604 datasheet for the rest voltages;
- lithium: Energizer Ultimate Lithium L522 datasheet (Li/MnO2), 500 mA curve;
- NiMH: Energizer NH22-175 (7-cell, 8.4 V nominal) datasheet, 1C discharge.

    >>> curve = CURVES["alkaline"]
    >>> round(curve.charge_at(7.3, under_load=True), 2)
    0.5
    >>> estimate(9.5, False, [], cards=24, passes_per_hand=5).state
    'ok'
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from shuffler.core.planning import default_passes
from shuffler.core.record import Record
from shuffler.limits import ADC_FULL_SCALE_VOLTS

Points = tuple[tuple[float, float], ...]


def _interp(x: float, pts: Points) -> float:
    xs = [p[0] for p in pts]
    i = min(max(bisect_left(xs, x), 1), len(pts) - 1)
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    x = min(max(x, pts[0][0]), pts[-1][0])
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@dataclass(frozen=True)
class Draw:
    """One part's current, in mA on its own rail, during a pass and between passes."""

    part: str
    rail: str  # "9 V", "5 V mech" (the buck from 9 V), "5 V Pi" or "3V3 Pi"
    running_ma: float
    idle_ma: float
    why: str  # where the figure comes from

    def from_block_ma(self, running: bool) -> float:
        """What it takes from the 9 V block (0 for the Pi's rails)."""
        ma = self.running_ma if running else self.idle_ma
        if self.rail == "5 V mech":
            return ma * 5.0 / (BUCK_INPUT_VOLTS * BUCK_EFFICIENCY)
        return ma if self.rail == "9 V" else 0.0


BUCK_EFFICIENCY = 0.85  # a small synchronous buck at tens of mA (Pololu D24V5F5 class)
BUCK_INPUT_VOLTS = 8.0  # a block half used, under load
SECONDS_PER_CARD = 0.2  # the feed's five cards a second

#: everything on the 9 V side (and, for the budget, on the Pi's side)
MECHANISM = (
    Draw("feed motor (6 V gear motor) via DRV8833", "9 V", 350, 0,
         "typical running current of a small gear motor feeding a card: measure yours"),
    Draw("DRV8833 awake (nSLEEP high)", "9 V", 1.7, 1.7, "datasheet IVM, typical"),
    Draw("5 V buck, no load", "9 V", 0.1, 0.1, "maker's no-load input current"),
    Draw("battery divider 100 kΩ + 33 kΩ", "9 V", 0.07, 0.07, "9 V / 133 kΩ"),
    Draw("SG90 diverter servo", "5 V mech", 60, 6,
         "~150 mA while it swings, ~40% of a pass; between passes no pulses (detached), "
         "its board's own draw, kept at 6 mA until measured"),
    Draw("IR emitter, 940 nm, via 330 Ω", "5 V mech", 11, 11, "(5 − 1.3) V / 330 Ω"),
)
PI_SIDE = (
    Draw("Raspberry Pi 4 (Pi 5 similar; Zero 2 W ~120 mA)", "5 V Pi", 650, 600,
         "idle Lite OS, no HDMI; the service adds little"),
    Draw("active buzzer via 2N3904", "5 V Pi", 30, 0, "while sounding"),
    Draw("RGB LED (one colour at a time)", "3V3 Pi", 8, 8, "the GPIO pins' own current"),
    Draw("3 × TCRT5000 modules (tray, piles)", "3V3 Pi", 60, 60, "~20 mA each: emitter + LEDs"),
    Draw("TTP223 touch, beam receiver and its 10 kΩ, MCP3008", "3V3 Pi", 1, 1,
         "each well under 1 mA"),
)
#: from the 9 V block, in amps: during a pass, and switched on between passes
PASS_AMPS = sum(d.from_block_ma(True) for d in MECHANISM) / 1000
IDLE_AMPS = sum(d.from_block_ma(False) for d in MECHANISM) / 1000
#: a euchre evening: a hand about every five minutes, at the default passes a hand for a
#: 24-card pack (shuffler.core.planning.default_passes: five)
HAND_SECONDS = 300.0
EVENING_PASSES_PER_HAND = default_passes(24)
EVENING_SECONDS_PER_PASS = HAND_SECONDS / EVENING_PASSES_PER_HAND

#: light-load ratings from the makers' datasheets, for comparison with what the mechanism gets
RATED = {"alkaline": (610, "Energizer 522: 610 mAh at 25 mA to 4.8 V"),
         "lithium": (750, "Energizer L522: 750 mAh at 25 mA to 5.4 V"),
         "nimh": (175, "Energizer NH22-175: 175 mAh (7 cells, 8.4 V nominal)")}


@dataclass(frozen=True)
class DischargeCurve:
    """Volts at rest and under a pass's load, by fraction of charge left (0..1)."""

    name: str
    rest: Points
    load: Points
    capacity_mah: float  # delivered at the pass current
    pass_amps: float = PASS_AMPS
    idle_amps: float = IDLE_AMPS

    def volts(self, charge: float, under_load: bool) -> float:
        return _interp(charge, self.load if under_load else self.rest)

    def charge_at(self, volts: float, under_load: bool) -> float:
        """The fraction of charge left that gives ``volts`` (0..1, clamped)."""
        pts = self.load if under_load else self.rest
        return _interp(volts, tuple((v, c) for c, v in pts))


CURVES = {
    "alkaline": DischargeCurve(
        "alkaline",
        rest=((0.0, 6.0), (0.05, 6.8), (0.1, 7.3), (0.25, 7.9), (0.5, 8.4), (0.75, 8.8),
              (0.9, 9.1), (1.0, 9.5)),
        load=((0.0, 4.8), (0.05, 5.7), (0.1, 6.1), (0.25, 6.7), (0.5, 7.3), (0.75, 7.8),
              (0.9, 8.2), (1.0, 8.7)),
        capacity_mah=300),
    "lithium": DischargeCurve(
        "lithium",
        rest=((0.0, 6.0), (0.05, 7.8), (0.1, 8.6), (0.2, 9.0), (0.5, 9.2), (0.9, 9.4),
              (1.0, 9.8)),
        load=((0.0, 4.8), (0.05, 6.9), (0.1, 7.8), (0.2, 8.3), (0.5, 8.6), (0.9, 8.8),
              (1.0, 9.0)),
        capacity_mah=700),
    "nimh": DischargeCurve(
        "nimh",
        rest=((0.0, 6.3), (0.05, 7.5), (0.1, 8.0), (0.2, 8.4), (0.5, 8.7), (0.9, 9.0),
              (1.0, 9.8)),
        load=((0.0, 5.6), (0.05, 6.8), (0.1, 7.4), (0.2, 7.9), (0.5, 8.2), (0.9, 8.5),
              (1.0, 9.0)),
        capacity_mah=175),
}

#: under load, below this the motor may stall before the pass ends
DEFAULT_CUTOFF_LOAD_VOLTS = 5.8
#: at rest: below low a warning, at or below critical no pass starts (``[battery]``)
DEFAULT_LOW_VOLTS = 7.2
DEFAULT_CRITICAL_VOLTS = 6.6
#: volts at the monitor's input (the divider's tap at MCP3008 CH0) that no 9 V block gives
#: while it is connected: under MONITOR_FLOOR_VOLTS the block would be under 1.2 V (a flat
#: one still gives 4.8 V under load), over MONITOR_FULL_SCALE_VOLTS over 12.9 V (the 9 V
#: side takes 10.8 V at most, which the divider makes 2.68 V). ``selftest`` uses the same.
MONITOR_FLOOR_VOLTS = 0.3
MONITOR_FULL_SCALE_VOLTS = ADC_FULL_SCALE_VOLTS
WARM_UP = 3  # passes on a fresh battery the charge-per-card fit leaves out
#: the monitor's step at the block: an MCP3008's 10 bits of its 3.3 V reference through the
#: 100 kΩ + 33 kΩ divider, 13 mV (a reading is known to ± half of it however fine the ADC)
VOLTS_STEP = 3.3 / 1024 * (100 + 33) / 33
#: the budget's thriftiest pace (docs/hardware.md's "back to back" column): a pass every 15 s
BACK_TO_BACK_SECONDS = 15.0
NEW = 0.1  # this much more charge than the last pass left means a new battery


@dataclass(frozen=True)
class MonitorFault(Record):
    """The battery monitor gives no reading a 9 V block could give.

    ``no_reading``: at the floor (the mechanism switched off at SW1, F1 tripped, or the
    ADC or its wiring absent); ``full_scale``: stuck at the top (the divider wrong, or the
    ADC's output stuck high); both mean nothing is known of the battery, and no pass
    starts (``battery_monitor``, not ``low_battery``). ``unsteady``: some readings were
    such and were dropped, the rest give the figures; passes run. ``message`` says what to
    check and names ``[gpio] adc_channel`` for a build without a monitor."""

    problem: str  # "no_reading" | "full_scale" | "unsteady"
    message: str

    @property
    def blocks(self) -> bool:
        """Nothing is known of the battery: no pass starts."""
        return self.problem != "unsteady"


def monitor_problem(pin_volts: float, vref: float = 3.3) -> str | None:
    """What is wrong with one reading at the monitor's input (volts at the pin), if
    anything: ``no_reading`` at the floor, ``full_scale`` at the top (within the
    reference's last 3 %: an ADC saturates at its VREF)."""
    if pin_volts < MONITOR_FLOOR_VOLTS:
        return "no_reading"
    if pin_volts > min(MONITOR_FULL_SCALE_VOLTS, vref * MONITOR_FULL_SCALE_VOLTS / 3.3):
        return "full_scale"
    return None


def sort_readings(pin_volts: Sequence[float], vref: float = 3.3) -> tuple[list[float], str | None]:
    """The readings a block could give, and what was wrong with the others: the problem
    of them all when none is plausible (``full_scale`` only if every one is), else
    ``unsteady`` when some were dropped, else None.

        >>> sort_readings([2.3, 0.01, 2.31])
        ([2.3, 2.31], 'unsteady')
        >>> sort_readings([0.01, 0.0])
        ([], 'no_reading')
    """
    problems = [monitor_problem(v, vref) for v in pin_volts]
    good = [v for v, p in zip(pin_volts, problems, strict=True) if p is None]
    if good:
        return good, "unsteady" if len(good) < len(problems) else None
    return [], "full_scale" if problems and all(p == "full_scale" for p in problems) \
        else "no_reading"


def swapped(volts: float, under_load: bool, history: Sequence[PassRecord],
            curve: DischargeCurve) -> bool:
    """Whether a reading at rest comes from another block than the recorded passes:
    far more charge than the last pass left (a fresh one), or fewer volts at rest than
    the last pass gave under load, which the same block never does (it recovers at
    rest): a weaker one. Either way the estimate starts again from this reading."""
    if not history or under_load:
        return False
    last = history[-1].volts
    return (curve.charge_at(volts, False) > curve.charge_at(last, True) + NEW
            or volts < last)


def judge(charge: float, passes_left: int, curve: DischargeCurve, *,
          low_volts: float = DEFAULT_LOW_VOLTS,
          critical_volts: float = DEFAULT_CRITICAL_VOLTS) -> str:
    """The one battery rule, for ``battery``, ``status``, the page, the LED and the
    refusals alike: ``critical`` (no pass starts) when the charge is at or below what
    ``critical_volts`` at rest means or not one pass is left above the cut-off; ``low``
    below what ``low_volts`` at rest means; else ``ok``."""
    if passes_left < 1 or charge <= curve.charge_at(critical_volts, under_load=False):
        return "critical"
    return "low" if charge < curve.charge_at(low_volts, under_load=False) else "ok"


def refusal(est: Estimate, passes: int) -> str | None:
    """Why ``passes`` passes may not start on this estimate (None: they may), with what
    to do: the same rule as :func:`judge`, so ``battery`` saying ok or low means a pass
    runs."""
    if not est.measured:
        return None  # no monitor: the builder chose to watch the motor slow down instead
    if est.state == "critical":
        return "It is too low to finish a pass. Change the 9 V battery for a fresh one."
    if est.passes_left < passes:
        return (f"Not enough for {passes} passes. Change the 9 V battery for a fresh one, "
                "or run fewer passes (--passes).")
    return None


def charge_now(history: Sequence[PassRecord], curve: DischargeCurve, f: Fit,
               smoothing: int = 5) -> float:
    """The charge left after the last pass, smoothed: each of the last few readings is
    carried forward by the charge the passes since then used, and the results averaged
    (an ADC's noise averages out, and nothing lags behind the falling charge)."""
    recent = history[-smoothing:] if f.learned else history[-1:]
    projected, since = [], 0
    for rec in reversed(recent):
        projected.append(curve.charge_at(rec.volts + f.sag, under_load=True) - f.per_card * since)
        since += rec.cards
    return sum(projected) / len(projected)


@dataclass(frozen=True)
class PassRecord:
    """One pass as the battery saw it: cards dealt and the lowest volts under load."""

    cards: int
    volts: float


@dataclass(frozen=True)
class Estimate:
    volts: float
    under_load: bool
    percent: float
    passes_left: int
    passes_left_range: tuple[int, int]
    hands_left: int
    state: str
    learned: bool  # False: no history yet, the charge per card is the curve's default
    measured: bool = True  # False: no battery monitor; the figures above mean nothing
    swapped: bool = False  # True: another block than the recorded passes': they are dropped
    #: what the monitor itself got wrong (None: nothing); one that ``blocks`` leaves state
    #: ``monitor_fault`` and the figures above meaningless
    monitor: MonitorFault | None = None
    #: how far below the block ``volts`` may be (BatteryReading.reads_low_by): the
    #: over-voltage check's worst case; not in its figures (the reading is what it is)
    reads_low_by: float = 1.0

    def figures(self) -> Figures:
        """The estimate as a result shows it: rounded, and no figures where nothing is
        known (no monitor, or one that reads nothing a block could give)."""
        if not self.measured or self.state == "monitor_fault":
            return Figures(None, False, None, None, None, None, self.state, False,
                           self.measured, False, self.monitor)
        return Figures(round(self.volts, 3), self.under_load, round(self.percent, 1),
                       self.passes_left, self.passes_left_range, self.hands_left, self.state,
                       self.learned, True, self.swapped, self.monitor)


@dataclass(frozen=True)
class Figures(Record):
    """The battery as ``status`` shows it (``defs.json#/$defs/battery``)."""

    volts: float | None
    under_load: bool
    percent: float | None
    passes_left: int | None
    passes_left_range: tuple[int, int] | None
    hands_left: int | None
    state: str
    learned: bool
    measured: bool
    swapped: bool
    monitor: MonitorFault | None


#: a machine built without a battery monitor ([gpio] adc_channel = false)
NOT_MEASURED = Estimate(0.0, False, 0.0, 0, (0, 0), 0, "not_measured", False, False)


def monitor_failed(fault: MonitorFault) -> Estimate:
    """The estimate when the monitor gives nothing a block could give: no figures."""
    return Estimate(0.0, False, 0.0, 0, (0, 0), 0, "monitor_fault", False, monitor=fault)


@dataclass(frozen=True)
class Fit:
    """How the recorded passes line up with the curve."""

    per_card: float  # charge used per card
    se: float  # its standard error
    sag: float  # volts the readings sit below the load curve (the cell's polarisation)
    learned: bool


def _line(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least-squares slope, its standard error and the residual sum of squares."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    rss = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    return slope, math.sqrt(rss / max(n - 2, 1) / sxx), rss


def _within(curve: DischargeCurve, volts: float) -> bool:
    """Inside the load curve, where charge still moves with volts (beyond either end
    it is clamped, and a line through clamped points is flat whatever the block does)."""
    return curve.load[0][1] < volts < curve.load[-1][1]


def _step_error(curve: DischargeCurve, volts: Sequence[float], xs: Sequence[float]) -> float:
    """The slope's standard error from the readings' rounding alone: each reading is off
    by up to half a :data:`VOLTS_STEP` (uniform: σ = step/√12), which the curve turns into
    charge at its local slope. Readings in the same step give a flat line with no
    residual at all; this keeps such a fit from claiming a slope it never saw."""
    mx = sum(xs) / len(xs)
    sxx = sum((x - mx) ** 2 for x in xs)
    dv = VOLTS_STEP / 2
    per_volt = max((curve.charge_at(v + dv, True) - curve.charge_at(v - dv, True)) / VOLTS_STEP
                   for v in volts)
    return per_volt * VOLTS_STEP / math.sqrt(12) / math.sqrt(sxx)


def fit(history: Sequence[PassRecord], curve: DischargeCurve,
        seconds_per_card: float = SECONDS_PER_CARD, cards: int = 24) -> Fit:
    """Charge used per card, learned from the passes recorded on this battery.

    Charge is read off the load curve, so the charge per card is the slope of
    charge against cards dealt (the same for every load size). Readings sit a
    little below the curve while the cell is polarised; the fit tries offsets
    from 0 to 0.3 V and keeps the one that makes charge most nearly linear in
    cards. The first passes on a battery are left out: the polarisation is
    still building. Too little history: the power budget's charge for a pass of
    ``cards`` cards at a euchre evening's pace. An offset that lifts a reading past the
    curve's top is not tried (the charge there is clamped at full, and the line flat),
    and the slope's error is at least what the readings' rounding to the monitor's step
    gives (:func:`_step_error`): a slope is learned only when it stands out of both.
    """
    recs = history[WARM_UP:]
    if len(recs) >= 3:
        xs, total = [], 0
        for rec in recs:
            total += rec.cards
            xs.append(float(total))
        if xs[-1] > xs[0]:
            fits = []
            for step in range(31):
                sag = step * 0.01
                volts = [rec.volts + sag for rec in recs]
                if not all(_within(curve, v) for v in volts):
                    continue
                ys = [curve.charge_at(v, under_load=True) for v in volts]
                slope, se, rss = _line(xs, ys)
                se = max(se, _step_error(curve, volts, xs))
                if slope < 0 and 2 * se < -slope:
                    fits.append((rss, -slope, se, sag))
            if fits:
                # on a straight stretch of the curve every offset fits alike: take the
                # smallest of the near-best, which errs towards fewer passes left
                floor = min(f[0] for f in fits)
                _, per_card, se, sag = next(f for f in fits if f[0] <= floor * 1.05 + 1e-12)
                return Fit(per_card, se, sag, True)
    per_card = pass_charge(curve, cards, seconds_per_card) / cards
    return Fit(per_card, per_card * 0.5, 0.0, False)


def pass_charge(curve: DischargeCurve, cards: int, seconds_per_card: float = SECONDS_PER_CARD,
                seconds_per_pass: float = EVENING_SECONDS_PER_PASS) -> float:
    """The fraction of a full block one pass uses: running, then waiting for the next."""
    running = cards * seconds_per_card
    idle = max(seconds_per_pass - running, 0.0)
    return (curve.pass_amps * running + curve.idle_amps * idle) / (curve.capacity_mah * 3.6)


def passes_per_block(chemistry: str, cards: int = 24,
                     seconds_per_pass: float = EVENING_SECONDS_PER_PASS,
                     cutoff_load_volts: float = 5.8) -> int:
    """The power budget: passes from a fresh block down to the cut-off."""
    curve = CURVES[chemistry]
    usable = 1.0 - curve.charge_at(cutoff_load_volts, under_load=True)
    return int(usable / pass_charge(curve, cards, seconds_per_pass=seconds_per_pass))


def quoted_figures() -> dict[str, int]:
    """The figures the guide, the README and docs/hardware.md quote: 24-card passes (and
    hands of the default passes) per fresh block at a euchre evening's pace."""
    figures = {}
    for chem in CURVES:
        passes = passes_per_block(chem)
        figures[f"{chem}_passes"] = passes
        figures[f"{chem}_hands"] = passes // EVENING_PASSES_PER_HAND
    return figures


def budget_tables() -> str:
    """The power budget of docs/hardware.md (Markdown), from :data:`MECHANISM`."""
    rows = ["| part | rail | during a pass (mA) | between passes (mA) | from the 9 V block, "
            "pass / idle (mA) | figure |", "|---|---|---|---|---|---|"]
    for d in MECHANISM + PI_SIDE:
        block = (f"{d.from_block_ma(True):.2f} / {d.from_block_ma(False):.2f}"
                 if d in MECHANISM else "— (Pi's supply)")
        rows.append(f"| {d.part} | {d.rail} | {d.running_ma:g} | {d.idle_ma:g} | {block} | "
                    f"{d.why} |")
    run = 24 * SECONDS_PER_CARD
    rows += ["", f"From the 9 V block: **{PASS_AMPS * 1000:.0f} mA** during a pass, "
             f"**{IDLE_AMPS * 1000:.1f} mA** switched on between passes. A 24-card pass runs "
             f"{run:.1f} s: {PASS_AMPS * run:.2f} C ({PASS_AMPS * run / 3.6:.2f} mAh); at a "
             f"euchre evening's pace (a hand of {EVENING_PASSES_PER_HAND} passes every "
             f"{HAND_SECONDS / 60:.0f} minutes: a pass every {EVENING_SECONDS_PER_PASS:.0f} s) "
             "the wait "
             f"adds {IDLE_AMPS * (EVENING_SECONDS_PER_PASS - run):.2f} C.", "",
             "| block | rated (light load) | delivered at the pass current | "
             "24-card passes, back to back (every 15 s) | 24-card passes, euchre evening |",
             "|---|---|---|---|---|"]
    for chem, curve in CURVES.items():
        mah, cite = RATED[chem]
        rows.append(f"| {chem} | {mah} mAh ({cite}) | {curve.capacity_mah:g} mAh | "
                    f"{passes_per_block(chem, seconds_per_pass=15)} | "
                    f"{passes_per_block(chem)} |")
    return "\n".join(rows)


def ceiling(usable: float, recorded: int, curve: DischargeCurve, cards: int) -> int:
    """The most passes left an estimate may give: the power budget's figure for the charge
    left (at a euchre evening's pace), plus, for each pass recorded on this block, the
    share of a pass the budget's back-to-back pace uses (0.76 for 24 cards).

    A block that uses at least the back-to-back charge a pass then never reads above the
    figure the budget gave it fresh (each pass costs the ceiling more than it adds), and
    one that is thriftier gains less than a pass a pass: from one hand to the next the
    ceiling never climbs by a hand. What the passes teach lowers the estimate at once and
    lifts it only as fast as that; a fit through a few readings in 13 mV steps can never
    claim thousands.
    """
    evening = pass_charge(curve, cards)
    thrifty = pass_charge(curve, cards, seconds_per_pass=BACK_TO_BACK_SECONDS)
    return int(usable / evening + recorded * thrifty / evening)


def estimate(volts: float, under_load: bool, history: Sequence[PassRecord], *,
             cards: int, passes_per_hand: int, chemistry: str = "alkaline",
             cutoff_load_volts: float = DEFAULT_CUTOFF_LOAD_VOLTS,
             low_volts: float = DEFAULT_LOW_VOLTS,
             critical_volts: float = DEFAULT_CRITICAL_VOLTS) -> Estimate:
    """Charge, passes and hands left for loads of ``cards`` cards.

    The charge now comes from the last pass's reading under load when there is
    one (a rest reading moves as the cell recovers), else from the reading
    given; the passes left are the charge above the cut-off (where the volts
    under load fall below ``cutoff_load_volts``) over the charge a pass uses.
    """
    curve = CURVES[chemistry]
    charge = curve.charge_at(volts, under_load)
    new_block = swapped(volts, under_load, history, curve)
    if new_block:
        history = []
    f = fit(history, curve, cards=cards)
    if history:
        # the last passes' readings, not a rest reading: the cell is still recovering
        charge = charge_now(history, curve, f)
    cutoff = curve.charge_at(cutoff_load_volts + f.sag, under_load=True)
    usable = max(0.0, charge - cutoff)

    most = ceiling(usable, len(history), curve, cards)

    def passes(rate: float) -> int:
        return min(int(usable / (rate * cards)), most) if rate > 0 else most

    best = passes(f.per_card)
    low, high = passes(f.per_card + 2 * f.se), passes(max(f.per_card - 2 * f.se, f.per_card / 4))
    state = judge(charge, best, curve, low_volts=low_volts, critical_volts=critical_volts)
    return Estimate(volts, under_load, 100 * charge, best, (low, high),
                    best // max(passes_per_hand, 1), state, f.learned, swapped=new_block)
