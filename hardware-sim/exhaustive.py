"""Exact distributions by walking every random choice of the planned-mode sampler.

The sampler makes every choice through ``planning._weighted_index`` and
``planning._uniform_index``; :func:`enumerate_outcomes` replaces both for the
duration of the walk and returns each outcome of ``run()`` with its exact
probability. For small packs only: the walk visits every reachable order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable
from fractions import Fraction
from math import factorial

from shuffler import planning


def enumerate_outcomes(run: Callable[[], Hashable]) -> dict[Hashable, Fraction]:
    outcomes: dict[Hashable, Fraction] = defaultdict(Fraction)
    pending: list[list[int]] = [[]]
    saved = planning._weighted_index, planning._uniform_index
    try:
        while pending:
            script = pending.pop()
            taken: list[int] = []
            prob = [Fraction(1)]

            def pick(weights, rng, script=script, taken=taken, prob=prob):
                i = len(taken)
                if i < len(script):
                    choice = script[i]
                else:
                    live = [j for j, w in enumerate(weights) if w]
                    choice = live[0]
                    pending.extend([*taken, j] for j in live[1:])
                taken.append(choice)
                prob[0] *= Fraction(weights[choice], sum(weights))
                return choice

            planning._weighted_index = pick
            planning._uniform_index = lambda m, rng, pick=pick: pick([1] * m, rng)
            outcomes[run()] += prob[0]
    finally:
        planning._weighted_index, planning._uniform_index = saved
    assert sum(outcomes.values()) == 1
    return dict(outcomes)


def total_variation(outcomes: dict[Hashable, Fraction], n: int) -> Fraction:
    """Distance from uniform over all n! orders."""
    u = Fraction(1, factorial(n))
    seen = sum((abs(p - u) for p in outcomes.values()), Fraction(0))
    return (seen + u * (factorial(n) - len(outcomes))) / 2
