"""Results as plain dicts: what ``--json`` prints and the service sends. Never a plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fractions import Fraction

    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.hand import HandReport, PassRecord
    from shuffler.device.contract import PassReport

from shuffler.constants import EXIT_BATTERY, EXIT_FAULT, EXIT_OK


def exit_code(fault: dict[str, Any] | None) -> int:
    """0 for no fault, 4 for low battery, 3 for any other fault."""
    if fault is None:
        return EXIT_OK
    return EXIT_BATTERY if fault["kind"] == "low_battery" else EXIT_FAULT


def pass_dict(report: PassReport, number: int = 1, stacking=None,
              stacked=None) -> dict[str, Any]:
    return {
        "number": number,
        "counted": report.counted,
        "expected": report.expected,
        "piles": list(report.piles),
        "seconds": round(report.seconds, 3),
        "fault": report.fault.to_dict() if report.fault else None,
        "min_volts": None if report.min_volts is None else round(report.min_volts, 3),
        "retries": report.retries,
        "stacking": stacking.name.lower() if stacking is not None else None,
        "stacked": stacked.value if stacked is not None else None,
    }


def pass_log(p: dict[str, Any]) -> dict[str, Any]:
    """A pass's log line (``-v``), from its report as :func:`pass_dict` makes it: the
    volts as the text rounds them, the retries said; the same in-process or through the
    service (the CLI logs the service's pass events so)."""
    fault = p["fault"]
    return {"expected": p["expected"], "counted": p["counted"], "piles": list(p["piles"]),
            "seconds": p["seconds"], "fault": fault["kind"] if fault else None,
            "retries": p["retries"],
            "min_volts": None if p["min_volts"] is None else round(p["min_volts"], 2)}


def record_dict(record: PassRecord) -> dict[str, Any]:
    return pass_dict(record.report, record.number, record.stacking, record.stacked)


def passes_done(hand: HandReport) -> int:
    """Passes of the hand that ran to the end (a degraded pass did; a jammed one did
    not), counting those before a resume: the one count the summary, ``status`` and
    the page all show."""
    from shuffler.control.hand import CONTINUABLE

    before = (hand.resumed_at or 1) - 1
    return before + sum(1 for r in hand.records
                        if r.report.fault is None or r.report.fault.kind in CONTINUABLE)


def last_hand(hand: dict[str, Any]) -> dict[str, Any]:
    """What the state keeps of the last hand, for ``status`` and the page."""
    return {k: hand[k] for k in ("number", "dealer", "passes_done", "passes",
                                 "completed", "tracking", "distance")} | {
        "distance_note": hand.get("distance_note"),
        "distance_exact": hand.get("distance_exact"),
        "fault": hand["fault"]}


def whole_fault(last: dict[str, Any] | None) -> dict[str, Any] | None:
    """``last_hand`` with its fault a fault object, also as an older state file kept it
    (the kind alone)."""
    if last is None or not isinstance(last.get("fault"), str):
        return last
    kind = last["fault"]
    return {**last, "fault": {"kind": kind, "message": f"the last hand stopped: {kind}",
                              "card": None}}


def hand_in_progress(pending: dict[str, Any] | None) -> dict[str, Any] | None:
    """The hand left unfinished, with the names ``hand`` and ``last_hand`` use
    (``passes_done``; the state file keeps ``done``)."""
    if pending is None:
        return None
    return {"number": pending["number"], "passes": pending["passes"],
            "passes_done": pending["done"], "cards": pending["cards"], "mode": pending["mode"]}


def _passes(numbers: list[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def distance_note(hand: HandReport) -> str | None:
    """Why the distance is a bound, in the dealer's words (None: it is what was planned).

    The bound after a departure from the light covers a dealer who chose the pile by
    looking at the cards (docs/mixing.md): the figure is what can be promised, not what
    a careless dealer usually costs."""
    said = [*_stacking_reasons(hand), *_fault_reasons(hand)]
    if not said:
        return None
    if hand.distance is None:
        return "; ".join(said) + ": how random this hand is cannot be said"
    if hand.distance == 0:  # a departure the plan still covers: no bound to state
        return "; ".join(said) + ": this hand is still exactly random"
    return "; ".join(said) + f": this hand is random to within {_limit_words(hand.distance)}"


def _stacking_reasons(hand: HandReport) -> list[str]:
    """What the dealer's stacking did to the hand: departures, seen and unseen."""
    seen = {r.number: r.stacking for r in hand.records}
    unseen = [n for n in hand.departures if seen.get(n, 0) is None]
    other = [n for n in hand.departures if n not in unseen]
    said = []
    if other:
        said.append(f"you put the other pile on top after pass {_passes(other)}")
    if unseen:
        said.append(f"the pile sensors could not tell which pile went on top after pass "
                    f"{_passes(unseen)}")
    return said


def _fault_reasons(hand: HandReport) -> list[str]:
    """What the machine did to the hand: a resume, a wrong count, a pass that stopped."""
    from shuffler.control.hand import CONTINUABLE

    stopped = [r for r in hand.records
               if r.report.fault is not None and r.report.fault.kind not in CONTINUABLE]
    miscounted = [r.number for r in hand.records
                  if r not in stopped and r.report.counted != r.report.expected]
    said = []
    if hand.plan_lost:
        said.append(f"the hand resumed at pass {hand.resumed_at} on a new plan (a pass "
                    "was cut off, or the process that held the plan ended), from an order "
                    "nobody tracked")
    if miscounted:
        said.append(f"the count came out wrong in pass {_passes(miscounted)}, so the "
                    "controller lost track of the cards")
    for r in stopped:
        kind = r.report.fault.kind.value.replace("_", " ")  # type: ignore[union-attr]
        said.append(f"pass {r.number} stopped ({kind})")
    return said


def _limit_words(distance: Fraction) -> str:
    """The bound as the note prints it: four digits, never a rounded-up 1."""
    x = f"{float(distance):.4g}"
    return ">0.9999" if distance < 1 and float(x) >= 1 else x


def hand_dict(hand: HandReport) -> dict[str, Any]:
    fault = hand.fault
    return {
        "number": hand.number,
        "dealer": hand.dealer,
        "next_dealer": hand.next_dealer,
        "mode": hand.mode.value,
        "passes": hand.passes_planned,
        "passes_done": passes_done(hand),
        "completed": hand.completed,
        "tracking": hand.tracking,
        "distance": None if hand.distance is None else float(hand.distance),
        "distance_exact": hand.distance_exact,
        "resumed_at": hand.resumed_at,
        "departures": list(hand.departures),
        "paused": hand.paused,
        "distance_note": distance_note(hand),
        "deck": hand.deck,
        "fault": fault.to_dict() if fault else None,
        "pass_reports": [record_dict(r) for r in hand.records],
    }


def _health_dict(health: Any) -> dict[str, Any]:
    d = health.to_dict()
    d["device_fault"] = d.pop("fault", None)
    return d


def status_dict(controller: PassController, config: Config) -> dict[str, Any]:
    from shuffler.control.hand import dealer_index

    device = controller.device
    state = controller.store.load()
    fault = controller.latched_fault()
    health = device.health()
    seats = config.table.seats
    dealer = dealer_index(state, config)
    return {
        "device": device.info.to_dict(),
        # "fault" is the latched fault (what blocks the next pass); what the machine
        # itself reports now is the health's "device_fault"
        "health": _health_dict(health) | {"ok": health.ok and fault is None},
        "fault": fault.to_dict() if fault else None,
        "battery": controller.battery_estimate(config.hand.cards).to_dict(),
        "counters": {"hands": state.hands_completed, "passes": state.passes,
                     "cards": state.cards, "jams": state.jams, "faults": state.faults,
                     "interrupted": state.interrupted},
        "hand_in_progress": hand_in_progress(state.hand),
        "last_hand": whole_fault(state.last_hand),
        "dealer": seats[dealer],
        "next_dealer": seats[(dealer + 1) % len(seats)],
        "deck": "AB"[state.deck % 2] if config.table.decks == 2 else None,
    }


def battery_dict(controller: PassController, config: Config, cards: int) -> dict[str, Any]:
    est = controller.battery_estimate(cards)
    return est.to_dict() | {"chemistry": config.battery.chemistry, "cards": cards,
                            "passes_per_hand": config.hand.passes_for(cards)}
