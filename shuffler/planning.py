"""Pass plans: which pile each card goes to.

Plans draw from the OS CSPRNG (:class:`secrets.SystemRandom`) unless the caller
hands in another source, which only the simulator does (for reproducible runs).
A plan is a secret: anyone who reads it knows the deck. Its ``repr`` hides the
labels, and nothing in this package logs, stores or prints them.

    >>> plan = coin_plan(24)
    >>> plan
    PassPlan(cards=24, on_top=LEFT)
    >>> sum(plan.pile_sizes) == 24
    True
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass, field
from typing import Protocol

from .cards import check_card_count
from .mechanics import Feed, Pile, deal_pass, pile_sizes


class RandomSource(Protocol):
    """What a planner needs from a random source (``secrets.SystemRandom`` has it)."""

    def getrandbits(self, k: int, /) -> int: ...
    def randrange(self, start: int, stop: int | None = None, /) -> int: ...


def system_random() -> RandomSource:
    """The production source: the operating system's CSPRNG."""
    return secrets.SystemRandom()


class Mode(enum.Enum):
    """How labels are chosen: ``coin`` flips a fair coin per card (the plain
    machine); ``planned`` chooses them to reach the physical limit."""

    COIN = "coin"
    PLANNED = "planned"


@dataclass(frozen=True, repr=False)
class PassPlan:
    """The labels for one pass, in feed order (0 = left pile, 1 = right pile),
    and the pile the dealer will be asked to put on top afterwards."""

    labels: tuple[int, ...]
    on_top: Pile = Pile.LEFT
    _sizes: tuple[int, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if any(label not in (0, 1) for label in self.labels):
            raise ValueError("a pass plan holds only the labels 0 and 1")
        object.__setattr__(self, "_sizes", pile_sizes(self.labels))

    @property
    def cards(self) -> int:
        return len(self.labels)

    @property
    def pile_sizes(self) -> tuple[int, int]:
        return self._sizes

    def __repr__(self) -> str:  # never show the labels
        return f"PassPlan(cards={self.cards}, on_top={self.on_top.name})"

    __str__ = __repr__


def coin_plan(cards: int, rng: RandomSource | None = None, on_top: Pile = Pile.LEFT) -> PassPlan:
    """One fair, independent coin per card: an inverse GSR riffle."""
    check_card_count(cards)
    bits = (rng or system_random()).getrandbits(cards)
    return PassPlan(tuple((bits >> i) & 1 for i in range(cards)), on_top)


class PackTracker:
    """Where every card is: start positions (0 = top) in current order, top first.

    The controller knows the order from its own labels and the stacking the
    pile sensors saw. A count other than planned, or a stacking it could not
    see, loses track (``order`` becomes None).
    """

    def __init__(self, cards: int, feed: Feed) -> None:
        self.feed = feed
        self.order: list[int] | None = list(range(cards))

    @property
    def known(self) -> bool:
        return self.order is not None

    def after_pass(self, plan: PassPlan, counted: int, stacking: Pile | None) -> None:
        if self.order is None:
            return
        if counted != plan.cards or stacking is None or len(self.order) != plan.cards:
            self.order = None
            return
        self.order = deal_pass(self.order, plan.labels, self.feed, stacking)


class Planner(Protocol):
    """Chooses each pass's labels; the seam between coin and planned mode."""

    mode: Mode

    def plan(self, index: int, cards: int, tracker: PackTracker) -> PassPlan: ...


class CoinPlanner:
    """The plain machine: a fair coin per card, whatever the pack looks like."""

    mode = Mode.COIN

    def __init__(self, rng: RandomSource | None = None) -> None:
        self.rng = rng or system_random()

    def plan(self, index: int, cards: int, tracker: PackTracker) -> PassPlan:
        return coin_plan(cards, self.rng)
