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

from shuffler.control.hand import Lifts
from shuffler.control.touch import Machine, Start, TouchPolicy
from shuffler.core.labels import Label, hand_label
from shuffler.core.mechanics import Feed, Pile, deal_pass, feed_order, stack
from shuffler.core.planning import Mode, PackTracker, PassPlan, Planner, make_planner
from shuffler.device.contract import EventKind, InputEvent, Signal, Status

from .dealer import CAREFUL_GAP, Answer, DealerHabit, PilesSeen, SimDealer, choose_pile


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
    #: the beep); False: ignores it until made to correct, as --sim-ignores
    listens: bool = True
    #: what the dealer does at a warning (None: as ``listens`` says)
    answer: Answer | None = None

    @property
    def answers(self) -> Answer:
        if self.answer is not None:
            return self.answer
        return Answer() if self.listens else Answer(Fraction(0))

    @property
    def any(self) -> bool:
        return bool(self.double_feed_rate or self.unseen_stack_rate or self.wrong_unnoticed_rate
                    or self.wrong_at or self.unseen_at or self.double_at
                    or self.habit is not DealerHabit.INSTRUCTED or self.answer is not None)


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


#: the sensors' window for "both at once" (the config's default ``both_window_s``)
BOTH_WINDOW = 0.15


def _draw(rng: random.Random, chance: Fraction | int) -> bool:
    """True with ``chance`` (no draw when it is 0 or 1: the walks enumerate every draw)."""
    if chance in (0, 1):
        return bool(chance)
    chance = Fraction(chance)
    return rng.randrange(chance.denominator) < chance.numerator


def _shown(pack: Sequence[int], plan: PassPlan, feed: Feed, pile: Pile, n: int) -> bool:
    """Whether the card ``pile`` shows the dealer who lifts it (its bottom card, the first
    dealt onto it) is high: from the bottom half of the starting pack."""
    bottom = next((c for c, lab in zip(feed_order(pack, feed), plan.labels, strict=True)
                   if Pile.of(lab) is pile), None)
    return bottom is not None and 2 * bottom >= n


def dealer_stacking(flaws: Imperfections, plan: PassPlan, last_pass: bool, rng: random.Random,
           pack: Sequence[int], feed: Feed) -> tuple[Pile, Pile | None, int]:
    """The dealer's stacking, followed by the controller's own :class:`Lifts` and touch
    policy: the pile on top, the one the sensors saw there (None: they could not tell),
    and how many times the dealer stopped the hand at this stack (each resumed on the
    same plan, as the controller resumes a paused hand). The habit picks the pile; the
    machine warns of the other pile first or both at once; the dealer's
    :attr:`Imperfections.answers` decides what it tries then (each refusal tried through
    :meth:`TouchPolicy.decide`: should one ever start the next pass, the stack stands as
    it is and the planner is told what the sensors saw)."""
    habit, answer, n = flaws.habit, flaws.answers, len(pack)
    if habit is DealerHabit.INSTRUCTED and flaws.answer is None:
        return plan.on_top, plan.on_top, 0
    asked = plan.on_top
    ask = Status(Signal.STACK, asked, None if last_pass else 2, 2)
    policy, stops = TouchPolicy(), 0
    while True:  # once, or again after each stop at this stack
        chosen = choose_pile(habit, asked, _seen(plan, last_pass), rng)
        shown = _shown(pack, plan, feed, chosen, n)
        lifts, t = Lifts(ask, BOTH_WINDOW), 1.0
        gap = SimDealer.both_gap if habit is DealerHabit.BOTH else SimDealer.lift_gap
        if lifts.lift(InputEvent(EventKind.PILE_LIFTED, t, chosen)) != "warn":
            lifts.lift(InputEvent(EventKind.PILE_LIFTED, t + gap, chosen.other))
        if answer.stops_high and shown and not stops:
            stops += 1  # the hand pauses here; resumed, the same stack is asked again
            continue
        break
    while lifts.warned is not None:
        t += 1.0
        if not _draw(rng, answer.corrects):  # goes on with the stack as it is, if let
            kind = EventKind.LONG_PRESS if answer.keeps_high and shown else EventKind.TOUCH
            decision = policy.decide(InputEvent(kind, t), Machine(
                restacking=True, warned=lifts.warned, stacked=lifts.settled))
            if isinstance(decision, Start):
                return chosen, lifts.stacking, stops
        t += 1.0  # put back, and lift the light's pile first, the other after it
        lifts.lift(InputEvent(EventKind.PILE_LIFTED, t, asked))
        lifts.lift(InputEvent(EventKind.PILE_LIFTED, t + CAREFUL_GAP, asked.other))
    return (asked if lifts.ever_warned else chosen), lifts.stacking, stops


def play_hand(n: int, passes: int, mode: Mode, rng: random.Random,
              feed: Feed = Feed.TOP, flaws: Imperfections | None = None
              ) -> tuple[list[int], Planner]:
    """:func:`simulate_hand`, also returning the planner (for the distance it reports)."""
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
            on_top, seen, _ = dealer_stacking(flaws, plan, j == passes - 1, rng, pack, feed)
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
    return pack, planner


def label_of(planner: Planner, n: int, passes: int) -> Label:
    """The label the controller gives the finished hand ``planner`` dealt."""
    return hand_label(planner.exact, planner.distance(n, passes))


def play_labelled(n: int, passes: int, mode: Mode, rng: random.Random,
                  feed: Feed = Feed.TOP, flaws: Imperfections | None = None
                  ) -> tuple[list[int], Label]:
    """One hand and its label."""
    order, planner = play_hand(n, passes, mode, rng, feed, flaws)
    return order, label_of(planner, n, passes)


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
