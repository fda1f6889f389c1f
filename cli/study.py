"""``shuffler mixing`` and ``shuffler simulate``: how many passes, and the evidence."""

from __future__ import annotations

import random
import secrets
from fractions import Fraction
from pathlib import Path

import click

from hardware_sim.dealer import DealerHabit
from hardware_sim.faults import parse_fault_specs
from hardware_sim.study import Imperfections, play_hand, reading_order
from shuffler.core.cards import MAX_CARDS, play_euchre_hand
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
from shuffler.core.stats import ALPHA, Battery
from shuffler.errors import BadInputError
from shuffler.store.state import atomic_write

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
    names, knowing the starting order and seeing each card after guessing it."""
    n = cards or app.config.hand.cards
    rows = []
    for k in range(1, passes + 1):
        rows.append({
            "passes": k,
            "coin_distance": float(tv_coin(n, k)),
            "planned_distance": float(tv_planned(n, k)),
            "coin_guesses": float(guesses_coin(n, k)),
            "planned_guesses": float(guesses_planned(n, k)),
            "seconds": 5.0 * k * n / 24,
        })
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
                 "in planned mode; shuffler.core.planning.default_passes)")
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
    if plan.jams or plan.misfeeds or plan.battery_volts is not None:
        raise BadInputError("--sim-fault: simulate studies the order of the pack; only "
                            "double:CARD applies (jams, misfeeds and the battery stop a pass: "
                            "try them with `shuffler hand`)")
    beyond = sorted(c for c in plan.doubles if c >= cards)
    if beyond:
        raise BadInputError(f"--sim-fault double:{beyond[0]}: a double feed takes card "
                            f"{beyond[0]} and the next, and the load is {cards} cards")
    return (seed if seed is not None else sim.seed), DealerHabit(sim.habit), plan.doubles


def _euchre_labels(rng: random.Random):
    """A gathered euchre pack: trick number and printed suit per starting position."""
    hand = play_euchre_hand(rng)
    groups = [t for t, trick in enumerate(hand.tricks) for _ in trick]
    groups += [5] * len(hand.kitty) + [6] * len(hand.idle)
    suits = [c.suit for c in hand.gathered()]
    return groups, suits


@click.command()
@click.option("--cards", type=click.IntRange(1, MAX_CARDS), default=None,
              help="cards in the load (default 24)")
@click.option("--passes", type=click.IntRange(1, MAX_PASSES), default=None,
              help="passes a hand (default: default_passes, exactly random in planned mode)")
@click.option("--mode", type=click.Choice([m.value for m in Mode]), default="planned",
              show_default=True)
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
              help="write each final order: starting positions (0 = top), top first")
@click.pass_obj
def simulate(app, cards, passes, mode, trials, start, seed, feed, double_rate, unseen_rate,
             wrong_rate, orders) -> None:
    """Run many hands through the simulated mechanism and test them against a random pack."""
    n = cards or (24 if start == "euchre" else app.config.hand.cards)
    if start == "euchre" and n != 24:
        raise click.UsageError(f"--start euchre takes the 24-card euchre pack, not {n} cards")
    k = passes or default_passes(n)
    seed, habit, doubles = _sim_options(app, n, seed)
    seed = secrets.randbits(32) if seed is None else seed
    feed_side = Feed(feed) if feed else app.config.mechanism.feed
    flaws = Imperfections(double_rate, unseen_rate, wrong_rate, habit=habit,
                          double_at=frozenset((0, card - 1) for card in doubles))
    rng = random.Random(seed)
    battery = Battery(n, lambda order: reading_order(order, k, feed_side))
    lines: list[str] = []
    reported: set[tuple[Fraction | None, bool]] = set()
    for _ in range(trials):
        labels = _euchre_labels(rng) if start == "euchre" else (None, None)
        order, planner = play_hand(n, k, Mode(mode), rng, feed_side, flaws)
        reported.add((planner.distance(n, k), planner.exact))
        battery.add(order, *labels)
        if orders:
            lines.append(" ".join(map(str, order)))
    known = [d for d, _ in reported if d is not None]
    worst = max(known) if len(known) == len(reported) else None  # None: one is unknown
    exact = all(e for _, e in reported) and worst is not None
    if orders:
        try:
            atomic_write(Path(orders), ("\n".join(lines) + "\n").encode())
        except OSError as e:
            raise BadInputError(f"--orders {orders}: cannot write: {e}") from None
    results = battery.results()
    distance = tv_planned(n, k) if mode == "planned" else tv_coin(n, k)
    obj = {"cards": n, "passes": k, "mode": mode, "trials": trials, "start": start,
           "seed": seed, "feed": feed_side.value, "alpha": ALPHA,
           "imperfections": {"double_rate": double_rate, "unseen_rate": unseen_rate,
                             "wrong_rate": wrong_rate, "dealer": habit.value,
                             "double_cards": sorted(doubles)},
           "distance": float(distance),
           "reported_distance": None if worst is None else float(worst),
           "reported_exact": exact,
           "measured_distance": battery.measured_distance(),
           "tests": [r.to_dict() for r in results],
           "passed": all(r.passed for r in results)}
    for t in obj["tests"]:
        t.pop("histogram", None)
    text = [f"{trials} hands of {k} {mode} passes on {n} cards ({start} start, seed {seed}); "
            f"ideal machine: {distance_text(distance)}"]
    if flaws.any:
        text.append(f"with the imperfections, the controller reported: "
                    f"{distance_text(worst, exact)}")
    text.append(f"measured from the dealt packs: at least {obj['measured_distance']:.3g} from "
                f"random (top card, bottom card, runs{', whole order' if n <= 8 else ''}; "
                "each at 99.9% confidence)")
    for r in results:
        if r.detail.get("enough_hands") is False:
            text.append(f"  {r.name:<22} not enough hands to test (it needs "
                        f"{r.detail['min_hands']} to reach its level)")
            continue
        verdict = "pass" if r.passed else "FAIL"
        line = f"  {r.name:<22} statistic {r.statistic:>10.2f}   p = {r.p:<8.3g} {verdict}"
        if "runs_distance" in r.detail:
            line += (f"   runs law {r.detail['runs_distance']:.3g} from random (a lower bound, "
                     "up to sampling noise)")
        if "standard_error" in r.detail:  # simulated: the mean with its standard error
            line += (f"   mean {r.detail['mean']:.3f} ± {r.detail['standard_error']:.3f} "
                     f"(random: {r.detail['uniform_mean']:.3f})")
        text.append(line)
    text.append("all tests pass at 99%" if obj["passed"] else
                "the pack is distinguishable from random at 99%")
    app.emit(obj, "\n".join(text))
