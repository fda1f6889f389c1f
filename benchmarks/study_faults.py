"""What an unnoticed wrong stacking, an unseen stacking and a double feed cost.

Exact for small packs (every random choice of the planner enumerated; for coin
passes every coin, beside the distance the controller reports), and by the
statistical battery for 24 cards (planned). Prints a table and, with --json, JSON.

    python benchmarks/study_faults.py [--json] [--trials 20000]
"""

from __future__ import annotations

import argparse
import json
import random
from fractions import Fraction

from hardware_sim.exhaustive import coin_outcomes, enumerate_outcomes, total_variation
from hardware_sim.study import Imperfections, play_hand, reading_order, simulate_hand
from shuffler.core.mechanics import Feed, Pile
from shuffler.core.planning import Mode
from shuffler.core.stats import Battery


class FixedCoin(random.Random):
    """The dealer's own coin for an unseen stacking, fixed per enumeration branch."""

    def __init__(self, pile: Pile) -> None:
        super().__init__(0)
        self.pile = pile

    def randrange(self, *args):  # only the simulated dealer's choice of pile calls this
        return int(self.pile)


def exact(n: int, k: int, flaws: Imperfections) -> Fraction:
    """TV after k planned passes with ``flaws``; an unseen stacking is a fair coin."""
    branches = [Pile.LEFT, Pile.RIGHT] if flaws.unseen_at else [Pile.LEFT]
    total: dict = {}
    for pile in branches:
        rng = FixedCoin(pile)
        dist = enumerate_outcomes(lambda r=rng: tuple(simulate_hand(n, k, Mode.PLANNED, r,
                                                                    Feed.TOP, flaws)))
        for order, p in dist.items():
            total[order] = total.get(order, 0) + p / len(branches)
    return total_variation(total, n)


def coin(n: int, k: int, flaws: Imperfections) -> tuple[Fraction, Fraction | None, bool]:
    """Coin passes: the true distance (every coin enumerated) and what the controller
    reports, (distance, exact)."""
    true = total_variation(coin_outcomes(n, k, Feed.TOP, flaws), n)
    _, planner = play_hand(n, k, Mode.COIN, random.Random(1), Feed.TOP, flaws)
    return true, planner.distance(n, k), planner.exact


def battery(n: int, k: int, flaws: Imperfections, trials: int, seed: int) -> dict:
    rng = random.Random(seed)
    b = Battery(n, lambda o: reading_order(o, k, Feed.TOP))
    for _ in range(trials):
        b.add(simulate_hand(n, k, Mode.PLANNED, rng, Feed.TOP, flaws))
    return {r.name: r.p for r in b.results()}


CASES = [
    ("as instructed", Imperfections()),
    ("wrong pile on top after pass 1, unnoticed", Imperfections(wrong_at=frozenset({0}))),
    ("wrong pile on top after pass 2, unnoticed", Imperfections(wrong_at=frozenset({1}))),
    ("both piles lifted at once after pass 1", Imperfections(unseen_at=frozenset({0}))),
    ("double feed at card 2 of pass 1", Imperfections(double_at=frozenset({(0, 1)}))),
    ("double feed at card 2 of pass 2", Imperfections(double_at=frozenset({(1, 1)}))),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--trials", type=int, default=20_000)
    args = parser.parse_args()
    rows = []
    for name, flaws in CASES:
        row = {"case": name}
        for n in (5, 6):
            row[f"tv_{n}_cards_3_passes"] = float(exact(n, 3, flaws))
        true, reported, exact_report = coin(5, 3, flaws)
        row["coin_5_cards_3_passes"] = {"true": float(true), "reported": float(reported or 1),
                                        "reported_exact": exact_report}
        row["battery_24_cards_5_passes"] = battery(24, 5, flaws, args.trials, seed=1)
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'case':<44} {'TV n=5':>7} {'TV n=6':>7}   coin n=5: true, reported   "
          "24 cards, 5 passes: battery p (runs, positions, guesser)")
    for row in rows:
        ps = row["battery_24_cards_5_passes"]
        c = row["coin_5_cards_3_passes"]
        reported = f"{c['reported']:.3f}" if c["reported_exact"] else f"<= {c['reported']:.3f}"
        print(f"{row['case']:<44} {row['tv_5_cards_3_passes']:>7.3f} "
              f"{row['tv_6_cards_3_passes']:>7.3f}   {c['true']:.3f}, {reported:<9}   "
              + ", ".join(f"{ps[t]:.2g}" for t in ("runs", "positions", "guesser")))


if __name__ == "__main__":
    main()
