"""The watch's figures in docs/mixing.md, "Labels that mean what they say".

For each habit that ignores the light: 2,000 evenings of 10 hands of 24 cards, 5 passes,
one dealer: the share of first hands labelled exact, the exact-labelled hands an evening,
the bottom card's distance from uniform among them, and after which hand the watch saw
the pattern. Then a careless dealer whose departures ignore the cards (the other pile on
top one pass in 1/q): how often a false pattern holds, and the exact share it costs.

    python benchmarks/label_watch.py    # a few minutes on an idle machine
"""

from __future__ import annotations

import random
from collections import Counter

from hardware_sim.dealer import DealerHabit
from hardware_sim.study import Imperfections, label_of, play_labelled
from shuffler.core.labels import Watch
from shuffler.core.mechanics import Feed
from shuffler.core.planning import Mode, PackTracker, Planner, make_planner

N, K = 24, 5


def evenings(habit: DealerHabit, count: int = 2000, hands: int = 10) -> str:
    rng, flaws = random.Random(1), Imperfections(habit=habit, listens=False)
    exact = first = 0
    seen_after: Counter[int | None] = Counter()
    bottom: Counter[int] = Counter()
    for _ in range(count):
        watch, seen = Watch(), None
        for h in range(hands):
            order, label = play_labelled(N, K, Mode.PLANNED, rng, Feed.TOP, flaws, watch)
            if label.exact:
                exact += 1
                first += h == 0
                bottom[order[-1]] += 1
            if seen is None and watch.pattern is not None:
                seen = h + 1
        seen_after[seen] += 1
    total = sum(bottom.values())
    tv = sum(abs(bottom[c] / total - 1 / N) for c in range(N)) / 2 if total else 0.0
    running, cum = 0, []
    for h in range(1, hands + 1):
        running += seen_after[h]
        cum.append(f"{running / count:.0%}")
    return (f"{habit.value}: first hand exact {first / count:.1%}, {exact / count:.3f} exact "
            f"hands an evening (bottom card {tv:.2f} from uniform); pattern seen by hand "
            f"1..{hands}: {', '.join(cum)}")


def careless_hand(rng: random.Random, watch: Watch, q: float) -> Planner:
    planner, tracker = make_planner(Mode.PLANNED, K, rng), PackTracker(N, Feed.TOP)
    for j in range(K):
        plan = planner.plan(j, N, tracker)
        on_top = plan.on_top.other if rng.random() < q else plan.on_top
        tracker.after_pass(plan, N, on_top)
        planner.observe(j, plan, N, on_top)
        watch.see(plan.on_top, on_top, plan.labels)
    return planner


def careless(q: float, hands: int = 20_000) -> str:
    rng, watch = random.Random(2), Watch()
    held = exact = clean = 0
    for _ in range(hands):
        pattern = watch.pattern
        planner = careless_hand(rng, watch, q)
        held += pattern is not None
        exact += label_of(planner, N, K, pattern).exact
        clean += not planner.departures
    return (f"careless, q = {q}: a false pattern on {held / hands:.2%} of hands; exact "
            f"{exact / hands:.2%} against {clean / hands:.2%} with no departure")


def main() -> None:
    for habit in (DealerHabit.LAST_CARD, DealerHabit.FIRST_CARD, DealerHabit.TALLER):
        print(evenings(habit), flush=True)
    for q in (0.05, 0.1):
        print(careless(q), flush=True)


if __name__ == "__main__":
    main()
