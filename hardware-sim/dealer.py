"""The simulated dealer: restacks the piles between passes and touches the sensor.

A habit is how the dealer picks the pile that goes on top. Some ignore the cards
(``instructed``, ``other``, ``follows-but-last``, ``both``); some look at them
(``taller``, ``last-card``, ``first-card``): their choice depends on how the cards
fell, so on the plan, which is what a report must allow for (docs/mixing.md).
The choice is :func:`choose_pile`, one pure function the simulator, the gpiozero rig
and the studies share; the timing of the lifts and the touch lives beside it, and so
does the reaction to the light (:meth:`SimDealer.reacts`, :meth:`SimDealer.corrects`),
which the simulator plays as events and the rig as sensor levels.

When the pile a habit lifts first is not the one the light shows, the machine warns at
once (its light and beeps). A dealer who *listens* (``SimDealer.listens``, the default,
as a real dealer who hears the beep) puts that pile back and lifts the one the light
shows; one who does not (``--sim-ignores``) stacks by the habit anyway, touches, holds
the sensor to keep the stack, is refused both times, and corrects then: made to (no
stack off the light is ever kept, the last one included). :class:`Answer` is what a
dealer does at a warning beside the habit, for the studies: correct at once with some
chance, try to keep the stack when the card it shows is high, stop the hand at such a
stack and start it again.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shuffler.core.mechanics import Pile
from shuffler.device.contract import EventKind, InputEvent

if TYPE_CHECKING:  # the CLI's status opens the simulator: fractions stays out of it
    from fractions import Fraction


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


@dataclass(frozen=True)
class Answer:
    """What a dealer does at the machine's warning, beside the habit that chose the pile.

    ``corrects``: the chance of putting the pile back at once; otherwise the dealer first
    tries to go on with the stack as it is (a touch) and corrects when refused. With
    ``keeps_high`` the dealer holds the sensor to keep the warned stack when the card it
    shows (the bottom card of the pile lifted first) is high, a card from the bottom half
    of the starting pack: the cards decide. With ``stops_high`` the dealer stops the hand
    at a stack whose card shown is high, and starts the hand again."""

    corrects: Fraction | int = 1  # exact chances in the walks; fractions loads lazily
    keeps_high: bool = False
    stops_high: bool = False

    @property
    def name(self) -> str:
        said = [] if self.corrects == 1 else [f"corrects {self.corrects}"]
        said += ["keeps-high"] * self.keeps_high + ["stops-high"] * self.stops_high
        return ", ".join(said) or "corrects"



#: seconds at least between the two lifts of a dealer who was warned
CAREFUL_GAP = 0.6


@dataclass(frozen=True)
class Reaction:
    """What the simulated dealer does when the light asks for a pile on top: the one
    reaction the simulator (as events) and the pins' rig (as sensor levels) both play."""

    on_top: Pile  # the pile it lifts first
    lifts: list[InputEvent]  # both lifts, the first at the time asked about
    at_once: bool  # both piles together: the sensors cannot tell, the machine warns
    #: the pile the light shows lifted first, one at a time: it stacks straight away
    follows: bool
    #: warned, it goes on as it is until made to correct (a touch, refused) ...
    made_to: bool = False
    keeps: bool = False  # ... and holds the sensor to keep the stack (refused too)


@dataclass
class SimDealer:
    habit: DealerHabit = DealerHabit.INSTRUCTED
    rng: random.Random = field(default_factory=random.Random)
    lift_gap: float = 0.6  # seconds between lifting the first and the second pile
    both_gap: float = 0.02  # "at once": well inside the sensors' window
    settle: float = 0.8  # seconds to square the pack in the tray and touch
    #: corrects when the machine warns of the other pile lifted first (False: stacks by
    #: the habit anyway, and keeps the stack with a long press when the touch is refused)
    listens: bool = True
    put_back: float = 0.4  # seconds to hear the warning and put the pile back

    @property
    def careful_gap(self) -> float:
        """Warned, the dealer lifts one pile and then the other, never both at once."""
        return max(self.lift_gap, CAREFUL_GAP)
    hold: float = 2.2  # seconds the sensor is held to keep a stack (a long press)
    #: what the dealer does at a warning (None: as ``listens`` says), and which cards it
    #: calls high (the card shown decides ``keeps_high``)
    answer: Answer | None = None
    high: Callable[[object], bool] = field(default=lambda card: False)

    def made_to(self, shown: object) -> tuple[bool, bool]:
        """At a warning, shown ``shown``: whether the dealer goes on as it is until made to
        correct (else corrects at once), and whether it holds the sensor to keep the stack."""
        if self.answer is None:
            return not self.listens, not self.listens
        keep = self.answer.keeps_high and self.high(shown)
        p = self.answer.corrects
        at_once = p == 1 or (p != 0 and self.rng.random() < p)
        return keep or not at_once, keep

    def reacts(self, asked: Pile, at: float, seen: PilesSeen | None = None,
               shown: Callable[[Pile], object] = lambda pile: None) -> Reaction:
        """The light asks for ``asked`` on top at ``at``; ``shown(pile)`` is the card a
        pile lifted first shows (what an :class:`Answer`'s ``keeps_high`` looks at)."""
        on_top = self.choose(asked, seen)
        lifts = self.lift_events(on_top, at)
        at_once = self.habit is DealerHabit.BOTH  # warned of too (cannot tell)
        if lifts[0].pile is asked and not at_once:
            return Reaction(on_top, lifts, at_once, follows=True)
        made_to, keeps = self.made_to(shown(on_top))
        return Reaction(on_top, lifts, at_once, False, made_to, keeps)

    def corrects(self, asked: Pile, at: float) -> list[InputEvent]:
        """Warned at ``at``: the pile put back, then the one asked for lifted first and the
        other after it, one at a time."""
        lifted = at + self.put_back
        return [InputEvent(EventKind.PILE_LIFTED, lifted, asked),
                InputEvent(EventKind.PILE_LIFTED, lifted + self.careful_gap, asked.other)]

    def choose(self, instructed: Pile, seen: PilesSeen | None = None) -> Pile:
        seen = seen or PilesSeen((0, 0), None, None, False)
        return choose_pile(self.habit, instructed, seen, self.rng)

    def lift_events(self, on_top: Pile, at: float) -> list[InputEvent]:
        gap = self.both_gap if self.habit is DealerHabit.BOTH else self.lift_gap
        return [
            InputEvent(EventKind.PILE_LIFTED, at, on_top),
            InputEvent(EventKind.PILE_LIFTED, at + gap, on_top.other),
        ]
