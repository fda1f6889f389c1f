"""Hands of 24 cards on the real controller for each dealer of issue 47's acceptance.

For each dealer (a habit that looks at the cards, answering the machine's warning its
own way; docs/mixing.md, "The last stack"): the share of hands labelled exact, the χ²
p-values of their top and bottom card against uniform, the stops resumed, and the
seconds of the machine's clock a hand. Prints a table, then the JSON. The dealers take
turns, ``--every`` hands each; ``--out`` keeps every dealer's row after each turn, so a run
cut short still says how far each dealer got.

    python benchmarks/last_stack.py --hands 40     # seconds
    python benchmarks/last_stack.py --hands 40000 --out rows.jsonl  # the acceptance:
    # ~10 ms of the host's processor a hand, ~7 min a dealer
    python benchmarks/last_stack.py --table rows.jsonl  # the table of such a run
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import structlog

from hardware_sim.dealer import Answer, DealerHabit
from hardware_sim.evening import Hand, evening
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


class Tally:
    """One dealer's hands so far: the χ² p of the top and the bottom card against
    uniform, of the hands labelled exact and of all the hands."""

    def __init__(self, habit: DealerHabit, answer: Answer | None, seed: int) -> None:
        self.habit, self.answer, self.seed = habit, answer, seed
        self.ends: dict[str, Counter[int]] = {
            k: Counter() for k in ("top", "bottom", "top_all", "bottom_all")}
        self.hands = self.exact = self.stops = 0
        self.seconds = self.host = 0.0

    def add(self, hand: Hand) -> None:
        self.hands += 1
        self.seconds += hand.seconds
        self.stops += hand.stops
        self.ends["top_all"][hand.order[0]] += 1
        self.ends["bottom_all"][hand.order[-1]] += 1
        if hand.label.exact:
            self.exact += 1
            self.ends["top"][hand.order[0]] += 1
            self.ends["bottom"][hand.order[-1]] += 1

    def row(self) -> dict:
        n = max(self.hands, 1)
        return {"dealer": self.habit.value, "answer": (self.answer or Answer()).name,
                "hands": self.hands, "seed": self.seed, "exact": self.exact,
                "exact_share": self.exact / n,
                **{f"{k}_p": uniform_p(c) for k, c in self.ends.items()},
                "stops": self.stops, "seconds_a_hand": round(self.seconds / n, 2),
                "host_ms_a_hand": round(1000 * self.host / n, 1)}


def rounds(dealers: list[tuple[DealerHabit, Answer | None]], hands: int, seed: int,
           every: int) -> Iterator[list[dict]]:
    """Every dealer's rows after each round of ``every`` more hands each, until each has
    had ``hands``: a run cut short leaves every dealer with about as many hands."""
    runs = [(Tally(h, a, seed), evening(h, a, hands, random.Random(seed))) for h, a in dealers]
    while runs[0][0].hands < hands:
        for tally, evening_of in runs:
            began = time.perf_counter()
            for hand in itertools.islice(evening_of, every):
                tally.add(hand)
            tally.host += time.perf_counter() - began
        yield [tally.row() for tally, _ in runs]


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
    parser.add_argument("--every", type=int, default=1000, help="hands a dealer a round: "
                        "the dealers take turns, so a run cut short has each about as far")
    parser.add_argument("--out", type=Path, help="append every dealer's JSON row to this "
                        "file after each round (a long run keeps what it finished)")
    parser.add_argument("--table", type=Path, help="print the table of the last rows in "
                        "this file (an --out file), and run nothing")
    args = parser.parse_args()
    if args.table:
        rows = _last_rows(args.table)
        print(table(rows), json.dumps(rows), sep="\n")
        return
    try:
        which = [DEALERS[int(i)] for i in args.dealers.split(",")]
    except (ValueError, IndexError):
        parser.error(f"--dealers {args.dealers}: rows 0 to {len(DEALERS) - 1}, "
                     "comma-separated")
    if args.hands < 1 or args.every < 1:
        parser.error("--hands and --every: at least 1")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    # a kill ends the run as Ctrl-C would: each evening's scratch folder goes with it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    rows: list[dict] = []
    for rows in rounds(which, args.hands, args.seed, args.every):
        if args.out:
            with args.out.open("a") as f:
                f.writelines(json.dumps(row) + "\n" for row in rows)
    print(table(rows), json.dumps(rows), sep="\n")


def _last_rows(path: Path) -> list[dict]:
    """Each dealer's last row in an --out file, in the order the dealers first came."""
    last: dict[tuple[str, str, int], dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            last[row["dealer"], row["answer"], row["seed"]] = row
    return list(last.values())


if __name__ == "__main__":
    main()
