"""The simulated dealer: restacks the piles between passes and touches the sensor."""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from shuffler.device import EventKind, InputEvent
from shuffler.mechanics import Pile


class DealerHabit(enum.Enum):
    INSTRUCTED = "instructed"  # puts the pile the LED shows on top
    OTHER = "other"  # always puts the other pile on top
    BOTH = "both"  # lifts both piles at once: the sensors cannot tell


@dataclass
class SimDealer:
    habit: DealerHabit = DealerHabit.INSTRUCTED
    rng: random.Random = field(default_factory=random.Random)
    lift_gap: float = 0.6  # seconds between lifting the first and the second pile
    both_gap: float = 0.02  # "at once": well inside the sensors' window
    settle: float = 0.8  # seconds to square the pack in the tray and touch

    def choose(self, instructed: Pile) -> Pile:
        if self.habit is DealerHabit.INSTRUCTED:
            return instructed
        if self.habit is DealerHabit.OTHER:
            return instructed.other
        return Pile(self.rng.randrange(2))

    def lift_events(self, on_top: Pile, at: float) -> list[InputEvent]:
        gap = self.both_gap if self.habit is DealerHabit.BOTH else self.lift_gap
        return [
            InputEvent(EventKind.PILE_LIFTED, at, on_top),
            InputEvent(EventKind.PILE_LIFTED, at + gap, on_top.other),
        ]
