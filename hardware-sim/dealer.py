"""The simulated dealer: restacks the piles between passes and touches the sensor.

A habit is how the dealer picks the pile that goes on top. Some ignore the cards
(``instructed``, ``other``, ``follows-but-last``, ``both``); some look at them
(``taller``, ``last-card``, ``first-card``): their choice depends on how the cards
fell, so on the plan, which is what a report must allow for (docs/mixing.md).
The choice is :func:`choose_pile`, one pure function the simulator, the gpiozero rig
and the studies share; the timing of the lifts and the touch lives beside it.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from shuffler.core.mechanics import Pile
from shuffler.device.contract import EventKind, InputEvent


class DealerHabit(enum.Enum):
    INSTRUCTED = "instructed"  # puts the pile the LED shows on top
    OTHER = "other"  # always puts the other pile on top
    BOTH = "both"  # lifts both piles at once: the sensors cannot tell
    FOLLOWS_BUT_LAST = "follows-but-last"  # as the LED says, except after the last pass
    TALLER = "taller"  # the taller pile on top (as the LED says when they look equal)
    LAST_CARD = "last-card"  # the pile the last card fell on goes on top
    FIRST_CARD = "first-card"  # the pile the first card fell on goes on top

    @property
    def looks_at_the_cards(self) -> bool:
        return self in (DealerHabit.TALLER, DealerHabit.LAST_CARD, DealerHabit.FIRST_CARD)


@dataclass(frozen=True)
class PilesSeen:
    """What the dealer sees on the table after a pass."""

    sizes: tuple[int, int]  # cards on the left and the right pile
    first: Pile | None  # the pile the pass's first card fell on (None: no card)
    last: Pile | None  # the pile its last card fell on
    last_pass: bool  # the LED says the hand is done after this stacking


def choose_pile(habit: DealerHabit, instructed: Pile, seen: PilesSeen,
                rng: random.Random) -> Pile:
    """The pile the dealer puts on top (for ``both``: the one that ends on top, unseen)."""
    if habit is DealerHabit.OTHER or (habit is DealerHabit.FOLLOWS_BUT_LAST and seen.last_pass):
        return instructed.other
    if habit is DealerHabit.BOTH:
        return Pile(rng.randrange(2))
    if habit is DealerHabit.TALLER and seen.sizes[0] != seen.sizes[1]:
        return Pile.LEFT if seen.sizes[0] > seen.sizes[1] else Pile.RIGHT
    if habit is DealerHabit.LAST_CARD and seen.last is not None:
        return seen.last
    if habit is DealerHabit.FIRST_CARD and seen.first is not None:
        return seen.first
    return instructed


@dataclass
class SimDealer:
    habit: DealerHabit = DealerHabit.INSTRUCTED
    rng: random.Random = field(default_factory=random.Random)
    lift_gap: float = 0.6  # seconds between lifting the first and the second pile
    both_gap: float = 0.02  # "at once": well inside the sensors' window
    settle: float = 0.8  # seconds to square the pack in the tray and touch

    def choose(self, instructed: Pile, seen: PilesSeen | None = None) -> Pile:
        seen = seen or PilesSeen((0, 0), None, None, False)
        return choose_pile(self.habit, instructed, seen, self.rng)

    def lift_events(self, on_top: Pile, at: float) -> list[InputEvent]:
        gap = self.both_gap if self.habit is DealerHabit.BOTH else self.lift_gap
        return [
            InputEvent(EventKind.PILE_LIFTED, at, on_top),
            InputEvent(EventKind.PILE_LIFTED, at + gap, on_top.other),
        ]
