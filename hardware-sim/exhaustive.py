"""Exact distributions by walking every random choice of the planners.

The sampler makes every choice through ``planning._weighted_index`` and
``planning._uniform_index``; :func:`enumerate_outcomes` replaces both for the
duration of the walk and returns each outcome of ``run()`` with its exact
probability. :func:`coin_outcomes` follows coin passes over every coin. For
small packs only: the walk visits every reachable order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from itertools import product
from math import factorial
from typing import TypeVar

from shuffler.core import planning
from shuffler.core.labels import Label
from shuffler.core.mechanics import Feed, Pile

from .dealer import Answer, DealerHabit
from .study import Imperfections, deal_with_doubles, dealer_stacking, label_of, play_hand

H = TypeVar("H", bound=Hashable)  # an outcome: an order, or whatever ``run`` returns
Order = tuple[int, ...]


class ScriptedRandom:
    """A random source for :func:`enumerate_outcomes` whose every draw is enumerated:
    coin flips (``getrandbits``) as well as indices."""

    def __init__(self, pick: Callable[[list[int], object], int]) -> None:
        self._pick = pick

    def getrandbits(self, k: int, /) -> int:
        return self._pick([1] * 2**k, self)

    def randrange(self, start: int, stop: int | None = None, /) -> int:
        low, high = (0, start) if stop is None else (start, stop)
        return low + self._pick([1] * (high - low), self)


def enumerate_outcomes(run: Callable[..., H], *, scripted_rng: bool = False
                       ) -> dict[H, Fraction]:
    """Every outcome of ``run()`` with its exact probability. With ``scripted_rng``,
    ``run`` is called with a :class:`ScriptedRandom` whose draws are enumerated too
    (for coin passes, which flip with ``getrandbits``)."""
    outcomes: dict[H, Fraction] = defaultdict(Fraction)
    pending: list[list[int]] = [[]]
    saved = planning._weighted_index, planning._uniform_index
    try:
        while pending:
            script = pending.pop()
            taken: list[int] = []
            prob = [1, 1]  # numerator, denominator: whole numbers until the run ends (fast)

            def pick(weights: list[int], rng: object, script: list[int] = script,
                     taken: list[int] = taken, prob: list[int] = prob) -> int:
                i = len(taken)
                if i < len(script):
                    choice = script[i]
                else:
                    live = [j for j, w in enumerate(weights) if w]
                    choice = live[0]
                    pending.extend([*taken, j] for j in live[1:])
                taken.append(choice)
                prob[0] *= weights[choice]
                prob[1] *= sum(weights)
                return choice

            planning._weighted_index = pick
            planning._uniform_index = partial(_uniform_by, pick)
            outcome = run(ScriptedRandom(pick)) if scripted_rng else run()
            outcomes[outcome] += Fraction(prob[0], prob[1])
    finally:
        planning._weighted_index, planning._uniform_index = saved
    assert sum(outcomes.values()) == 1
    return dict(outcomes)


def _uniform_by(pick: Callable[[list[int], object], int], m: int, rng: object) -> int:
    return pick([1] * m, rng)


def total_variation(outcomes: Mapping[H, Fraction], n: int) -> Fraction:
    """Distance from uniform over all n! orders."""
    u = Fraction(1, factorial(n))
    seen = sum((abs(p - u) for p in outcomes.values()), Fraction(0))
    return (seen + u * (factorial(n) - len(outcomes))) / 2


def coin_outcomes(n: int, passes: int, feed: Feed,
                  flaws: Imperfections) -> dict[Order, Fraction]:
    """The exact law of the final order after ``passes`` coin passes with scheduled
    ``flaws`` (``double_at``, ``unseen_at``, ``wrong_at``), pass by pass over every
    coin: a double feed deals one label fewer; an unseen stacking is either pile."""
    law: dict[Order, Fraction] = {tuple(range(n)): Fraction(1)}
    for j in range(passes):
        doubles = {i for p, i in flaws.double_at if p == j}
        piles = [Pile.RIGHT] if j in flaws.wrong_at else [Pile.LEFT]
        if j in flaws.unseen_at:
            piles = [Pile.LEFT, Pile.RIGHT]
        units = n - len({i for i in doubles if i + 1 < n})
        share = Fraction(1, 2**units * len(piles))
        after: dict[Order, Fraction] = defaultdict(Fraction)
        for pack, p in law.items():
            for labels in product((0, 1), repeat=units):
                for pile in piles:
                    order, _ = deal_with_doubles(pack, labels, feed, pile, doubles)
                    after[tuple(order)] += p * share
        law = after
    return law


def labelled_law(n: int, passes: int, mode: planning.Mode, habit: DealerHabit,
                 answer: Answer | None = None, *, feed: Feed = Feed.TOP
                 ) -> dict[tuple[Order, Label], Fraction]:
    """The exact joint law of one hand's final order and its label, by exhaustion over
    every draw (the planner's, the coins, the dealer's): a dealer with ``habit`` who
    answers the machine's warning as ``answer`` says (None: corrects at once)."""
    flaws = Imperfections(habit=habit, answer=answer)

    def run(rng: ScriptedRandom) -> tuple[Order, Label]:
        order, planner = play_hand(n, passes, mode, rng, feed, flaws)  # type: ignore[arg-type]
        return tuple(order), label_of(planner, n, passes)

    return enumerate_outcomes(run, scripted_rng=True)


def every_stack_is_the_lights(n: int, habit: DealerHabit, answer: Answer,
                              feed: Feed = Feed.TOP) -> int:
    """The step the walks of larger packs rest on, by exhaustion: for every labelling of
    a pass of n cards, every pile the light may show, the last pass or not, every card the
    dealer may be shown (high or not) and every draw of the dealer's, the dealer's
    stacking ends with the light's pile on top and the sensors seeing it there. Then, pass
    by pass, every dealer's hands are the instructed dealer's, whatever the cards showed.
    Returns how many cases were walked; raises AssertionError on the first that fails."""
    walked = 0
    for bits in product((0, 1), repeat=n):
        for on_top, last, high in product(Pile, (False, True), (False, True)):
            plan = planning.PassPlan(bits, on_top)
            # a pack whose every card is high (or low): the card shown is so whatever pile
            pack = list(range(n // 2, n)) * 2 if high else list(range(n // 2)) * 2 + [0]
            pack = pack[:n]

            def run(rng: ScriptedRandom, plan: planning.PassPlan = plan,
                    last: bool = last, pack: list[int] = pack) -> tuple[Pile, Pile | None]:
                flaws = Imperfections(habit=habit, answer=answer)
                got = dealer_stacking(flaws, plan, last, rng, pack, feed)  # type: ignore[arg-type]
                return got[0], got[1]

            for outcome in enumerate_outcomes(run, scripted_rng=True):
                assert outcome == (on_top, on_top), (bits, on_top, last, high, outcome)
                walked += 1
    return walked


#: the answers the acceptance walks (issue 47): made to, p = 1/4, 1/2, 3/4, keeps a
#: warned stack when the card shown is high, stops and restarts a hand it dislikes
ANSWERS = (Answer(Fraction(0)), Answer(Fraction(1, 4)), Answer(Fraction(1, 2)),
           Answer(Fraction(3, 4)), Answer(Fraction(0), keeps_high=True),
           Answer(Fraction(1, 2), stops_high=True))

#: the cases of docs/mixing.md's label table: (mode, cards, passes)
LABEL_TABLE_CASES = ((planning.Mode.PLANNED, 4, 2), (planning.Mode.PLANNED, 5, 2),
                     (planning.Mode.PLANNED, 5, 3), (planning.Mode.COIN, 4, 2))
#: its dealers: a habit and an answer to the warning (None: corrects at once)
LABEL_TABLE_DEALERS: tuple[tuple[DealerHabit, Answer | None], ...] = (
    (DealerHabit.INSTRUCTED, None),
    *((DealerHabit.LAST_CARD, a) for a in ANSWERS),
    (DealerHabit.FIRST_CARD, ANSWERS[0]), (DealerHabit.FOLLOWS_BUT_LAST, ANSWERS[0]),
    (DealerHabit.BOTH, ANSWERS[0]))


def label_table() -> str:
    """docs/mixing.md's label table: for each dealer and case, by exhaustion, the share
    of hands labelled exact and the distance of their law from the plan's."""
    head = ["dealer"] + [f"{m.value} {n} cards, {k} passes" for m, n, k in LABEL_TABLE_CASES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    plans = {case: plan_law(case[1], case[2], case[0]) for case in LABEL_TABLE_CASES}
    for habit, answer in LABEL_TABLE_DEALERS:
        cells = [f"`{habit.value}`, {(answer or Answer()).name}"]
        for mode, n, k in LABEL_TABLE_CASES:
            groups = label_groups(labelled_law(n, k, mode, habit, answer), n,
                                  plans[mode, n, k])
            exact = [g for g in groups if g.label.exact]
            share = sum((g.share for g in exact), Fraction(0))
            gap = max((g.from_plan for g in exact), default=Fraction(0))
            cells.append(f"{float(share):.0%} exact, {float(gap):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class LabelGroup:
    """The hands carrying one label: their share and the distance of their law from
    uniform and from the plan's law (the law a dealer who follows the light gets)."""

    label: Label
    share: Fraction
    from_uniform: Fraction
    from_plan: Fraction


def label_groups(law: Mapping[tuple[Order, Label], Fraction], n: int,
                 plan: Mapping[Order, Fraction]) -> list[LabelGroup]:
    """:func:`labelled_law` split by label, each group's law conditioned on its label."""
    by_label: dict[Label, dict[Order, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for (order, label), p in law.items():
        by_label[label][order] += p
    groups = []
    for label, orders in by_label.items():
        share = sum(orders.values(), Fraction(0))
        cond = {o: p / share for o, p in orders.items()}
        groups.append(LabelGroup(label, share, total_variation(cond, n), distance(cond, plan)))
    return sorted(groups, key=lambda g: (not g.label.exact, g.label.distance or 2))


def distance(p: Mapping[Order, Fraction], q: Mapping[Order, Fraction]) -> Fraction:
    """Total variation between two laws of orders."""
    return sum((abs(p.get(o, Fraction(0)) - q.get(o, Fraction(0))) for o in {*p, *q}),
               Fraction(0)) / 2


def plan_law(n: int, passes: int, mode: planning.Mode,
             feed: Feed = Feed.TOP) -> dict[Order, Fraction]:
    """The law of the hands of a dealer who follows the light: the plan's law."""
    return orders_law(labelled_law(n, passes, mode, DealerHabit.INSTRUCTED, feed=feed))


def orders_law(law: Mapping[tuple[Order, Label], Fraction]) -> dict[Order, Fraction]:
    """The law of the orders alone, whatever their labels."""
    out: dict[Order, Fraction] = defaultdict(Fraction)
    for (order, _), p in law.items():
        out[order] += p
    return dict(out)
