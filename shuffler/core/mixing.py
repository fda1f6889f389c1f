"""How random the pack is after k passes: exact, in integers and fractions.

A coin-flip pass is an inverse Gilbert–Shannon–Reeds riffle, so k passes are
exactly as far from random as k riffle shuffles (Bayer & Diaconis 1992). The
probability of a final order depends only on r, its number of ascending runs
read as starting positions: P = C(2^k + n − r, n) / 2^(k·n). Planned passes
reach the best any two-pile machine can: uniform over every order with at most
2^k runs.

    >>> float(round(tv_coin(52, 7), 4))
    0.3341
    >>> tv_planned(24, 5)
    Fraction(0, 1)
    >>> recommend(24, 0.01)
    {'coin': 11, 'planned': 4}
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from math import comb, factorial

from shuffler.core.cards import check_card_count

MAX_PASSES = 30


@cache
def eulerian_row(n: int) -> tuple[int, ...]:
    """A(n, r) for r = 0..n: permutations of n with exactly r ascending runs (A(n, 0) = 0)."""
    if n == 0:
        return (1,)
    prev = eulerian_row(n - 1)
    row = [0] * (n + 1)
    for r in range(1, n + 1):
        keep = r * prev[r] if r < len(prev) else 0
        grow = (n - r + 1) * prev[r - 1] if r >= 1 else 0
        row[r] = keep + grow
    return tuple(row)


def _check(n: int, k: int) -> None:
    check_card_count(n)
    if not isinstance(k, int) or not 0 <= k <= MAX_PASSES:
        raise ValueError(f"passes: expected 0 to {MAX_PASSES}, got {k!r}")


def runs_law(n: int, k: int) -> list[Fraction]:
    """P(R = r) for r = 0..n after k coin passes from a known order."""
    _check(n, k)
    a = 2**k
    total = a**n
    return [Fraction(eulerian_row(n)[r] * comb(a + n - r, n), total) if r else Fraction(0)
            for r in range(n + 1)]


def tv_coin(n: int, k: int) -> Fraction:
    """Total variation distance from uniform after k coin passes (exact)."""
    _check(n, k)
    a = 2**k
    nf, an = factorial(n), a**n
    # each term |C(a+n-r, n)/a^n - 1/n!| scaled by a^n·n! to stay in integers
    s = sum(A * abs(comb(a + n - r, n) * nf - an)
            for r, A in enumerate(eulerian_row(n)) if r)
    return Fraction(s, 2 * an * nf)


def reachable(n: int, k: int) -> int:
    """How many orders k passes of a two-pile machine can reach: those with ≤ 2^k runs."""
    _check(n, k)
    return sum(eulerian_row(n)[1:min(n, 2**k) + 1])


def tv_planned(n: int, k: int) -> Fraction:
    """TVmin(n, k): the distance of planned passes, the best any two-pile machine can do."""
    return 1 - Fraction(reachable(n, k), factorial(n))


def tv_any(n: int) -> Fraction:
    """The distance no law of n cards exceeds, 1 − 1/n!: the bound of last resort, for
    what nothing better is proven about (its most likely order has at least 1/n!)."""
    check_card_count(n)
    return 1 - Fraction(1, factorial(n))


def separation_coin(n: int, k: int) -> Fraction:
    """Separation distance after k coin passes: 1 − ∏(1 − i/2^k)."""
    _check(n, k)
    a = 2**k
    prod = Fraction(1)
    for i in range(1, n):
        prod *= Fraction(a - i, a) if i < a else 0
    return 1 - prod


def expected_runs_coin(n: int, k: int) -> Fraction:
    return sum((r * p for r, p in enumerate(runs_law(n, k))), Fraction(0))


def harmonic(n: int) -> Fraction:
    """H_n: the cards a guesser names, on average, from a uniformly random pack with feedback."""
    return sum((Fraction(1, i) for i in range(1, n + 1)), Fraction(0))


@cache
def _binomials_over(n: int) -> tuple[int, ...]:
    """C(n + m, n) for m = 0..n − 1."""
    out, c = [], 1
    for m in range(n):
        out.append(c)
        c = c * (n + m + 1) // (m + 1)
    return tuple(out)


@cache
def guessing_row(n: int) -> tuple[int, ...]:
    """S(n, r) for r = 0..n: the cards the rising-sequence guesser names, summed over
    every order of n cards with exactly r ascending runs.

    The guesser knows the starting order, sees each card after naming it, and names
    the smallest unseen card above the last one shown (the smallest unseen card if
    none is above). With labels 1..a as in an inverse a-shuffle, counting the label
    assignments on which each guess is right gives a polynomial of degree n,
    P(a) = a^n + Σ_{A=1..a} Σ_{g=1..n−1} (n − g) A^(n−1−g) Σ_{β<A} β^(g−1),
    equal to Σ_r S(n, r) C(a + n − r, n); its values at a = 1..n give S(n, ·) by
    forward substitution. On laws that depend only on the runs (coin and planned
    passes) this guesser is optimal: tests/test_guessing.py checks it against the
    best guesser by brute force (n ≤ 8) and by dynamic programming (24 and 52 cards).
    """
    check_card_count(n)
    sums = [0] * max(n - 1, 1)  # sums[m] = Σ_{β<A} β^m (0^0 = 1)
    values = []  # P(a) for a = 1..n
    acc = 0  # Σ_{A ≤ a} u(A)
    for a in range(1, n + 1):
        power = 1
        for m in range(n - 1):  # add β = a − 1
            sums[m] += power
            power *= a - 1
        u = 0
        for j in range(n - 1):  # Horner in a: Σ_j (n − 1 − j) a^(n−2−j) sums[j]
            u = u * a + (n - 1 - j) * sums[j]
        acc += u
        values.append(a**n + acc)
    binom = _binomials_over(n)  # C(a + n − r, n) = binom[a − r]
    row = [0] * (n + 1)
    for a in range(1, n + 1):
        row[a] = values[a - 1] - sum(row[r] * binom[a - r] for r in range(1, a))
    return tuple(row)


def guesses_coin(n: int, k: int) -> Fraction:
    """The optimal guesser's expected score after k coin passes (exact)."""
    _check(n, k)
    a = 2**k
    row = guessing_row(n)
    total, c = 0, comb(a + n - 1, n)  # C(a + n − r, n) for r = 1, 2, ...
    for r in range(1, min(n, a) + 1):
        total += row[r] * c
        c = c * (a - r) // (a + n - r)
    return Fraction(total, a**n)


def guesses_planned(n: int, k: int) -> Fraction:
    """The optimal guesser's expected score after k planned passes (exact): uniform
    over the orders with at most 2^k runs; H_n once 2^k ≥ n."""
    _check(n, k)
    top = min(n, 2**k)
    return Fraction(sum(guessing_row(n)[1:top + 1]), sum(eulerian_row(n)[1:top + 1]))


def passes_needed(n: int, target: float, mode: str = "coin") -> int | None:
    """The fewest passes whose distance is below ``target`` (None beyond MAX_PASSES)."""
    check_card_count(n)
    tv = tv_coin if mode == "coin" else tv_planned
    goal = Fraction(target)
    for k in range(MAX_PASSES + 1):
        if tv(n, k) < goal or (goal == 0 and tv(n, k) == 0):
            return k
    return None


def recommend(n: int, target: float = 0.01) -> dict[str, int | None]:
    """Passes to reach ``target`` total variation, for each mode."""
    return {mode: passes_needed(n, target, mode) for mode in ("coin", "planned")}


def distance_table(n: int, passes: range) -> list[dict[str, float | int]]:
    """Rows of the mixing table: passes, coin TV, planned TV, separation."""
    return [{"passes": k, "coin_tv": float(tv_coin(n, k)), "planned_tv": float(tv_planned(n, k)),
             "coin_separation": float(separation_coin(n, k))} for k in passes]
