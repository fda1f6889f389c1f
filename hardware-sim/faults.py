"""Fault injection for the simulator: ``--sim-fault SPEC``.

>>> plan = parse_fault_specs(["jam:13", "double:7", "battery:6.4"])
>>> plan.jams, plan.doubles, plan.battery_volts
({13: None}, {7}, 6.4)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from shuffler.errors import BadInputError

SPEC_HELP = "jam:CARD[:FREES_AFTER], misfeed:CARD[:FREES_AFTER], double:CARD, battery:VOLTS"


@dataclass
class FaultPlan:
    """Faults to inject. Card numbers are 1-based within a pass; each fires once.

    ``jams``/``misfeeds`` map the card to the number of retries after which the
    card frees itself (None: it never does, so the fault latches).
    """

    jams: dict[int, int | None] = field(default_factory=dict)
    misfeeds: dict[int, int | None] = field(default_factory=dict)
    doubles: set[int] = field(default_factory=set)
    battery_volts: float | None = None


def _card(spec: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:  # not '²' nor '١'
        raise BadInputError(
            f"--sim-fault {spec!r}: CARD must be a whole number from 1, got {text!r}"
        )
    return int(text)


def parse_fault_specs(specs: Iterable[str]) -> FaultPlan:
    plan = FaultPlan()
    for spec in specs:
        kind, _, rest = spec.partition(":")
        parts = rest.split(":") if rest else []
        if kind in ("jam", "misfeed") and 1 <= len(parts) <= 2:
            frees = _card(spec, parts[1]) if len(parts) == 2 else None
            (plan.jams if kind == "jam" else plan.misfeeds)[_card(spec, parts[0])] = frees
        elif kind == "double" and len(parts) == 1:
            plan.doubles.add(_card(spec, parts[0]))
        elif kind == "battery" and len(parts) == 1:
            try:
                volts = float(parts[0])
            except ValueError:
                volts = -1.0
            if not 0 < volts <= 10:
                raise BadInputError(
                    f"--sim-fault {spec!r}: VOLTS must be a number above 0 and at most 10"
                )
            plan.battery_volts = volts
        else:
            raise BadInputError(f"--sim-fault {spec!r}: expected one of {SPEC_HELP}")
    return plan
