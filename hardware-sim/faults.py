"""Fault injection for the simulator: ``--sim-fault SPEC``.

>>> plan = parse_fault_specs(["jam:13", "double:7", "battery:6.4", "dropout:9.9"])
>>> plan.jams, plan.doubles, plan.battery_volts, plan.dropout_s
({13: None}, {7}, 6.4, 0.0099)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from shuffler.errors import BadInputError
from shuffler.limits import TYPED_READING_MAX_VOLTS

SPEC_HELP = ("jam:CARD[:FREES_AFTER|:stuck], misfeed:CARD[:FREES_AFTER], double:CARD, "
             "battery:VOLTS, dropout:MS")
#: the longest beam drop-out ``dropout:MS`` puts inside a card, in milliseconds
MAX_DROPOUT_MS = 100.0


@dataclass
class FaultPlan:
    """Faults to inject. Card numbers are 1-based within a pass; each fires once.

    ``jams``/``misfeeds`` map the card to the number of retries after which the
    card frees itself (None: it never does, so the fault latches). ``dropout_s``: the
    beam clears for this long in the middle of every card (a hole, a bent corner, a
    dirty lens), every pass. ``stuck_clears``: ``jam:CARD:stuck``, a jam whose card the
    dealer misses in the throat, so that many clears fail (the machine still sees it);
    on a fresh simulator (``shuffler --sim-fault jam:5:stuck clear``) the card is in the
    throat from the start.
    """

    jams: dict[int, int | None] = field(default_factory=dict)
    misfeeds: dict[int, int | None] = field(default_factory=dict)
    doubles: set[int] = field(default_factory=set)
    battery_volts: float | None = None
    dropout_s: float | None = None
    stuck_clears: int = 0


def _card(spec: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:  # not '²' nor '١'
        raise BadInputError(
            f"--sim-fault {spec!r}: CARD must be a whole number from 1, got {text!r}"
        )
    return int(text)


def _millis(spec: str, text: str) -> float:
    try:
        ms = float(text)
    except ValueError:
        ms = -1.0
    if not 0 < ms <= MAX_DROPOUT_MS:  # nan and inf fail too
        raise BadInputError(f"--sim-fault {spec!r}: MS must be a number of milliseconds "
                            f"above 0 and at most {MAX_DROPOUT_MS:.0f}")
    return ms


def parse_fault_specs(specs: Iterable[str]) -> FaultPlan:
    plan = FaultPlan()
    for spec in specs:
        kind, _, rest = spec.partition(":")
        parts = rest.split(":") if rest else []
        if kind == "jam" and len(parts) == 2 and parts[1] == "stuck":
            plan.jams[_card(spec, parts[0])] = None  # it never frees, and a clear misses it
            plan.stuck_clears = 1
        elif kind in ("jam", "misfeed") and 1 <= len(parts) <= 2:
            frees = _card(spec, parts[1]) if len(parts) == 2 else None
            (plan.jams if kind == "jam" else plan.misfeeds)[_card(spec, parts[0])] = frees
        elif kind == "double" and len(parts) == 1:
            plan.doubles.add(_card(spec, parts[0]))
        elif kind == "battery" and len(parts) == 1:
            try:
                volts = float(parts[0])
            except ValueError:
                volts = -1.0
            if not 0 < volts <= TYPED_READING_MAX_VOLTS:  # past the driver's limit too
                raise BadInputError(f"--sim-fault {spec!r}: VOLTS must be a number above 0 "
                                    f"and at most {TYPED_READING_MAX_VOLTS:g}")
            plan.battery_volts = volts
        elif kind == "dropout" and len(parts) == 1:
            plan.dropout_s = _millis(spec, parts[0]) / 1000
        else:
            raise BadInputError(f"--sim-fault {spec!r}: expected one of {SPEC_HELP}")
    return plan
