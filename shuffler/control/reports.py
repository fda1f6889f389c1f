"""Results as frozen records (:class:`~shuffler.core.record.Record`): what ``--json``
prints and the service sends, each field a key of its schema (shuffler/schemas), in its
order; JSON is made from them only at the edges. Never a plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from shuffler.constants import EXIT_BATTERY, EXIT_FAULT, EXIT_OK
from shuffler.core.battery import Figures
from shuffler.core.planning import Mode
from shuffler.core.record import OMIT_NONE, SPREAD, Record
from shuffler.device.contract import DeviceInfo, Fault, FaultKind, Health

if TYPE_CHECKING:
    from fractions import Fraction

    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.core.mechanics import Pile, Stacked
    from shuffler.device.contract import PassReport
    from shuffler.store.state import State


#: faults after which the hand goes on (the pass finished, only degraded)
CONTINUABLE = frozenset({FaultKind.COUNT_MISMATCH})


def stops(fault: Fault | None) -> bool:
    """Whether ``fault`` stops the hand (a pass cut off, never restacked)."""
    return fault is not None and fault.kind not in CONTINUABLE


def turn(state: State, config: Config) -> tuple[int, str, str, str | None]:
    """Whose deal it is (the stored seat, or the configured first dealer), as an index and
    a name, who deals next, and with two decks in turn the one shuffled: "A" or "B"."""
    seats = config.table.seats
    dealer = (seats.index(config.table.first_dealer) if state.dealer is None
              else state.dealer % len(seats))
    return (dealer, seats[dealer], seats[(dealer + 1) % len(seats)],
            "AB"[state.deck % 2] if config.table.decks == 2 else None)


def exit_code(fault: Fault | None) -> int:
    """0 for no fault, 4 for low battery, 3 for any other fault."""
    if fault is None:
        return EXIT_OK
    return EXIT_BATTERY if fault.kind is FaultKind.LOW_BATTERY else EXIT_FAULT


@dataclass(frozen=True)
class PassResult(Record):
    """A pass's report (``defs.json#/$defs/pass_report``)."""

    number: int
    counted: int
    expected: int
    piles: tuple[int, int]
    seconds: float
    fault: Fault | None
    min_volts: float | None
    retries: int
    stacking: str | None  # "left" or "right": the pile the sensors saw go on top
    stacked: str | None  # how that came about (core.mechanics.Stacked)

    @classmethod
    def of(cls, report: PassReport, number: int = 1, stacking: Pile | None = None,
           stacked: Stacked | None = None) -> PassResult:
        return cls(number, report.counted, report.expected, (report.piles[0], report.piles[1]),
                   round(report.seconds, 3), report.fault,
                   None if report.min_volts is None else round(report.min_volts, 3),
                   report.retries, stacking.name.lower() if stacking is not None else None,
                   stacked.value if stacked is not None else None)


@dataclass(frozen=True)
class PassAnswer(Record):
    """``shuffler pass`` (shuffler/schemas/pass.json)."""

    device: DeviceInfo
    pass_: PassResult
    exit: int


def pass_log(p: dict[str, Any]) -> dict[str, Any]:
    """A pass's log line (``-v``), from its report's JSON (:class:`PassResult`): the
    volts as the text rounds them, the retries said; the same in-process or through the
    service (the CLI logs the service's pass events so)."""
    fault = p["fault"]
    return {"expected": p["expected"], "counted": p["counted"], "piles": list(p["piles"]),
            "seconds": p["seconds"], "fault": fault["kind"] if fault else None,
            "retries": p["retries"],
            "min_volts": None if p["min_volts"] is None else round(p["min_volts"], 2)}


def _passes(numbers: list[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def distance_note(reports: Sequence[PassResult], departures: Sequence[int],
                  distance: Fraction | None, resumed_at: int | None,
                  plan_lost: bool) -> str | None:
    """Why the hand's distance is a bound, in the dealer's words (None: it is what was
    planned).

    The bound after a departure from the light covers a dealer who chose the pile by
    looking at the cards (docs/mixing.md): the figure is what can be promised, not what
    a careless dealer usually costs."""
    said = [*_stacking_reasons(reports, departures),
            *_fault_reasons(reports, resumed_at, plan_lost)]
    if not said:
        return None
    if distance is None:
        return "; ".join(said) + ": how random this hand is cannot be said"
    if distance == 0:  # a departure the plan still covers: no bound to state
        return "; ".join(said) + ": this hand is still exactly random"
    return "; ".join(said) + f": this hand is random to within {_limit_words(distance)}"


def _stacking_reasons(reports: Sequence[PassResult], departures: Sequence[int]) -> list[str]:
    """What the dealer's stacking did to the hand: departures, seen and unseen."""
    seen = {r.number: r.stacking for r in reports}
    unseen = [n for n in departures if seen.get(n, "") is None]
    other = [n for n in departures if n not in unseen]
    said = []
    if other:
        said.append(f"you put the other pile on top after pass {_passes(other)}")
    if unseen:
        said.append(f"the pile sensors could not tell which pile went on top after pass "
                    f"{_passes(unseen)}")
    return said


def _fault_reasons(reports: Sequence[PassResult], resumed_at: int | None,
                   plan_lost: bool) -> list[str]:
    """What the machine did to the hand: a resume, a wrong count, a pass that stopped."""
    stopped = [r for r in reports if stops(r.fault)]
    miscounted = [r.number for r in reports
                  if not stops(r.fault) and r.counted != r.expected]
    said = []
    if plan_lost:
        said.append(f"the hand resumed at pass {resumed_at} on a new plan (a pass "
                    "was cut off, or the process that held the plan ended), from an order "
                    "nobody tracked")
    if miscounted:
        said.append(f"the count came out wrong in pass {_passes(miscounted)}, so the "
                    "controller lost track of the cards")
    for r in stopped:
        kind = r.fault.kind.value.replace("_", " ")  # type: ignore[union-attr]
        said.append(f"pass {r.number} stopped ({kind})")
    return said


def _limit_words(distance: Fraction) -> str:
    """The bound as the note prints it: four digits, never a rounded-up 1."""
    x = f"{float(distance):.4g}"
    return ">0.9999" if distance < 1 and float(x) >= 1 else x


@dataclass(frozen=True)
class HandResult(Record):
    """A hand's summary (shuffler/schemas/hand.json's ``hand``), as
    :class:`~shuffler.control.hand.HandRunner` returns it."""

    number: int
    dealer: str
    next_dealer: str
    mode: Mode
    passes: int
    passes_done: int
    completed: bool
    tracking: bool
    distance: Fraction | None
    distance_exact: bool
    resumed_at: int | None
    departures: tuple[int, ...]
    paused: bool
    distance_note: str | None
    deck: str | None
    fault: Fault | None
    pass_reports: tuple[PassResult, ...]


@dataclass(frozen=True)
class HandAnswer(Record):
    """``shuffler hand`` (shuffler/schemas/hand.json)."""

    device: DeviceInfo
    hand: HandResult
    exit: int


@dataclass(frozen=True)
class LastHand(Record):
    """What the state keeps of the last hand, for ``status`` and the page (status.json's
    ``last_hand``)."""

    number: int
    dealer: str | None = field(metadata=OMIT_NONE)  # None: kept by an older release
    passes_done: int
    passes: int
    completed: bool
    tracking: bool
    distance: float | None
    distance_note: str | None
    distance_exact: bool | None
    fault: Fault | None

    @classmethod
    def of(cls, hand: HandResult) -> LastHand:
        return cls(hand.number, hand.dealer, hand.passes_done, hand.passes, hand.completed,
                   hand.tracking, None if hand.distance is None else float(hand.distance),
                   hand.distance_note, hand.distance_exact, hand.fault)

    @classmethod
    def kept(cls, last: Mapping[str, Any] | None) -> LastHand | None:
        """The state file's last hand (store.state.LAST_HAND), also as an older file kept
        it: no dealer or note, its fault the kind alone."""
        if last is None:
            return None
        fault = last.get("fault")
        if isinstance(fault, str):
            fault = {"kind": fault, "message": f"the last hand stopped: {fault}", "card": None}
        return cls(last["number"], last.get("dealer"), last["passes_done"], last["passes"],
                   last["completed"], last["tracking"], last.get("distance"),
                   last.get("distance_note"), last.get("distance_exact"),
                   None if fault is None else Fault.from_dict(fault))


@dataclass(frozen=True)
class HandInProgress(Record):
    """The hand left unfinished, with the names ``hand`` and ``last_hand`` use
    (``passes_done``; the state file keeps ``done``)."""

    number: int
    passes: int
    passes_done: int
    cards: int
    mode: str


@dataclass(frozen=True)
class Counters(Record):
    hands: int
    passes: int
    cards: int
    jams: int
    faults: int
    interrupted: int


@dataclass(frozen=True)
class HealthReport(Record):
    """The device's own health as ``status`` shows it: a backend's detail keys spread
    before ``device_fault``, what the machine itself reports now."""

    ok: bool
    motor_on: bool
    tray_loaded: bool
    detail: Mapping[str, Any] = field(metadata=SPREAD)
    device_fault: Fault | None

    @classmethod
    def of(cls, health: Health, latched: Fault | None) -> HealthReport:
        return cls(health.ok and latched is None, health.motor_on, health.tray_loaded,
                   MappingProxyType(dict(health.detail)), health.fault)


@dataclass(frozen=True)
class StatusReport(Record):
    """``shuffler status`` (shuffler/schemas/status.json; :class:`ServiceStatus` adds the
    service's ``notice``)."""

    device: DeviceInfo
    health: HealthReport
    #: the latched fault (what blocks the next pass); what the machine itself reports
    #: now is the health's ``device_fault``
    fault: Fault | None
    battery: Figures
    counters: Counters
    hand_in_progress: HandInProgress | None
    last_hand: LastHand | None
    dealer: str
    next_dealer: str
    deck: str | None

    @classmethod
    def of(cls, controller: PassController, config: Config) -> StatusReport:
        device = controller.device
        state = controller.store.load()
        fault = controller.latched_fault()
        p = state.hand  # the state file keeps ``done``
        return cls(device.info, HealthReport.of(device.health(), fault), fault,
                   controller.battery_estimate(config.hand.cards).figures(),
                   Counters(state.hands_completed, state.passes, state.cards, state.jams,
                            state.faults, state.interrupted),
                   None if p is None else HandInProgress(p["number"], p["passes"], p["done"],
                                                         p["cards"], p["mode"]),
                   LastHand.kept(state.last_hand), *turn(state, config)[1:])


@dataclass(frozen=True)
class ServiceStatus(StatusReport):
    """The status as the service answers it: why the dealer's last touch started
    nothing (None: a pass or hand has run since)."""

    notice: str | None = None


@dataclass(frozen=True)
class BatteryReport(Figures):
    """``shuffler battery`` (shuffler/schemas/battery.json): the figures for a load."""

    chemistry: str
    cards: int
    passes_per_hand: int

    @classmethod
    def of(cls, controller: PassController, config: Config, cards: int) -> BatteryReport:
        figures = controller.battery_estimate(cards).figures()
        return cls(**vars(figures), chemistry=config.battery.chemistry, cards=cards,
                   passes_per_hand=config.hand.passes_for(cards))


@dataclass(frozen=True)
class Cleared(Record):
    """``shuffler clear`` (shuffler/schemas/clear.json)."""

    cleared: bool
    cleared_fault: Fault | None
    still: Fault | None = field(metadata=OMIT_NONE)  # the fault the machine still sees
    exit: int


@dataclass(frozen=True)
class Stopped(Record):
    """``shuffler stop`` (shuffler/schemas/stop.json)."""

    stopped: bool
