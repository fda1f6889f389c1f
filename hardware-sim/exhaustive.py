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
from shuffler.core.labels import Label, hand_label
from shuffler.core.mechanics import Feed, Pile

from .dealer import DealerHabit
from .study import Imperfections, deal_with_doubles, play_hand, verdict_of

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


def habit_distances(n: int, passes: int, mode: planning.Mode, habit: DealerHabit,
                    feed: Feed = Feed.TOP) -> tuple[Fraction, Fraction | None, bool]:
    """A dealer with ``habit`` on every hand of ``passes`` passes of n cards, by exhaustion
    over every draw (the planner's, the coins, the dealer's own): the true distance of
    the final order from uniform, the largest distance the controller reported on any
    hand (None: some hand said "unknown"), and whether every hand was reported exact."""
    reported: set[tuple[Fraction | None, bool]] = set()
    flaws = Imperfections(habit=habit, listens=False)  # who corrects: labelled_law

    def run(rng: ScriptedRandom) -> Order:
        order, planner = play_hand(n, passes, mode, rng, feed, flaws)  # type: ignore[arg-type]
        reported.add((planner.distance(n, passes), planner.exact))
        return tuple(order)

    true = total_variation(enumerate_outcomes(run, scripted_rng=True), n)
    known = [d for d, _ in reported if d is not None]
    worst = max(known) if len(known) == len(reported) else None
    return true, worst, all(e for _, e in reported)


#: the cases of docs/mixing.md's habit table: (mode, cards, passes)
HABIT_TABLE_CASES = ((planning.Mode.PLANNED, 5, 2), (planning.Mode.PLANNED, 5, 3),
                     (planning.Mode.PLANNED, 6, 3), (planning.Mode.PLANNED, 7, 3),
                     (planning.Mode.COIN, 5, 2))


def habit_walkable(mode: planning.Mode, passes: int, habit: DealerHabit) -> bool:
    """Whether :func:`habit_distances` finishes in seconds: ``both`` re-plans from an
    unknown order on every pass, which is too many draws to walk beyond two passes."""
    return habit is not DealerHabit.BOTH or passes < 3 or mode is planning.Mode.COIN


def habit_table(distances: Callable[[planning.Mode, int, int, DealerHabit],
                                    tuple[Fraction, Fraction | None, bool]]) -> str:
    """docs/mixing.md's table of habits: for each case the true distance and the largest
    the controller reported (``exact`` when every hand said exact), by exhaustion."""
    head = ["dealer"] + [f"{m.value} {n} cards, {k} passes" for m, n, k in HABIT_TABLE_CASES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for habit in DealerHabit:
        cells = [f"`{habit.value}`"]
        for mode, n, k in HABIT_TABLE_CASES:
            if not habit_walkable(mode, k, habit):
                cells.append("(not walked)")
                continue
            true, worst, exact = distances(mode, n, k, habit)
            said = "unknown" if worst is None else f"{float(worst):.3f}"
            cells.append(f"{float(true):.3f} / {said}{' exact' if exact else ''}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def labelled_law(n: int, passes: int, mode: planning.Mode, habit: DealerHabit, *,
                 listens: bool = True, pattern: str | None = None,
                 feed: Feed = Feed.TOP) -> dict[tuple[Order, Label], Fraction]:
    """The exact joint law of one hand's final order and its label, by exhaustion over
    every draw (the planner's, the coins, the dealer's): a dealer with ``habit`` who
    corrects when warned (``listens``) or not, on a seat whose watch saw ``pattern``
    (None: a fresh evening; the watch's state before the hand is independent of this
    hand's plan, so these two cases are every hand of an evening)."""
    return labelled_laws(n, passes, mode, habit, listens=listens, patterns=(pattern,),
                         feed=feed)[pattern]


def labelled_laws(n: int, passes: int, mode: planning.Mode, habit: DealerHabit, *,
                  listens: bool = True, patterns: tuple[str | None, ...] = (None,),
                  feed: Feed = Feed.TOP) -> dict[str | None, dict[tuple[Order, Label], Fraction]]:
    """:func:`labelled_law` for each of ``patterns`` from one walk: the watch is not
    told to the dealer, so the hands are the same and only their labels differ."""
    flaws = Imperfections(habit=habit, listens=listens)

    def run(rng: ScriptedRandom) -> tuple[Order, tuple[Label, ...]]:
        order, planner = play_hand(n, passes, mode, rng, feed, flaws)  # type: ignore[arg-type]
        verdict = verdict_of(planner, n, passes)  # the same for every pattern
        return tuple(order), tuple(hand_label(*verdict, p) for p in patterns)

    laws: dict[str | None, dict[tuple[Order, Label], Fraction]] = {
        p: defaultdict(Fraction) for p in patterns}
    for (order, labels), prob in enumerate_outcomes(run, scripted_rng=True).items():
        for p, label in zip(patterns, labels, strict=True):
            laws[p][order, label] += prob
    return {p: dict(law) for p, law in laws.items()}


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
