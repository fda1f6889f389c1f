"""The exact maths against the published and reference figures."""

from fractions import Fraction

import pytest

from shuffler.core.mixing import (
    distance_table,
    eulerian_row,
    expected_runs_coin,
    harmonic,
    reachable,
    recommend,
    runs_law,
    separation_coin,
    tv_coin,
    tv_planned,
)

# Bayer & Diaconis (1992), 52 cards, k = 1..10
PUBLISHED_52 = [1.000, 1.000, 1.000, 1.000, .924, .614, .334, .167, .085, .043]


def test_tv_reproduces_the_published_52_card_table():
    assert [round(float(tv_coin(52, k)), 3) for k in range(1, 11)] == PUBLISHED_52


@pytest.mark.parametrize(("n", "column"), [
    (24, [1.0, 1.0, .9979, .7225, .4177, .2112, .1092, .0551, .0276, .0138, .0069, .0035]),
    (32, [1.0, 1.0, 1.0, .9289, .5970, .3216, .1638, .0835, .0420, .0210, .0105, .0053]),
    (104, [1.0, 1.0, 1.0, 1.0, 1.0, .9877, .7718, .4538, .2373, .1187, .0600, .0301]),
])
def test_tv_matches_the_reference_table(n, column):
    assert [round(float(tv_coin(n, k)), 4) for k in range(1, 13)] == column


def test_tv_is_exact_for_large_k():
    # the deficit is tiny but exactly positive, and shrinks by about half a pass
    t29, t30 = tv_coin(104, 29), tv_coin(104, 30)
    assert isinstance(t30, Fraction) and 0 < t30 < t29
    assert t29 / t30 == pytest.approx(2, rel=1e-3)


@pytest.mark.parametrize(("n", "k", "expected"), [
    (24, 3, .998), (24, 4, .0021), (52, 5, .0019), (104, 6, 2.0e-5)])
def test_tvmin_matches_the_reference(n, k, expected):
    assert float(tv_planned(n, k)) == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize(("n", "k"), [(24, 5), (32, 5), (52, 6), (104, 7)])
def test_planned_passes_reach_exactly_random_at_log2_n(n, k):
    assert tv_planned(n, k) == 0 and tv_planned(n, k - 1) > 0


def test_eulerian_numbers():
    assert eulerian_row(4) == (0, 1, 11, 11, 1)
    assert sum(eulerian_row(10)) == 3628800
    assert reachable(5, 1) == 1 + 26  # one pass: at most two runs


def test_the_runs_law_gives_the_expected_runs_in_the_reference():
    assert float(expected_runs_coin(52, 7)) == pytest.approx(24.710, abs=5e-4)
    assert float(expected_runs_coin(24, 4)) == pytest.approx(9.474, abs=5e-4)
    assert sum(runs_law(32, 5)) == 1


def test_separation():
    assert float(separation_coin(52, 11)) == pytest.approx(0.479, abs=5e-3)  # sep < .5 at 11
    assert separation_coin(24, 4) == 1  # 2^k < n


def test_harmonic_is_the_random_deck_guessing_score():
    assert float(harmonic(52)) == pytest.approx(4.538, abs=5e-4)


def test_recommendations_match_the_passes_needed_table():
    assert recommend(24) == {"coin": 11, "planned": 4}  # TVmin(24, 4) = .0021
    assert recommend(104) == {"coin": 14, "planned": 6}  # 2e-5 at 6; exactly 0 at 7
    assert recommend(52, 0.1) == {"coin": 9, "planned": 5}


def test_the_table_has_a_row_per_pass():
    rows = distance_table(24, range(1, 6))
    assert [r["passes"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[-1]["planned_tv"] == 0.0


@pytest.mark.parametrize("bad", [(0, 1), (105, 1), (24, -1), (24, 31)])
def test_bad_arguments(bad):
    with pytest.raises(ValueError):
        tv_coin(*bad)
