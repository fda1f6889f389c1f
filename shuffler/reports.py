"""Results as plain dicts: what ``--json`` prints and the service sends. Never a plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import Config
    from .controller import PassController
    from .device import PassReport
    from .hand import HandReport, PassRecord

EXIT_OK, EXIT_BUG, EXIT_USAGE, EXIT_FAULT, EXIT_BATTERY = 0, 1, 2, 3, 4


def exit_code(fault: dict[str, Any] | None) -> int:
    """0 for no fault, 4 for low battery, 3 for any other fault."""
    if fault is None:
        return EXIT_OK
    return EXIT_BATTERY if fault["kind"] == "low_battery" else EXIT_FAULT


def pass_dict(report: PassReport, number: int = 1, stacking=None) -> dict[str, Any]:
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
    }


def record_dict(record: PassRecord) -> dict[str, Any]:
    return pass_dict(record.report, record.number, record.stacking)


def passes_done(hand: HandReport) -> int:
    """Passes of the hand that ran to the end (a degraded pass did; a jammed one did
    not), counting those before a resume: the one count the summary, ``status`` and
    the page all show."""
    from .hand import CONTINUABLE

    before = (hand.resumed_at or 1) - 1
    return before + sum(1 for r in hand.records
                        if r.report.fault is None or r.report.fault.kind in CONTINUABLE)


def last_hand(hand: dict[str, Any]) -> dict[str, Any]:
    """What the state keeps of the last hand, for ``status`` and the page."""
    return {k: hand[k] for k in ("number", "dealer", "passes_done", "passes",
                                 "completed", "tracking", "distance")} | {
        "fault": hand["fault"]["kind"] if hand["fault"] else None}


def hand_in_progress(pending: dict[str, Any] | None) -> dict[str, Any] | None:
    """The hand left unfinished, with the names ``hand`` and ``last_hand`` use
    (``passes_done``; the state file keeps ``done``)."""
    if pending is None:
        return None
    return {"number": pending["number"], "passes": pending["passes"],
            "passes_done": pending["done"], "cards": pending["cards"], "mode": pending["mode"]}


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
        "deck": hand.deck,
        "fault": fault.to_dict() if fault else None,
        "pass_reports": [record_dict(r) for r in hand.records],
    }


def _health_dict(health: Any) -> dict[str, Any]:
    d = health.to_dict()
    d["device_fault"] = d.pop("fault", None)
    return d


def status_dict(controller: PassController, config: Config) -> dict[str, Any]:
    from .hand import dealer_index

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
        "last_hand": state.last_hand,
        "dealer": seats[dealer],
        "next_dealer": seats[(dealer + 1) % len(seats)],
        "deck": "AB"[state.deck % 2] if config.table.decks == 2 else None,
    }


def battery_dict(controller: PassController, config: Config, cards: int) -> dict[str, Any]:
    est = controller.battery_estimate(cards)
    return est.to_dict() | {"chemistry": config.battery.chemistry, "cards": cards,
                            "passes_per_hand": config.hand.passes_for(cards)}
