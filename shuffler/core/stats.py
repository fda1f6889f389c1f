"""Statistics of final orders against a uniformly random pack. Pure.

An order is a list of starting positions (0 = top) read top first. The tests:

- **runs**: the number of ascending runs, the sufficient statistic for this
  machine (its law alone gives the total variation); χ² against A(n, r)/n!.
- **positions**: Pearson's χ² of the card × position table against T/n in every
  cell, scaled by (n − 1)/n for the dependence a permutation puts between cells.
- **guesser**: a guesser who knows the starting order and sees each card after
  guessing it names the smallest unseen card above the last one shown (it
  follows rising sequences); on a uniform pack any guesser scores H_n on
  average, so a score above that is evidence of order. After coin or planned
  passes no guesser does better (``shuffler.core.mixing.guessing_row``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

from shuffler.core.mixing import eulerian_row, harmonic

#: each test's share of the battery's level: a test fails a truly random pack at most
#: this often (measured at every size, tests/test_calibration.py)
ALPHA = 0.01
#: a test fails when its p-value is below this, half its share: the χ² and normal laws the
#: p-values come from are approximations, and at 1% the tests measured up to 1.4% (the runs
#: test, 52 and 104 cards, 500 hands); at 0.5% every test measured 0.2–0.75% at 3 to 104
#: cards from its fewest hands to 500 (docs/mixing.md, "The battery's level")
TEST_ALPHA = 0.005


def battery_level(tests: int) -> float:
    """The most often the battery fails a truly random pack when it fails on any one of
    ``tests`` tests, whatever their dependence: each fails at most :data:`ALPHA` of the
    time, so the union bound gives m·α (3% for three tests, 5% for five)."""
    return tests * ALPHA


def ascending_runs(order: Sequence[int]) -> int:
    return 1 + sum(b < a for a, b in itertools.pairwise(order))


# -- distributions ------------------------------------------------------------------

def _gamma_q(s: float, x: float) -> float:
    """Regularized upper incomplete gamma Q(s, x) (Numerical Recipes' series / fraction)."""
    if x <= 0:
        return 1.0
    lg = math.lgamma(s)
    if x < s + 1:
        term = total = 1.0 / s
        a = s
        for _ in range(10_000):
            a += 1
            term *= x / a
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-x + s * math.log(x) - lg))
    b = x + 1 - s
    c, d = 1e300, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - s)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return min(1.0, math.exp(-x + s * math.log(x) - lg) * h)


def chi2_sf(x: float, df: int) -> float:
    """P(χ²_df ≥ x)."""
    return _gamma_q(df / 2, x / 2)


def normal_sf2(z: float) -> float:
    """Two-sided normal p-value."""
    return math.erfc(abs(z) / math.sqrt(2))


#: no z-test is taken on fewer hands than this (the normal law is too coarse below it)
MIN_MEAN_HANDS = 20
#: two cards: every test counts one Binomial(T, ½) (which of the two orders came up), whose
#: exact level at 1% lies within 0.52–1.46% from 23 hands on and dips to 0.43% at 22 (0.20%
#: at 10); every test on two cards is taken from this many hands (tests/test_calibration.py
#: computes those levels exactly)
TWO_CARD_MIN_HANDS = 23


def min_hands(name: str, n: int) -> int:
    """The fewest hands the test ``name`` is taken on for ``n`` cards (fewer: it says so)."""
    if n == 2:
        return TWO_CARD_MIN_HANDS
    return {"runs": runs_min_hands(n), "positions": 5 * n}.get(name, MIN_MEAN_HANDS)


def too_few(name: str, needed: int, df: int | None = None) -> TestResult:
    """A test that was not taken: too few hands for it to reach its level (it says so
    rather than pass in silence; ``passed`` is None: not tested)."""
    return TestResult(name, 0.0, df, 1.0, {"enough_hands": False, "min_hands": needed})


@dataclass(frozen=True)
class TestResult:
    name: str
    statistic: float
    df: int | None
    p: float
    detail: dict

    @property
    def taken(self) -> bool:
        return self.detail.get("enough_hands") is not False

    @property
    def passed(self) -> bool | None:
        """True or False by its p-value; None when it was not taken (too few hands)."""
        return self.p >= TEST_ALPHA if self.taken else None

    def to_dict(self) -> dict:
        return {"name": self.name, "statistic": self.statistic, "df": self.df, "p": self.p,
                "passed": self.passed, **self.detail}


def chi2_binned(observed: Sequence[int], expected: Sequence[float]) -> tuple[float, int]:
    """χ² with neighbouring bins merged until each expects at least 5."""
    bins: list[tuple[float, float]] = []
    o_acc = e_acc = 0.0
    for o, e in zip(observed, expected, strict=True):
        o_acc += o
        e_acc += e
        if e_acc >= 5:
            bins.append((o_acc, e_acc))
            o_acc = e_acc = 0.0
    if bins and e_acc:
        o_last, e_last = bins.pop()
        bins.append((o_last + o_acc, e_last + e_acc))
    stat = sum((o - e) ** 2 / e for o, e in bins)
    return stat, max(len(bins) - 1, 1)


@cache
def uniform_runs_law(n: int) -> tuple[float, ...]:
    total = math.factorial(n)
    return tuple(float(Fraction(a, total)) for a in eulerian_row(n))


def _bins(law: Sequence[float], trials: int) -> int:
    return chi2_binned([0] * len(law), [p * trials for p in law])[1] + 1


@cache
def runs_min_hands(n: int) -> int:
    """The fewest hands the runs test is taken on: the merged bins must number three
    (two for two cards, whose runs law has two values), and hands at least
    :data:`MIN_MEAN_HANDS`; fewer, and the binned χ² never rejects (10 hands of 5 cards)."""
    law = uniform_runs_law(n)
    want = min(3, sum(1 for p in law if p))
    trials = MIN_MEAN_HANDS
    while _bins(law, trials) < want:
        trials += 1
    return trials


def runs_test(runs: Sequence[int], n: int) -> TestResult:
    """χ² of the runs histogram against a uniform pack's law."""
    trials = len(runs)
    if n > 1 and trials < min_hands("runs", n):
        return too_few("runs", min_hands("runs", n))
    hist = [0] * (n + 1)
    for r in runs:
        hist[r] += 1
    law = uniform_runs_law(n)
    expected = [p * trials for p in law]
    stat, df = chi2_binned(hist, expected)
    mean = sum(runs) / trials
    # the distance between the runs laws is at most the distance between the orders' laws:
    # its estimate is a lower bound on the true distance, up to sampling noise
    runs_distance = sum(abs(h / trials - p) for h, p in zip(hist, law, strict=True)) / 2
    return TestResult("runs", stat, df, chi2_sf(stat, df),
                      {"mean": mean, "uniform_mean": (n + 1) / 2, "runs_distance": runs_distance,
                       "histogram": hist})


def guess_score(order: Sequence[int]) -> int:
    """Cards named by the rising-sequence guesser with feedback (see the module notes).

    ``above[c]`` leads to the smallest unseen card at or above c (n: none), with the
    path halved as it is followed, so a hand costs O(n α(n)), not O(n²)."""
    n = len(order)
    above = list(range(n + 1))

    def find(c: int) -> int:
        while above[c] != c:
            above[c] = above[above[c]]
            c = above[c]
        return c

    last = -1
    score = 0
    for card in order:
        guess = find(last + 1)
        if guess == n:  # nothing unseen above the last card: the lowest unseen one
            guess = find(0)
        score += guess == card
        above[card] = card + 1
        last = card
    return score


def guesser_test(scores: Sequence[int], n: int) -> TestResult:
    """Mean score against H_n; on a uniform pack the score's variance is Σ (1/i)(1 − 1/i)."""
    trials = len(scores)
    if n > 1 and trials < min_hands("guesser", n):
        return too_few("guesser", min_hands("guesser", n))
    mean = sum(scores) / trials
    h = float(harmonic(n))
    var = sum((1 / i) * (1 - 1 / i) for i in range(1, n + 1))
    # no continuity correction: it held the level of a small pack's whole-number scores
    # at 0.25-0.8% (two cards); without it the exact level is within 0.5-1.5% from the
    # fewest hands the test takes, two cards up (tests/test_calibration.py)
    gap = abs(sum(scores) - trials * h)
    z = math.copysign(gap, mean - h) / math.sqrt(var * trials) if var > 0 else 0.0
    spread = sum((s - mean) ** 2 for s in scores) / max(trials - 1, 1)
    return TestResult("guesser", z, None, normal_sf2(z),
                      {"mean": mean, "standard_error": math.sqrt(spread / trials),
                       "uniform_mean": h})


def mean_test(name: str, values: Sequence[float], mean0: float, var0: float) -> TestResult:
    """z-test of a mean against its value on a uniform pack."""
    trials = len(values)
    mean = sum(values) / trials
    z = (mean - mean0) / math.sqrt(var0 / trials) if var0 > 0 else 0.0
    return TestResult(name, z, None, normal_sf2(z), {"mean": mean, "uniform_mean": mean0})


#: the confidence of each lower bound :meth:`Battery.measured_distance` takes the largest of
MEASURE_CONFIDENCE = 0.999
#: packs of up to this many cards also have their whole order counted (8! = 40,320 cells)
WHOLE_ORDER_CARDS = 8


def distance_at_least(counts: Sequence[int], law: Sequence[float],
                      confidence: float = MEASURE_CONFIDENCE) -> float:
    """A lower confidence bound on the distance of a statistic's true law from ``law``
    (its law on a random pack), from ``counts`` of it over T hands.

    The sampled law P̂ is within TV(P̂, P) of the true one; E TV(P̂, P) ≤ ½·√(m/T) for m
    cells (Cauchy–Schwarz), and one hand moves TV(P̂, P) by at most 1/T, so it exceeds
    that by t with chance at most exp(−2Tt²) (McDiarmid). The distance of a statistic's
    law is at most the distance of the orders' law, so this bounds that from below too.
    """
    trials = sum(counts)
    if not trials:
        return 0.0
    sampled = sum(abs(c / trials - p) for c, p in zip(counts, law, strict=True)) / 2
    noise = 0.5 * math.sqrt(len(counts) / trials) + math.sqrt(
        math.log(1 / (1 - confidence)) / (2 * trials))
    return max(0.0, sampled - noise)


class Battery:
    """Streams final orders in and gives every test at the end (memory O(n²), not O(T·n)).

    ``reading`` maps an order to the one whose runs are counted (undoing a pile
    reversal). Passing ``groups`` (a block label per starting position, e.g. the
    previous hand's tricks) and ``suits`` (per starting position) to :meth:`add`
    adds the euchre tests.
    """

    def __init__(self, n: int, reading=None) -> None:
        self.n = n
        self.reading = reading or (lambda order: order)
        self.table = [[0] * n for _ in range(n)]
        self.runs: list[int] = []
        self.scores: list[int] = []
        self.mates: list[float] = []
        self.same_suit: list[float] = []
        self.whole: dict[tuple[int, ...], int] | None = {} if n <= WHOLE_ORDER_CARDS else None

    def add(self, order: Sequence[int], groups: Sequence[int] | None = None,
            suits: Sequence[object] | None = None) -> None:
        table = self.table
        for pos, card in enumerate(order):
            table[card][pos] += 1
        if self.whole is not None:
            key = tuple(order)
            self.whole[key] = self.whole.get(key, 0) + 1
        read = self.reading(order)
        self.runs.append(ascending_runs(read))
        self.scores.append(guess_score(read))
        # each is recorded as the excess over its expectation on a uniform pack
        if groups is not None:
            self.mates.append(_adjacent_alike(order, groups) - _pairs_adjacent(groups, self.n))
        if suits is not None:
            self.same_suit.append(_adjacent_alike(order, suits) - _pairs_adjacent(suits, self.n))

    def results(self) -> list[TestResult]:
        n, trials = self.n, len(self.runs)
        out = [runs_test(self.runs, n), self.position_result(trials), guesser_test(self.scores, n)]
        if self.mates:
            out.append(_excess_test("trick-mates adjacent", self.mates))
        if self.same_suit:
            out.append(_excess_test("same-suit neighbours", self.same_suit))
        return out

    def measured_distance(self) -> float:
        """How far from random the packs are at least, by what they show: the largest of
        the lower bounds (:func:`distance_at_least`) for the top card, the bottom card,
        the runs and, up to :data:`WHOLE_ORDER_CARDS` cards, the whole order; each holds
        with confidence :data:`MEASURE_CONFIDENCE`."""
        n, trials = self.n, len(self.runs)
        if not trials:
            return 0.0
        card = [1 / n] * n
        hist = [0] * (n + 1)
        for r in self.runs:
            hist[r] += 1
        bounds = [distance_at_least([row[0] for row in self.table], card),
                  distance_at_least([row[-1] for row in self.table], card),
                  distance_at_least(hist, uniform_runs_law(n))]
        if self.whole is not None:
            cells = math.factorial(n)
            seen = list(self.whole.values())
            seen += [0] * (cells - len(seen))
            bounds.append(distance_at_least(seen, [1 / cells] * cells))
        return max(bounds)

    def position_result(self, trials: int) -> TestResult:
        """Pearson's sum over the n × n cells, scaled by (n − 1)/n.

        Each hand adds a permutation matrix, whose cells covary: on a uniform
        pack the plain sum Σ (o − e)²/e averages n(n − 1), and it is (n − 1)/n
        times that sum that is asymptotically χ² with (n − 1)² degrees of freedom.
        """
        n = self.n
        if n == 1 or trials == 0:
            return TestResult("positions", 0.0, 0, 1.0, {"cells": n * n})
        if trials < min_hands("positions", n):  # every cell expects five hands at least
            return too_few("positions", min_hands("positions", n), (n - 1) ** 2)
        e = trials / n
        pearson = sum((o - e) ** 2 for row in self.table for o in row) / e
        stat = pearson * (n - 1) / n
        df = (n - 1) ** 2
        return TestResult("positions", stat, df, chi2_sf(stat, df), {"cells": n * n})


def verdict(results: Sequence[TestResult]) -> bool | None:
    """The battery's: False when a test failed, True when every test was taken and
    passed, None when none failed but one was not taken (no pass without a test)."""
    if any(r.passed is False for r in results):
        return False
    return True if all(r.taken for r in results) else None


def hands_short(results: Sequence[TestResult], trials: int) -> int:
    """How many more hands the battery needs before every test is taken."""
    return max([r.detail["min_hands"] - trials for r in results if not r.taken] or [0])


def _adjacent_alike(order: Sequence[int], labels: Sequence[object]) -> int:
    return sum(labels[a] == labels[b] for a, b in itertools.pairwise(order))


def _pairs_adjacent(labels: Sequence[object], n: int) -> float:
    """Expected adjacent pairs sharing a label on a uniform pack: each pair is adjacent
    with probability 2/n."""
    counts: dict[object, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return sum(c * (c - 1) / 2 for c in counts.values()) * 2 / n


def _excess_test(name: str, excess: Sequence[float]) -> TestResult:
    """z-test that the mean excess over the uniform expectation is zero."""
    trials = len(excess)
    if trials < MIN_MEAN_HANDS:
        return too_few(name, MIN_MEAN_HANDS)
    mean = sum(excess) / trials
    var = sum((v - mean) ** 2 for v in excess) / max(trials - 1, 1)
    result = mean_test(name, excess, 0.0, var)
    return TestResult(name, result.statistic, None, result.p, {"mean_excess": mean})
