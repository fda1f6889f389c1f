"""The guessing columns: exact, and equal to the best guesser found by other means.

Three independent routes to the same number: brute force over every order of
n ≤ 8 cards (the best guess at each prefix, from the exact law of the order),
dynamic programming over (cards left, rank of the last card among them,
descents so far) for 24 and 52 cards, and the closed sums of
:func:`shuffler.core.mixing.guessing_row` that the CLI uses.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb, factorial

import pytest

from shuffler.core.mixing import (
    eulerian_row,
    guesses_coin,
    guesses_planned,
    guessing_row,
    harmonic,
)
from shuffler.core.stats import ascending_runs, guess_score

pytestmark = pytest.mark.slow


def coin_law(n, k):
    return lambda descents: comb(2**k + n - 1 - descents, n)  # ∝ P(order)


def planned_law(n, k):
    return lambda descents: int(descents < 2**k)  # uniform over at most 2^k runs


def brute_force_best(n, weight) -> Fraction:
    """The best guesser's expected score, by walking every prefix of every order."""

    def walk(prefix: tuple[int, ...], descents: int) -> tuple[int, int]:
        """(total weight below this prefix, weighted sum of the best guesser's scores)."""
        if len(prefix) == n:
            return weight(descents), 0
        children = [walk((*prefix, c), descents + (bool(prefix) and c < prefix[-1]))
                    for c in range(n) if c not in prefix]
        return (sum(w for w, _ in children),
                max(w for w, _ in children) + sum(s for _, s in children))

    total, score = walk((), 0)
    return Fraction(score, total)


def dynamic_best(n, weight) -> Fraction:
    """The best guesser's expected score when P(order) depends only on its descents.

    State: m cards unseen, j of them below the last card shown, d descents so far.
    Z is the total weight of the completions, G the weighted score of the best guesser.
    """
    top = n + 1
    z = [[weight(d) if d < n else 0 for d in range(top + 1)]]  # m = 0: only j = 0
    g = [[0] * (top + 1)]
    for m in range(1, n + 1):
        zn = [[0] * (top + 1) for _ in range(m + 1)]
        gn = [[0] * (top + 1) for _ in range(m + 1)]
        for d in range(top):
            # the next card x (rank 1..m among the unseen): a descent when x <= j
            lo = [z[x][d + 1] for x in range(m)]
            hi = [z[x][d] for x in range(m)]
            glo = [g[x][d + 1] for x in range(m)]
            ghi = [g[x][d] for x in range(m)]
            zs, gs = sum(hi), sum(ghi)
            lo_max, hi_max = [0] * (m + 1), [0] * (m + 1)
            for j in range(1, m + 1):
                lo_max[j] = max(lo_max[j - 1], lo[j - 1])
            for j in range(m - 1, -1, -1):
                hi_max[j] = max(hi_max[j + 1], hi[j])
            for j in range(m + 1):
                zn[j][d] = zs
                gn[j][d] = gs + max(lo_max[j], hi_max[j])
                if j < m:
                    zs += lo[j] - hi[j]
                    gs += glo[j] - ghi[j]
        z, g = zn, gn
    return Fraction(g[0][0], z[0][0])


@pytest.mark.parametrize("n", range(1, 8))
def test_the_score_table_is_the_rising_sequence_guessers_total(n):
    totals = [0] * (n + 1)
    for order in itertools.permutations(range(n)):
        totals[ascending_runs(order)] += guess_score(order)
    assert list(guessing_row(n)) == totals
    assert sum(guessing_row(n)) == factorial(n) * harmonic(n)  # a random pack: H_n


@pytest.mark.parametrize("n", range(1, 9))
def test_exact_scores_equal_the_best_guesser_by_brute_force(n):
    for k in (1, 2, 3):
        assert guesses_coin(n, k) == brute_force_best(n, coin_law(n, k)), k
        if 2**k < n:
            assert guesses_planned(n, k) == brute_force_best(n, planned_law(n, k)), k
        else:
            assert guesses_planned(n, k) == harmonic(n)


@pytest.mark.parametrize(("n", "coin", "planned"), [(24, range(1, 11), range(1, 5)),
                                                    (52, (3, 7), (2, 5))])
def test_exact_scores_equal_the_best_guesser_by_dynamic_programming(n, coin, planned):
    for k in coin:
        assert guesses_coin(n, k) == dynamic_best(n, coin_law(n, k)), k
    for k in planned:
        assert guesses_planned(n, k) == dynamic_best(n, planned_law(n, k)), k


def test_the_figures_the_issue_and_the_reference_give():
    assert float(guesses_coin(24, 3)) == pytest.approx(7.976, abs=5e-4)
    assert float(harmonic(24)) == pytest.approx(3.776, abs=5e-4)
    assert guesses_planned(24, 5) == harmonic(24)  # exactly random
    assert harmonic(24) < guesses_planned(24, 4) < Fraction(3781, 1000)
    # one pass: 3n/4 - 1/4 up to a term of order n 2^-n
    assert abs(guesses_coin(52, 1) - Fraction(3 * 52 - 1, 4)) <= Fraction(52, 2**52)
    # the reference's 52-card column (Monte Carlo, standard error <= 0.03 / 0.012 / 0.004
    # / 0.002 by pass): within three standard errors
    reference = {2: (26.65, .03), 3: (17.17, .03), 4: (10.78, .012), 5: (7.43, .004),
                 6: (5.892, .002), 7: (5.189, .002), 10: (4.616, .002)}
    for k, (value, se) in reference.items():
        assert float(guesses_coin(52, k)) == pytest.approx(value, abs=3 * se), k


def test_scores_fall_towards_h_n_and_never_below():
    for n in (24, 52, 104):
        coin = [guesses_coin(n, k) for k in range(1, 21)]
        assert all(a > b for a, b in itertools.pairwise(coin))
        assert all(c > harmonic(n) for c in coin)
        planned = [guesses_planned(n, k) for k in range(1, 8)]
        assert all(p >= harmonic(n) for p in planned)
        assert planned[-1] == harmonic(n)
    assert sum(eulerian_row(5)) == factorial(5)
