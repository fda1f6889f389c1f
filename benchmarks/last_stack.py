"""Hands of 24 cards on the real controller for each dealer of issue 47's acceptance.

For each dealer (a habit that looks at the cards, answering the machine's warning its
own way; docs/mixing.md, "The last stack"): the share of hands labelled exact, the χ²
p-values of their top and bottom card against uniform, the stops resumed, and the
seconds of the machine's clock a hand. Prints a table, then the JSON.

    python benchmarks/last_stack.py --hands 40     # seconds
    python benchmarks/last_stack.py --hands 40000  # the acceptance: ~35 min a dealer
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from collections import Counter

import structlog

from hardware_sim.dealer import Answer, DealerHabit
from hardware_sim.evening import evening
from hardware_sim.exhaustive import ANSWERS
from shuffler.core.stats import chi2_sf

#: the acceptance's dealers: the last-card habit answering every way, the first-card
#: habit made to correct, and a dealer who follows the light
DEALERS: list[tuple[DealerHabit, Answer | None]] = [
    (DealerHabit.INSTRUCTED, None), *((DealerHabit.LAST_CARD, a) for a in ANSWERS),
    (DealerHabit.FIRST_CARD, ANSWERS[0])]


def uniform_p(counts: Counter[int], n: int = 24) -> float:
    total = sum(counts.values())
    if not total:
        return float("nan")
    stat = sum((counts.get(c, 0) - total / n) ** 2 / (total / n) for c in range(n))
    return chi2_sf(stat, n - 1)


def study(habit: DealerHabit, answer: Answer | None, hands: int, seed: int) -> dict:
    top: Counter[int] = Counter()
    bottom: Counter[int] = Counter()
    exact = stops = 0
    seconds = 0.0
    for hand in evening(habit, answer, hands, random.Random(seed)):
        seconds += hand.seconds
        stops += hand.stops
        if hand.label.exact:
            exact += 1
            top[hand.order[0]] += 1
            bottom[hand.order[-1]] += 1
    return {"dealer": habit.value, "answer": (answer or Answer()).name, "hands": hands,
            "exact_share": exact / hands, "top_p": uniform_p(top),
            "bottom_p": uniform_p(bottom), "stops": stops,
            "seconds_a_hand": round(seconds / hands, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=40_000)
    parser.add_argument("--seed", type=int, default=47)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    rows = [study(h, a, args.hands, args.seed) for h, a in DEALERS]
    head = ["dealer", "answer", "hands", "exact", "top p", "bottom p", "stops", "s a hand"]
    lines = [head, ["---"] * len(head)] + [
        [r["dealer"], r["answer"], str(r["hands"]), f"{r['exact_share']:.1%}",
         f"{r['top_p']:.3g}", f"{r['bottom_p']:.3g}", str(r["stops"]), str(r["seconds_a_hand"])]
        for r in rows]
    print("\n".join("| " + " | ".join(cells) + " |" for cells in lines), json.dumps(rows),
          sep="\n")


if __name__ == "__main__":
    main()
