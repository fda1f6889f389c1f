"""Studies: many simulated hands through the pass mechanics, imperfections included.

The same planners the controller uses deal every pass; the simulated dealer
may lift both piles at once (the sensors cannot tell) or put the other pile on
top without the sensors noticing, and the feed may take two cards as one.
Orders are lists of starting positions, top first.

    >>> import random
    >>> from shuffler.core.planning import Mode
    >>> orders = list(simulate_hands(24, 5, Mode.PLANNED, 3, random.Random(1)))
    >>> [sorted(o) == list(range(24)) for o in orders]
    [True, True, True]
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from shuffler.core.labels import Label, Watch, hand_label
from shuffler.core.mechanics import Feed, Pile, deal_pass, feed_order, stack
from shuffler.core.planning import Mode, PackTracker, PassPlan, Planner, make_planner

from .dealer import DealerHabit, PilesSeen, choose_pile


@dataclass(frozen=True)
class Imperfections:
    """What goes wrong, by chance (rates) or on schedule (pass numbers from 0)."""

    double_feed_rate: float = 0.0  # per card: it goes through with the next as one
    unseen_stack_rate: float = 0.0  # per pass: both piles lifted at once
    wrong_unnoticed_rate: float = 0.0  # per pass: the other pile on top, sensors fooled
    wrong_at: frozenset[int] = frozenset()  # passes stacked wrongly, unnoticed
    unseen_at: frozenset[int] = frozenset()  # passes whose stacking the sensors miss
    double_at: frozenset[tuple[int, int]] = frozenset()  # (pass, fed index) double feeds
    habit: DealerHabit = DealerHabit.INSTRUCTED  # the dealer's habit, as --sim-dealer
    #: the dealer hears the machine's warning and corrects (as a real dealer who hears
    #: the beep); False: ignores it, as --sim-ignores
    listens: bool = True

    @property
    def any(self) -> bool:
        return bool(self.double_feed_rate or self.unseen_stack_rate or self.wrong_unnoticed_rate
                    or self.wrong_at or self.unseen_at or self.double_at
                    or self.habit is not DealerHabit.INSTRUCTED)


def deal_with_doubles(pack: Sequence[int], labels: Sequence[int], feed: Feed, on_top: Pile,
                      doubles: set[int]) -> tuple[list[int], int]:
    """A pass in which the cards fed at the indices in ``doubles`` drag the next card
    along onto their pile. Returns the new pack and how many cards the beam counted."""
    if not doubles:
        return deal_pass(pack, labels, feed, on_top), len(pack)
    piles: tuple[list[int], list[int]] = ([], [])
    fed = feed_order(pack, feed)
    i = counted = 0
    while i < len(fed):
        pile = piles[labels[counted]]
        pile.append(fed[i])
        if i in doubles and i + 1 < len(fed):
            i += 1
            pile.append(fed[i])
        i += 1
        counted += 1
    return stack((piles[0][::-1], piles[1][::-1]), on_top), counted


def _chance(rng: random.Random, rate: float) -> bool:
    return bool(rate) and rng.random() < rate


def simulate_hand(n: int, passes: int, mode: Mode, rng: random.Random,
                  feed: Feed = Feed.TOP, flaws: Imperfections | None = None) -> list[int]:
    """One hand of ``passes`` passes from the order 0..n−1; returns the final order."""
    return play_hand(n, passes, mode, rng, feed, flaws)[0]


def _stack(flaws: Imperfections, plan: PassPlan, last_pass: bool,
           rng: random.Random) -> tuple[Pile, Pile | None]:
    """Where the dealer's habit takes the stacking: the pile on top, and the one the
    sensors see there (None: they could not tell). A dealer who listens hears the
    machine's warning when the first pile lifted is not the light's (or both go at
    once) and puts it back and lifts the right one: their stacking is the plan's."""
    habit = flaws.habit
    if habit is DealerHabit.INSTRUCTED or flaws.listens:  # only ``both`` draws to choose
        return plan.on_top, plan.on_top
    chosen = choose_pile(habit, plan.on_top, _seen(plan, last_pass), rng)
    if habit is DealerHabit.BOTH:
        return chosen, None
    return chosen, chosen


def play_hand(n: int, passes: int, mode: Mode, rng: random.Random,
              feed: Feed = Feed.TOP, flaws: Imperfections | None = None,
              watch: Watch | None = None) -> tuple[list[int], Planner]:
    """:func:`simulate_hand`, also returning the planner (for the distance it reports).
    ``watch`` hears every pass as the controller's does (the light, what the sensors saw
    on top, the plan)."""
    flaws = flaws or Imperfections()
    planner = make_planner(mode, passes, rng)
    tracker = PackTracker(n, feed)
    pack = list(range(n))
    for j in range(passes):
        plan = planner.plan(j, n, tracker)
        on_top = plan.on_top
        seen: Pile | None = on_top  # None: the dealer stacked unseen
        doubles: set[int] = set()
        if flaws.any:
            on_top, seen = _stack(flaws, plan, j == passes - 1, rng)
            if j in flaws.unseen_at or _chance(rng, flaws.unseen_stack_rate):
                on_top, seen = Pile(rng.randrange(2)), None
            elif seen is not None and (j in flaws.wrong_at
                                       or _chance(rng, flaws.wrong_unnoticed_rate)):
                on_top = on_top.other
            if flaws.double_feed_rate:
                doubles = {i for i in range(n) if rng.random() < flaws.double_feed_rate}
            doubles |= {i for p, i in flaws.double_at if p == j}
        pack, counted = deal_with_doubles(pack, plan.labels, feed, on_top, doubles)
        # the controller sees only the count and the pile sensors
        tracker.after_pass(plan, counted, seen)
        planner.observe(j, plan, counted, seen)
        if watch is not None:
            watch.see(plan.on_top, seen, plan.labels)
    return pack, planner


def verdict_of(planner: Planner, n: int, passes: int
               ) -> tuple[bool, Fraction | None, Fraction | None]:
    """What ``planner`` says of the hand it dealt, whatever the seat's watch saw: exact,
    the distance, the bound for a dealer who chose by the cards (:func:`hand_label`)."""
    return planner.exact, planner.distance(n, passes), planner.steered_distance(n, passes)


def label_of(planner: Planner, n: int, passes: int, pattern: str | None) -> Label:
    """The label the controller gives the hand ``planner`` dealt (``pattern``: the
    seat's watch as the hand began)."""
    return hand_label(*verdict_of(planner, n, passes), pattern)


def play_labelled(n: int, passes: int, mode: Mode, rng: random.Random,
                  feed: Feed = Feed.TOP, flaws: Imperfections | None = None,
                  watch: Watch | None = None) -> tuple[list[int], Label]:
    """One hand and its label, the watch (one dealer's evening) held across calls."""
    pattern = watch.pattern if watch is not None else None
    order, planner = play_hand(n, passes, mode, rng, feed, flaws, watch)
    return order, label_of(planner, n, passes, pattern)


def _seen(plan: PassPlan, last_pass: bool) -> PilesSeen:
    """What the dealer sees after dealing ``plan`` (without double feeds)."""
    labels = plan.labels
    first = Pile.of(labels[0]) if labels else None
    last = Pile.of(labels[-1]) if labels else None
    return PilesSeen(plan.pile_sizes, first, last, last_pass)


def simulate_hands(n: int, passes: int, mode: Mode, trials: int, rng: random.Random,
                   feed: Feed = Feed.TOP, flaws: Imperfections | None = None
                   ) -> Iterator[list[int]]:
    for _ in range(trials):
        yield simulate_hand(n, passes, mode, rng, feed, flaws)


def reading_order(order: Sequence[int], passes: int, feed: Feed) -> list[int]:
    """Undo the pile reversal: after an odd number of top-feed passes the pack reads
    as the reverse of an ideal one, so runs are counted on reversed positions."""
    if feed is Feed.TOP and passes % 2 == 1:
        n = len(order)
        return [n - 1 - c for c in order]
    return list(order)
