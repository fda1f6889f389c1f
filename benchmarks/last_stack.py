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
import time
from collections import Counter
from pathlib import Path

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


def uniform_p(counts: Counter[int], n: int = 24) -> float | None:
    """None for no hands (JSON has no NaN)."""
    total = sum(counts.values())
    if not total:
        return None
    stat = sum((counts.get(c, 0) - total / n) ** 2 / (total / n) for c in range(n))
    return chi2_sf(stat, n - 1)


def study(habit: DealerHabit, answer: Answer | None, hands: int, seed: int) -> dict:
    """One dealer's hands: the χ² p of the top and the bottom card against uniform, of
    the hands labelled exact and of all the hands."""
    ends: dict[str, Counter[int]] = {k: Counter() for k in ("top", "bottom", "top_all",
                                                            "bottom_all")}
    exact = stops = 0
    seconds = 0.0
    began = time.perf_counter()
    for hand in evening(habit, answer, hands, random.Random(seed)):
        seconds += hand.seconds
        stops += hand.stops
        ends["top_all"][hand.order[0]] += 1
        ends["bottom_all"][hand.order[-1]] += 1
        if hand.label.exact:
            exact += 1
            ends["top"][hand.order[0]] += 1
            ends["bottom"][hand.order[-1]] += 1
    return {"dealer": habit.value, "answer": (answer or Answer()).name, "hands": hands,
            "seed": seed, "exact": exact, "exact_share": exact / hands,
            **{f"{k}_p": uniform_p(c) for k, c in ends.items()}, "stops": stops,
            "seconds_a_hand": round(seconds / hands, 2),
            "host_ms_a_hand": round(1000 * (time.perf_counter() - began) / hands, 1)}


def table(rows: list[dict]) -> str:
    """The rows as docs/mixing.md carries them ("The last stack")."""
    head = ["dealer", "answer", "hands", "exact", "top p", "bottom p", "top p, all",
            "bottom p, all", "stops", "s a hand"]
    lines = [head, ["---"] * len(head)] + [
        [r["dealer"], r["answer"], str(r["hands"]), f"{r['exact_share']:.1%}",
         *("–" if r[k] is None else f"{r[k]:.3g}"
           for k in ("top_p", "bottom_p", "top_all_p", "bottom_all_p")),
         str(r["stops"]), f"{r['seconds_a_hand']:.2f}"]
        for r in rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=40_000)
    parser.add_argument("--seed", type=int, default=47)
    parser.add_argument("--dealers", default=",".join(map(str, range(len(DEALERS)))),
                        help="which dealers, by their row (0-based, comma-separated)")
    parser.add_argument("--out", type=Path, help="append each dealer's JSON row to this "
                        "file as soon as it is done (a long run keeps what it finished)")
    parser.add_argument("--table", type=Path, help="print the table of the rows in this "
                        "file (an --out file), and run nothing")
    args = parser.parse_args()
    if args.table:
        rows = [json.loads(line) for line in args.table.read_text().splitlines() if line]
        print(table(rows), json.dumps(rows), sep="\n")
        return
    try:
        which = [DEALERS[int(i)] for i in args.dealers.split(",")]
    except (ValueError, IndexError):
        parser.error(f"--dealers {args.dealers}: rows 0 to {len(DEALERS) - 1}, "
                     "comma-separated")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    rows = []
    for habit, answer in which:
        rows.append(study(habit, answer, args.hands, args.seed))
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(rows[-1]) + "\n")
    print(table(rows), json.dumps(rows), sep="\n")


if __name__ == "__main__":
    main()
