"""``shuffler mixing`` and ``shuffler simulate``: how many passes, and the evidence."""

from __future__ import annotations

import random
import secrets
from pathlib import Path

import click

from hardware_sim.dealer import DealerHabit
from hardware_sim.faults import parse_fault_specs
from hardware_sim.study import Imperfections, play_labelled, reading_order
from shuffler.core.cards import MAX_CARDS, play_euchre_hand
from shuffler.core.labels import Label
from shuffler.core.mechanics import Feed
from shuffler.core.mixing import (
    MAX_PASSES,
    guesses_coin,
    guesses_planned,
    harmonic,
    recommend,
    tv_coin,
    tv_planned,
)
from shuffler.core.planning import Mode, default_passes
from shuffler.core.stats import TEST_ALPHA, Battery, battery_level, hands_short, verdict
from shuffler.errors import BadInputError
from shuffler.store.state import atomic_write

from .commands import MODES
from .options import FiniteFloat
from .render import distance_text, table_distance


def bar(value: float, width: int = 24) -> str:
    filled = round(value * width)
    return "#" * filled + "." * (width - filled)


@click.command()
@click.option("--cards", type=click.IntRange(1, MAX_CARDS), default=None,
              help="cards in the load (default: from the config, 24)")
@click.option("--passes", type=click.IntRange(1, MAX_PASSES), default=12, show_default=True,
              help="show the table up to this many passes")
@click.option("--target", type=FiniteFloat(0, 1, min_open=True), default=0.01,
              show_default=True, help="the distance from random to recommend passes for")
@click.option("--trials", type=click.IntRange(10, 10**6), default=None, hidden=True,
              help="ignored: the guessing columns are exact (kept for old scripts)")
@click.pass_obj
def mixing(app, cards: int | None, passes: int, target: float, trials: int | None) -> None:
    """How far from random the pack is after each pass, coin flips against planned.

    The guessing columns are exact: the expected number of cards the best guesser
    names, knowing the starting order and seeing each card after guessing it.

    \b
    Examples:
      shuffler mixing                     the euchre pack, up to 12 passes
      shuffler mixing --cards 52 --passes 8 --target 0.001
      shuffler --json mixing              the same table as JSON
    """
    n = cards or app.config.hand.cards
    rows = [{"passes": k, "coin_distance": float(tv_coin(n, k)),
             "planned_distance": float(tv_planned(n, k)),
             "coin_guesses": float(guesses_coin(n, k)),
             "planned_guesses": float(guesses_planned(n, k)), "seconds": 5.0 * k * n / 24}
            for k in range(1, passes + 1)]
    rec = recommend(n, target)
    k = default_passes(n)  # the one rule every page quotes: what a hand runs
    obj = {"cards": n, "target": target, "rows": rows, "recommended": rec,
           "default_passes": k, "uniform_guesses": float(harmonic(n))}
    lines = [f"{n} cards: distance from random (total variation) after each pass",
             f"{'passes':>6}  {'coin':>8}  {'planned':>8}  {'guessed: coin':>13}  {'planned':>7}"
             "  coin / planned"]
    for r in rows:
        lines.append(f"{r['passes']:>6}  {table_distance(r['coin_distance']):>8}  "
                     f"{table_distance(r['planned_distance']):>8}  "
                     f"{r['coin_guesses']:>13.3f}  {r['planned_guesses']:>7.3f}  "
                     f"{bar(r['coin_distance'])} {bar(r['planned_distance'])}")
    lines.append(f"a random pack lets a guesser name {float(harmonic(n)):.3f} cards on average "
                 "(the guessing columns: the best guesser's expected score, exact)")
    lines.append(f"a hand runs {k} passes by default (the fewest k with 2^k >= {n}: "
                 f"{'exactly random' if tv_planned(n, k) == 0 else 'the physical limit'} "
                 "in planned mode; docs/mixing.md, \"Choosing N passes a hand\")")
    for mode in ("planned", "coin"):
        needed = rec[mode]
        lines.append(f"to get below {target} ({mode}): " + (
            f"{needed} passes" if needed is not None else "more than 30 passes"))
    app.emit(obj, "\n".join(lines))


def _sim_options(app, cards: int, seed: int | None) -> tuple[int | None, DealerHabit, set[int]]:
    """The global --sim-* options, honoured or refused: --sim-seed is the seed,
    --sim-dealer the dealer's habit, --sim-fault double:CARD a double feed at that card
    of every hand's first pass; jams, misfeeds and the battery stop a device's pass and
    are refused. (--sim-speed holds trivially: simulate runs on no clock at all.)"""
    sim = app.sim
    if sim.seed is not None and seed is not None and sim.seed != seed:
        raise BadInputError(f"--seed {seed} and --sim-seed {sim.seed}: give one seed")
    plan = parse_fault_specs(sim.faults)
    if plan.jams or plan.misfeeds or plan.battery_volts is not None or plan.dropout_s:
        raise BadInputError("--sim-fault: simulate studies the order of the pack; only "
                            "double:CARD applies (jams, misfeeds, the battery and a beam "
                            "drop-out stop a pass: try them with `shuffler hand`)")
    beyond = sorted(c for c in plan.doubles if c >= cards)
    if beyond:
        raise BadInputError(f"--sim-fault double:{beyond[0]}: a double feed takes card "
                            f"{beyond[0]} and the next, and the load is {cards} cards")
    return (seed if seed is not None else sim.seed), DealerHabit(sim.habit), plan.doubles


def _play(n: int, k: int, mode: Mode, trials: int, start: str, rng: random.Random,
          feed: Feed, flaws: Imperfections,
          keep_orders: bool) -> tuple[Battery, list[Label], list[str]]:
    """Deal ``trials`` hands, each labelled as the controller labels it: the battery of
    tests, every label, and with ``keep_orders`` each order followed by its label."""
    battery = Battery(n, lambda order: reading_order(order, k, feed))
    labels: list[Label] = []
    orders: list[str] = []
    for _ in range(trials):
        groups = suits = None  # a gathered euchre pack: trick and suit per starting place
        if start == "euchre":
            hand = play_euchre_hand(rng)
            groups = [t for t, trick in enumerate(hand.tricks) for _ in trick]
            groups += [5] * len(hand.kitty) + [6] * len(hand.idle)
            suits = [c.suit for c in hand.gathered()]
        order, label = play_labelled(n, k, mode, rng, feed, flaws)
        labels.append(label)
        battery.add(order, groups, suits)
        if keep_orders:
            orders += [" ".join(map(str, order)), label.word]
    return battery, labels, orders


def _test_lines(results, trials: int, level: str, passed: bool | None) -> list[str]:
    """One line a test, then the battery's verdict: never a pass without a test."""
    text = []
    for r in results:
        if not r.taken:
            text.append(f"  {r.name:<22} not tested: {r.detail['min_hands'] - trials} more "
                        f"hands needed (it takes {r.detail['min_hands']} to reach its level)")
            continue
        said = "pass" if r.passed else "FAIL"
        line = f"  {r.name:<22} statistic {r.statistic:>10.2f}   p = {r.p:<8.3g} {said}"
        if "runs_distance" in r.detail:
            line += (f"   runs law {r.detail['runs_distance']:.3g} from random (a lower bound, "
                     "up to sampling noise)")
        if "standard_error" in r.detail:  # simulated: the mean with its standard error
            line += (f"   mean {r.detail['mean']:.3f} ± {r.detail['standard_error']:.3f} "
                     f"(random: {r.detail['uniform_mean']:.3f})")
        text.append(line)
    if passed is None:
        text.append(f"not tested: {hands_short(results, trials)} more hands needed "
                    "(no test failed, and not every test was taken)")
    elif passed:
        text.append(f"every test passes (a random pack fails one at most {level} of the time)")
    else:
        text.append(f"the pack is distinguishable from random (a random pack fails a test at "
                    f"most {level} of the time)")
    return text


@click.command()
@click.option("--cards", type=click.IntRange(1, MAX_CARDS), default=None,
              help="cards in the load (default 24)")
@click.option("--passes", type=click.IntRange(1, MAX_PASSES), default=None,
              help="passes a hand (default: the fewest k with 2^k >= the cards, 5 for 24: "
                   "exactly random in planned mode)")
@click.option("--mode", type=click.Choice(MODES), default="planned", show_default=True,
              help="planned: reach the physical limit; coin: the plain machine")
@click.option("--trials", type=click.IntRange(1, 10**7), default=10_000, show_default=True)
@click.option("--start", type=click.Choice(["fresh", "euchre"]), default="fresh",
              show_default=True, help="a new pack, or one gathered from a euchre hand")
@click.option("--seed", type=int, default=None, help="seed (default: drawn and reported)")
@click.option("--feed", type=click.Choice([f.value for f in Feed]), default=None,
              help="feed side (default: from the config, top)")
@click.option("--double-rate", type=FiniteFloat(0, 0.5), default=0.0,
              help="chance per card of a double feed")
@click.option("--unseen-rate", type=FiniteFloat(0, 1), default=0.0,
              help="chance per pass the dealer lifts both piles at once")
@click.option("--wrong-rate", type=FiniteFloat(0, 1), default=0.0,
              help="chance per pass the other pile goes on top unnoticed by the sensors")
@click.option("--orders", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write each final order (starting positions, 0 = top, top first), "
                   "each followed by a line with its label: exact, or bound and the "
                   "distance it promises (bound unknown: nothing can be said)")
@click.pass_obj
def simulate(app, cards, passes, mode, trials, start, seed, feed, double_rate, unseen_rate,
             wrong_rate, orders) -> None:
    """Run many hands through the simulated mechanism and test them against a random pack.

    \b
    Examples:
      shuffler simulate                   10,000 planned hands of the default pack
      shuffler simulate --mode coin --passes 7 --trials 2000 --seed 1
      shuffler simulate --start euchre --wrong-rate 0.1   a dealer who errs one pass in ten
      shuffler simulate --cards 5 --orders orders.txt     every final order, to check
    """
    n = cards or (24 if start == "euchre" else app.config.hand.cards)
    if start == "euchre" and n != 24:
        raise click.UsageError(f"--start euchre takes the 24-card euchre pack, not {n} cards")
    k = passes or default_passes(n)
    seed, habit, doubles = _sim_options(app, n, seed)
    seed = secrets.randbits(32) if seed is None else seed
    feed_side = Feed(feed) if feed else app.config.mechanism.feed
    flaws = Imperfections(double_rate, unseen_rate, wrong_rate, habit=habit,
                          double_at=frozenset((0, card - 1) for card in doubles),
                          listens=not app.sim.ignores)
    battery, labels, dealt = _play(n, k, Mode(mode), trials, start, random.Random(seed),
                                   feed_side, flaws, bool(orders))
    if orders:
        try:
            atomic_write(Path(orders), ("\n".join(dealt) + "\n").encode())
        except OSError as e:
            raise BadInputError(f"--orders {orders}: cannot write: {e}") from None
    known = [lab.distance for lab in labels if lab.distance is not None]
    worst = max(known) if len(known) == len(labels) else None  # None: one said unknown
    exact = worst is not None and all(lab.exact for lab in labels)
    exact_share = sum(lab.exact for lab in labels) / len(labels)
    results = battery.results()
    distance = tv_planned(n, k) if mode == "planned" else tv_coin(n, k)
    obj = {"cards": n, "passes": k, "mode": mode, "trials": trials, "start": start,
           "seed": seed, "feed": feed_side.value, "alpha": TEST_ALPHA,
           "imperfections": {"double_rate": double_rate, "unseen_rate": unseen_rate,
                             "wrong_rate": wrong_rate, "dealer": habit.value,
                             "listens": flaws.listens, "double_cards": sorted(doubles)},
           "distance": float(distance),
           "reported_distance": None if worst is None else float(worst),
           "reported_exact": exact, "exact_share": exact_share,
           "measured_distance": battery.measured_distance(),
           "tests": [{k: v for k, v in r.to_dict().items() if k != "histogram"}
                     for r in results],
           "battery_level": battery_level(len(results)),
           "passed": verdict(results)}
    text = [f"{trials} hands of {k} {mode} passes on {n} cards ({start} start, seed {seed}); "
            f"ideal machine: {distance_text(distance)}"]
    if flaws.any:
        does = "corrects when warned" if flaws.listens else "corrects when made to"
        text.append(f"with the imperfections (a {flaws.habit.value} dealer who {does}), the "
                    f"controller reported: {distance_text(worst, exact)}; "
                    f"{exact_share:.1%} of the hands labelled exact")
    text.append(f"measured from the dealt packs: at least {obj['measured_distance']:.3g} from "
                f"random (top card, bottom card, runs{', whole order' if n <= 8 else ''}; "
                "each at 99.9% confidence)")
    text += _test_lines(results, trials, f"{obj['battery_level']:.0%}", obj["passed"])
    app.emit(obj, "\n".join(text))
