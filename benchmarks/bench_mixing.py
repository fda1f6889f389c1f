"""Benchmark: the mixing command as a whole process, the exact tables, simulated passes.

Prints a table, then the same figures as JSON on the last line.

    python benchmarks/bench_mixing.py
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hardware_sim.study import simulate_hand
from shuffler.core import mixing
from shuffler.core.mechanics import Feed
from shuffler.core.planning import Mode


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


def process_ms(runs: list[list[str]], repeats: int = 11) -> list[float]:
    """Median wall time of whole ``shuffler`` processes (start-up, imports, output), the
    commands interleaved so that a busy machine slows them alike."""
    exe = Path(sys.executable).with_name("shuffler")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "shuffler"]
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for args, column in zip(runs, times, strict=True):
            start = time.perf_counter()
            subprocess.run([*command, *args], check=True, capture_output=True)
            column.append((time.perf_counter() - start) * 1000)
    return [statistics.median(column) for column in times]


def mixing_process_rows() -> list[dict]:
    small, large = process_ms([["--json", "mixing", "--cards", "24", "--passes", "1"],
                               ["--json", "mixing", "--cards", "104", "--passes", "20"]])
    return [
        {"what": "shuffler --json mixing --cards 24 --passes 1 (ms, process, median of 11)",
         "value": small, "goal": ""},
        {"what": "shuffler --json mixing --cards 104 --passes 20 (ms, process, median of 11)",
         "value": large, "goal": ""},
        {"what": "  the difference (ms), guessing columns included",
         "value": large - small, "goal": "<= 100"},
    ]


def guessing_ms(n: int, passes: range, repeats: int = 7) -> float:
    """Median wall time of both exact guessing columns, cold."""
    times = []
    for _ in range(repeats):
        mixing.guessing_row.cache_clear()
        mixing.eulerian_row.cache_clear()
        start = time.perf_counter()
        for k in passes:
            mixing.guesses_coin(n, k)
            mixing.guesses_planned(n, k)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    rows = [
        *mixing_process_rows(),
        {"what": "exact guessing columns, 104 cards, passes 1-20 (ms, median of 7, cold)",
         "value": guessing_ms(104, range(1, 21)), "goal": ""},
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
