"""The statistical battery: a correct planned machine passes, coin flips visibly fail.

Seeds are fixed, so these give the same answer every run; a test fails at
the battery's own threshold (p below TEST_ALPHA).
"""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from hardware_sim.study import Imperfections, deal_with_doubles, reading_order, simulate_hand
from shuffler.core.mechanics import Feed, Pile, deal_pass
from shuffler.core.planning import Mode, default_passes
from shuffler.core.stats import Battery, ascending_runs, chi2_sf, guess_score
from shuffler_cli.main import cli

pytestmark = pytest.mark.slow


def battery(n, k, mode, trials, seed, feed=Feed.TOP, flaws=None):
    rng = random.Random(seed)
    b = Battery(n, lambda o: reading_order(o, k, feed))
    for _ in range(trials):
        b.add(simulate_hand(n, k, mode, rng, feed, flaws))
    return {r.name: r for r in b.results()}


@pytest.mark.parametrize(("n", "trials"), [(24, 6000), (32, 4000), (52, 1500), (104, 520)])
def test_planned_passes_at_log2_n_pass_the_battery_and_coin_flips_fail_it(n, trials):
    k = (n - 1).bit_length()
    planned = battery(n, k, Mode.PLANNED, trials, seed=n)
    assert all(r.passed is True for r in planned.values()), {r.name: r.p for r in planned.values()}
    coin = battery(n, k, Mode.COIN, trials, seed=n)
    assert coin["runs"].p < 1e-6  # the runs statistic sees coin flips at once


def test_an_unseen_stacking_costs_what_the_report_says():
    # both piles lifted at once on every pass of 24 cards / 5 passes: the runs test fails
    flaws = Imperfections(unseen_stack_rate=1.0)
    result = battery(24, 5, Mode.PLANNED, 4000, seed=3, flaws=flaws)
    assert result["runs"].p < 1e-6


def test_deal_with_doubles_moves_two_cards_as_one():
    pack = list(range(6))
    labels = [0, 1, 0, 1, 0]  # five counted: card 1 drags card 2 along
    new, counted = deal_with_doubles(pack, labels, Feed.TOP, Pile.LEFT, {1})
    assert counted == 5 and sorted(new) == pack
    assert new == [5, 3, 0, 4, 2, 1]  # left: 0, 3, 5 -> 5 3 0; right: 1+2, 4 -> 4 2 1
    assert deal_with_doubles(pack, [0, 1] * 3, Feed.TOP, Pile.LEFT, set()) == (
        deal_pass(pack, [0, 1] * 3, Feed.TOP, Pile.LEFT), 6)


def test_stats_helpers():
    assert ascending_runs([0, 2, 1, 3]) == 2
    assert chi2_sf(3.841, 1) == pytest.approx(0.05, abs=1e-3)
    assert chi2_sf(0, 5) == 1.0
    assert guess_score(list(range(10))) == 10  # a sorted pack is all rising sequence


def test_simulate_json_and_orders_file(tmp_path):
    orders = tmp_path / "orders.txt"
    result = CliRunner().invoke(cli, ["--json", "simulate", "--cards", "24", "--trials", "200",
                                      "--seed", "5", "--orders", str(orders)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["passes"] == 5 and data["mode"] == "planned" and data["seed"] == 5
    assert {t["name"] for t in data["tests"]} == {"runs", "positions", "guesser"}
    lines = orders.read_text().splitlines()
    assert len(lines) == 400 and set(lines[1::2]) == {"exact"}  # each order, then its label
    assert all(sorted(map(int, line.split(" "))) == list(range(24)) for line in lines[::2])


def test_simulate_from_a_euchre_pack_adds_the_euchre_tests():
    result = CliRunner().invoke(cli, ["--json", "simulate", "--start", "euchre", "--passes",
                                      "2", "--trials", "300", "--seed", "2"])
    data = json.loads(result.stdout)
    names = {t["name"]: t for t in data["tests"]}
    assert names["trick-mates adjacent"]["passed"] is False  # two passes leave tricks together
    assert names["trick-mates adjacent"]["mean_excess"] > 1


def test_simulate_refuses_a_euchre_start_with_another_pack():
    result = CliRunner().invoke(cli, ["simulate", "--start", "euchre", "--cards", "32"])
    assert result.exit_code == 2 and "24-card" in result.stderr


def test_mixing_json_has_the_documented_keys():
    result = CliRunner().invoke(cli, ["--json", "mixing", "--cards", "52", "--passes", "8",
                                      "--trials", "20"])
    data = json.loads(result.stdout)
    assert data["cards"] == 52 and len(data["rows"]) == 8
    assert {"passes", "coin_distance", "planned_distance"} <= set(data["rows"][0])
    assert [round(r["coin_distance"], 3) for r in data["rows"]][4:7] == [0.924, 0.614, 0.334]
    assert data["recommended"] == {"coin": 13, "planned": 5}


def test_mixing_guessing_columns_are_exact_and_do_not_depend_on_trials():
    from shuffler.core.mixing import guesses_coin, guesses_planned

    outputs = {CliRunner().invoke(cli, ["--json", "mixing", "--cards", "24", "--passes", "6",
                                        *extra]).stdout
               for extra in ([], ["--trials", "10"], ["--trials", "100000"])}
    assert len(outputs) == 1
    rows = json.loads(outputs.pop())["rows"]
    assert [r["coin_guesses"] for r in rows] == [float(guesses_coin(24, k)) for k in range(1, 7)]
    assert [r["planned_guesses"] for r in rows] == [
        float(guesses_planned(24, k)) for k in range(1, 7)]
    assert round(rows[2]["coin_guesses"], 3) == 7.976 and rows[3]["planned_guesses"] > 3.776


def test_mixing_prints_distances_below_1_as_below_1():
    out = CliRunner().invoke(cli, ["mixing", "--cards", "24", "--passes", "4"]).stdout
    row2 = next(line for line in out.splitlines() if line.split()[:1] == ["2"])
    assert ">0.9999" in row2 and "1.0000" not in row2  # 1 - 7e-9 is not 1
    assert " 0.9979 " in out


def test_mixing_text_recommends():
    out = CliRunner().invoke(cli, ["mixing", "--passes", "6", "--trials", "20"]).stdout
    assert "below 0.01 (planned): 4 passes" in out and "below 0.01 (coin): 11 passes" in out
    # the default a hand runs comes from the one rule every page quotes
    assert f"a hand runs {default_passes(24)} passes by default" in out


@pytest.mark.parametrize(("n", "k", "feed"), [(24, 3, Feed.TOP), (24, 4, Feed.BOTTOM),
                                              (52, 5, Feed.TOP), (104, 6, Feed.BOTTOM)])
def test_simulated_coin_passes_follow_the_bayer_diaconis_runs_law(n, k, feed):
    """The strongest cheap test of the simulator: its runs histogram against the exact
    law C(2^k + n - r, n) A(n, r) / 2^(kn), after undoing the pile reversal."""
    from shuffler.core.mixing import expected_runs_coin, runs_law
    from shuffler.core.stats import chi2_binned

    rng = random.Random(n * 10 + k)
    trials = 4000
    hist = [0] * (n + 1)
    for _ in range(trials):
        hist[ascending_runs(reading_order(simulate_hand(n, k, Mode.COIN, rng, feed), k, feed))] += 1
    expected = [float(p) * trials for p in runs_law(n, k)]
    stat, df = chi2_binned(hist, expected)
    assert chi2_sf(stat, df) > 0.001
    mean = sum(r * c for r, c in enumerate(hist)) / trials
    assert mean == pytest.approx(float(expected_runs_coin(n, k)), abs=0.15)


def simulate_json(*args):
    result = CliRunner().invoke(cli, ["--json", *args])
    return result.exit_code, (json.loads(result.stdout) if result.stdout else None), result


@pytest.mark.parametrize("passes", [4, 5])
def test_a_dealer_who_always_stacks_the_other_way(passes):
    """24 cards, --sim-dealer other --sim-ignores: the dealer is refused until it stacks as
    the light asks (issue 47), so its hands are the plan's, reported exact, and the battery
    sees nothing (exhaustion for small packs: test_labels.py)."""
    from shuffler.core.mixing import tv_planned

    code, other, _ = simulate_json("--sim-dealer", "other", "--sim-ignores", "simulate",
                                   "--cards", "24", "--passes", str(passes), "--trials", "2000",
                                   "--seed", "1")
    assert code == 0 and other["imperfections"]["dealer"] == "other"
    assert other["reported_exact"] is True and other["exact_share"] == 1
    assert other["reported_distance"] == float(tv_planned(24, passes))
    if passes == 5:
        assert other["passed"], other["tests"]
    _, follows, _ = simulate_json("simulate", "--cards", "24", "--passes", str(passes),
                                  "--trials", "200", "--seed", "1")
    assert follows["reported_distance"] == float(tv_planned(24, passes))
    assert follows["reported_exact"] is True


def test_simulate_honours_the_sim_options_or_refuses_them():
    base = ["simulate", "--cards", "8", "--trials", "300"]
    _, seeded, _ = simulate_json("--sim-seed", "4", *base)
    _, plain, _ = simulate_json(*base, "--seed", "4")
    assert seeded == plain and seeded["seed"] == 4
    code, refused, result = simulate_json("--sim-seed", "4", *base, "--seed", "5")
    assert code == 2 and "--sim-seed" in refused["error"]["message"]  # --json: stdout only
    _, doubled, _ = simulate_json("--sim-fault", "double:2", *base, "--seed", "4",
                                  "--mode", "coin")
    assert doubled["imperfections"]["double_cards"] == [2]
    assert doubled["reported_exact"] is False and doubled["tests"] != plain["tests"]
    for bad in (["--sim-fault", "jam:3"], ["--sim-fault", "battery:6.5"],
                ["--sim-fault", "double:8"]):
        code, refused, result = simulate_json(*bad, *base)
        assert code == 2, (bad, result.output)
        assert bad[0] in refused["error"]["message"] and result.stderr == ""


def test_simulate_takes_one_card():
    code, data, _ = simulate_json("simulate", "--cards", "1", "--trials", "20", "--seed", "1")
    assert code == 0 and data["passed"] and data["distance"] == 0


def test_too_few_hands_is_never_a_pass_in_text_or_json():
    # the case: 3 coin passes of 24 cards are 0.998 from random, and 10 hands take no
    # test; that was "all tests pass at 99%" and passed: true
    base = ("simulate", "--cards", "24", "--passes", "3", "--mode", "coin", "--trials", "10",
            "--seed", "1")
    code, data, _ = simulate_json(*base)
    assert code == 0 and data["passed"] is None
    assert [t["passed"] for t in data["tests"]] == [None, None, None]
    text = CliRunner().invoke(cli, base).output
    assert "pass" not in text.replace("passes", "")
    assert "not tested: 110 more hands needed" in text.splitlines()[-1]
    assert "runs                   not tested: 11 more hands needed" in text
    # some tests taken, one not (positions needs 120): still not a pass
    code, some, _ = simulate_json("simulate", "--cards", "24", "--trials", "30", "--seed", "1")
    assert some["passed"] is None and some["tests"][0]["passed"] is True
    # a failure among the tests taken is a failure, whatever was not taken
    code, failed, _ = simulate_json(*base[:-4], "--trials", "60", "--seed", "1")
    assert failed["passed"] is False and failed["tests"][1]["passed"] is None


def test_the_sim_dealer_choices_are_the_simulators_habits():
    from hardware_sim.dealer import DealerHabit
    from shuffler_cli.options import SIM_DEALERS

    assert [h.value for h in DealerHabit] == SIM_DEALERS


def habit_study(n, k, habit, trials, seed=1):
    """``trials`` simulated hands with ``habit``: the largest distance the controller
    reported (None: unknown), and how far from random the dealt packs are at least."""
    from hardware_sim.dealer import DealerHabit
    from hardware_sim.study import play_hand

    rng = random.Random(seed)
    b = Battery(n, lambda o: reading_order(o, k, Feed.TOP))
    flaws = Imperfections(habit=DealerHabit(habit), listens=False)
    worst = 0.0
    for _ in range(trials):
        order, planner = play_hand(n, k, Mode.PLANNED, rng, Feed.TOP, flaws)
        d = planner.distance(n, k)
        worst = max(worst, 2.0 if d is None else float(d))
        b.add(order)
    return worst, b.measured_distance()


HABITS = ["instructed", "other", "both", "follows-but-last", "taller", "last-card",
          "first-card"]


@pytest.mark.parametrize("habit", HABITS)
@pytest.mark.parametrize(("n", "k", "trials"), [(6, 3, 4000), (7, 3, 4000), (8, 3, 4000),
                                                (24, 4, 1500), (24, 5, 1500)])
def test_no_habit_is_reported_closer_to_random_than_its_packs_measure(habit, n, k, trials):
    worst, measured = habit_study(n, k, habit, trials)
    assert worst >= measured, (worst, measured)


def test_the_24_card_statistics_see_the_last_card_dealer():
    # the default hand, a dealer who puts the pile the last card fell on on top and is made
    # to correct every stack: the statistics see nothing, and the report says "exact"
    # (before issue 47 a kept stack measured above 0.1 at the top card alone)
    worst, measured = habit_study(24, 5, "last-card", 1500)
    assert worst == 0 and measured == 0
    worst, measured = habit_study(24, 5, "instructed", 1500)
    assert worst == 0 and measured == 0


@pytest.mark.parametrize("habit", HABITS)
@pytest.mark.parametrize("passes", [2, 3])
def test_simulate_reports_no_less_than_it_measures_for_five_cards(habit, passes):
    code, data, result = simulate_json("--sim-dealer", habit, "--sim-ignores", "simulate",
                                       "--cards", "5", "--passes", str(passes),
                                       "--trials", "3000", "--seed", "7")
    assert code == 0, (result.output, result.stderr, repr(result.exception))
    assert data["imperfections"]["dealer"] == habit
    assert data["reported_distance"] >= data["measured_distance"], data
    assert data["reported_exact"] and data["exact_share"] == 1  # made to follow the light
