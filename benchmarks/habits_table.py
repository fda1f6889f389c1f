"""Dealers who look at the cards against the labels the controller gives, by exhaustion.

Prints docs/mixing.md's label table (the share of hands labelled exact, and the distance
of their law from the plan's, for each dealer); tests/test_fault_distances.py checks the
page carries this very table.

    python benchmarks/habits_table.py    # a few seconds on an idle machine
"""

from __future__ import annotations

from hardware_sim.exhaustive import label_table


def main() -> None:
    print(label_table())


if __name__ == "__main__":
    main()
