"""Benchmark: the exact mixing table and simulated planned passes.

Prints a table, then the same figures as JSON on the last line.

    python benchmarks/bench_mixing.py
"""

from __future__ import annotations

import json
import random
import statistics
import time

from hardware_sim.study import simulate_hand
from shuffler import mixing
from shuffler.mechanics import Feed
from shuffler.planning import Mode


def table_ms(n: int, passes: range, repeats: int = 7) -> float:
    """Median wall time of the exact table, cold (caches cleared each time)."""
    times = []
    for _ in range(repeats):
        mixing.eulerian_row.cache_clear()
        start = time.perf_counter()
        mixing.distance_table(n, passes)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def passes_per_second(n: int, k: int, hands: int, mode: Mode = Mode.PLANNED) -> float:
    rng = random.Random(1)
    start = time.perf_counter()
    for _ in range(hands):
        simulate_hand(n, k, mode, rng, Feed.TOP)
    return hands * k / (time.perf_counter() - start)


def main() -> None:
    rows = [
        {"what": "exact table, 104 cards, passes 1-20 (ms, median of 7, cold)",
         "value": table_ms(104, range(1, 21)), "goal": "<= 100"},
        {"what": "planned passes a second, 24 cards (5-pass hands)",
         "value": passes_per_second(24, 5, 40_000), "goal": ">= 100000"},
        {"what": "planned passes a second, 52 cards (6-pass hands)",
         "value": passes_per_second(52, 6, 10_000), "goal": ""},
        {"what": "planned passes a second, 104 cards (7-pass hands)",
         "value": passes_per_second(104, 7, 5_000), "goal": ""},
        {"what": "coin passes a second, 24 cards (5-pass hands)",
         "value": passes_per_second(24, 5, 40_000, Mode.COIN), "goal": ""},
    ]
    for r in rows:
        print(f"{r['what']:<62} {r['value']:>12,.1f}  {r['goal']}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
