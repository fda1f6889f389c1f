"""A hand's label, and the watch that keeps it honest across a seat's hands.

A hand is labelled **exact** when the law of the hands carrying that label is the
plan's: every stacking matched the light (followed, or corrected after the warning),
and the seat shows no pattern of departures that look at the cards. Otherwise it is
labelled **bound** with a distance that holds whatever rule the dealer stacked by,
or its distance is unknown.

Why the watch: a dealer who ignores the light by a rule that looks at the cards (the
pile the last card fell on, the taller pile) matches the light on some hands by
chance, and *which* hands is decided by the cards: those hands are a biased subset,
however exact each stacking looked (24 cards, 5 passes, a last-card dealer: 8.5% of
the hands match the light, and in them the bottom card is 0.18 from uniform). So the
watch checks, pass by pass, whether the seat's departures follow one of
:data:`RULES`; once one has done so :data:`SEEN_AFTER` times in a row (no pass
between on which the rule said "depart" and the dealer followed the light), the
seat's later hands are reported with the bound, until the dealer has followed the
light :data:`CLEARED_AFTER` times where the rule said otherwise. A dealer who keeps
the rule never clears it, so once the pattern is seen no hand of theirs is labelled
exact (docs/mixing.md, "Labels that mean what they say", argues the figures).

    >>> watch = Watch()
    >>> for _ in range(3):  # three departures onto the pile the last card fell on
    ...     watch.see(Pile.LEFT, Pile.RIGHT, labels=(0, 0, 1))
    >>> watch.pattern
    'last-card'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shuffler.core.mechanics import Pile

if TYPE_CHECKING:
    from fractions import Fraction

#: departures in a row that follow one rule before the seat's hands lose the exact label
SEEN_AFTER = 3
#: passes on which the rule said "depart" and the dealer followed the light, in a row,
#: before the seat's hands may be labelled exact again
CLEARED_AFTER = 6


def _taller(sizes: tuple[int, int]) -> Pile | None:
    if sizes[0] == sizes[1]:
        return None
    return Pile.LEFT if sizes[0] > sizes[1] else Pile.RIGHT


def _other(pile: Pile | None) -> Pile | None:
    return None if pile is None else pile.other


def _first(labels: Sequence[int]) -> Pile | None:
    return Pile.of(labels[0]) if labels else None


def _last(labels: Sequence[int]) -> Pile | None:
    return Pile.of(labels[-1]) if labels else None


def _sizes(labels: Sequence[int]) -> tuple[int, int]:
    right = sum(labels)
    return len(labels) - right, right


#: the card-dependent rules the watch knows: name -> the pile the rule puts on top,
#: from the pass's labels in feed order (None: the rule says nothing here)
RULES: dict[str, Callable[[Sequence[int]], Pile | None]] = {
    "last-card": _last,
    "first-card": _first,
    "taller": lambda labels: _taller(_sizes(labels)),
    "not-last-card": lambda labels: _other(_last(labels)),
    "not-first-card": lambda labels: _other(_first(labels)),
    "shorter": lambda labels: _other(_taller(_sizes(labels))),
}


@dataclass
class _Trail:
    """One rule's evidence: departures onto its pile in a row (``run``), and, once
    seen, the passes in a row the dealer followed the light against it (``against``)."""

    run: int = 0
    seen: bool = False
    against: int = 0


@dataclass
class Watch:
    """One seat's (or one evening's) departures, held against :data:`RULES`.

    :meth:`see` takes each pass with a known stacking: the pile the light showed, the
    pile the sensors saw on top in the end (after any correction), and the plan's
    labels, which it reads and does not keep. Only counters are kept (:meth:`to_dict`),
    never a plan."""

    trails: dict[str, _Trail] = field(default_factory=lambda: {r: _Trail() for r in RULES})

    def see(self, light: Pile, stacking: Pile | None, labels: Sequence[int]) -> None:
        if stacking is None:
            return  # the sensors could not tell: no evidence either way
        for name, rule in RULES.items():
            said = rule(labels)
            if said is None or said is light:
                continue  # the rule and the light agree here: nothing to tell them apart
            t = self.trails[name]
            if stacking is said:  # departed, onto the rule's pile
                t.run, t.against = t.run + 1, 0
                t.seen = t.seen or t.run >= SEEN_AFTER
            else:  # followed the light where the rule said depart
                t.run = 0
                if t.seen:
                    t.against += 1
                    if t.against >= CLEARED_AFTER:
                        t.seen, t.against = False, 0

    @property
    def pattern(self) -> str | None:
        """The first rule the seat's departures are seen to follow (None: none)."""
        return next((name for name, t in self.trails.items() if t.seen), None)

    def to_dict(self) -> dict[str, Any]:
        return {name: [t.run, int(t.seen), t.against] for name, t in self.trails.items()
                if t.run or t.seen or t.against}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> Watch:
        watch = cls()
        for name, (run, seen, against) in (doc or {}).items():
            if name in watch.trails:
                watch.trails[name] = _Trail(int(run), bool(seen), int(against))
        return watch


@dataclass(frozen=True)
class Label:
    """What a hand promises: ``exact`` (its distance is the distance of the hands so
    labelled) or a bound (``distance`` holds for them; None: nothing can be said)."""

    exact: bool
    distance: Fraction | None

    @property
    def word(self) -> str:
        """The line ``simulate --orders`` writes after the hand's order."""
        if self.exact:
            return "exact"
        return "bound unknown" if self.distance is None else f"bound {float(self.distance):.6g}"


def hand_label(exact: bool, distance: Fraction | None, steered: Fraction | None,
               pattern: str | None) -> Label:
    """The hand's label from the planner's verdict (``exact``, ``distance``), its bound
    for a dealer who chose by the cards (``steered``), and the seat's :class:`Watch`
    pattern as it stood when the hand began."""
    if pattern is None:
        return Label(exact, distance)
    if distance is None or steered is None:
        return Label(False, None)
    return Label(False, max(distance, steered))
