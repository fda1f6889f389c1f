"""The dealer's habits against the distance the controller reports, by exhaustion.

Prints docs/mixing.md's habit table (true distance / the largest reported on any
hand); tests/test_fault_distances.py checks the page carries this very table.

    python benchmarks/habits_table.py    # about a minute on an idle machine
"""

from __future__ import annotations

from hardware_sim.exhaustive import habit_distances, habit_table


def main() -> None:
    print(habit_table(lambda mode, n, k, habit: habit_distances(n, k, mode, habit)))


if __name__ == "__main__":
    main()
