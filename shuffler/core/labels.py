"""A hand's label: what the sensors saw, turned into a promise that holds for the hands
carrying it, whatever the dealer does.

A hand is labelled **exact** when it finished on its own plan with every stack, the
last one included, seen by the pile sensors to match the light: then its stackings are
the plan's whatever the dealer looked at, so the law of the hands carrying the label is
the plan's. Nothing the dealer may do inside such a hand moves it out of the label: a
warned stack cannot be kept, a stop pauses the hand on the same plan, and a hand is not
finished until its last stack is seen. A hand resumed without its plan (the process
that held it ended) is re-planned from an order nobody tracked, and the dealer may have
chosen to end it by the cards: it carries the bound that holds for any law,
1 − 1/n! (docs/mixing.md, "The last stack").

    >>> from fractions import Fraction
    >>> hand_label(True, Fraction(0)).word
    'exact'
    >>> hand_label(True, Fraction(0), lost=3).word
    'bound 0.833333'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI's status reads no fractions (tests/test_cli_options.py)
    from fractions import Fraction


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


def hand_label(exact: bool, distance: Fraction | None, lost: int | None = None) -> Label:
    """The label of a finished hand from the planner's verdict (``exact``, ``distance``);
    ``lost``: the hand's cards, when it was resumed without its plan (the bound of last
    resort, :func:`~shuffler.core.mixing.tv_any`, which no law of that many cards
    exceeds)."""
    if lost is not None:
        from shuffler.core.mixing import tv_any

        return Label(False, tv_any(lost))
    return Label(exact, distance)
