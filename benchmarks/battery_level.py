"""How often each test, and the whole battery, fails a truly random pack (docs/mixing.md).

Each test is sampled as tests/test_calibration.py samples it (the runs count and the
guesser's score from their exact laws, the positions table from random orders), at the
fewest hands it is taken on, 30 more and 500; the battery on real orders (its tests are
dependent) at 20 hands and at 500 (5n for 104 cards). Fixed seeds, the tests' own.

    python benchmarks/battery_level.py [--runs 3000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shuffler.core.stats import min_hands
from tests.test_calibration import LARGE, _battery_rate, _level


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000,
                        help="runs a cell (the battery: at most 1000, 300 over 24 cards)")
    args = parser.parse_args()
    print("| cards | runs: fewest, +30, 500 more | guesser: fewest, +30, 500 more "
          "| positions: fewest, +30 | battery: 20 hands, large |")
    print("|---|---|---|---|---|")
    for n in (3, 4, 5, 8, 24, 52, 104):
        cells = []
        for which in ("runs", "guesser", "positions"):
            extras = (0, 30, LARGE) if which != "positions" else (
                (0, 30) if n <= 24 else (0,) if n == 52 else ())
            fewest = min_hands(which, n)
            cells.append(", ".join(
                f"{_level(n, fewest + e, which, 1000 * n + fewest + e, args.runs):.2%} "
                f"({fewest + e})" for e in extras) or "not measured")
        if n == 4:
            cells.append("")
        else:
            runs_of = min(args.runs, 1000 if n <= 24 else 300)  # the battery is slow
            large = max(LARGE, min_hands("positions", n))
            cells.append(", ".join(f"{_battery_rate(n, t, runs_of, 7 * n + t):.1%} ({t})"
                                   for t in (20, large)))
        print(f"| {n} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
