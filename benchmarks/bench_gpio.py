"""Benchmark: the GPIO backend on the rig.

For rising card rates, ten passes of 104 cards: how many cards landed on a pile
other than the plan's, and the per-card decision latency (beam edge to diverter
set). Prints a table, then the figures as JSON on the last line.

    python benchmarks/bench_gpio.py [--rates 200,400,800,1600,3200,6400]

The rig runs on device time (an EventClock), so "achieved" is the rate in the
machine's own time (cards over the pass's seconds, soft start included) and the
latency is the host's own work from the beam edge's callback to the diverter write;
"host s" is the real time a pass took. The beam filter is scaled to the rate (a card
blocks the beam for 40% of its interval).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import warnings

from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
from shuffler.config import EngineConfig
from shuffler.core.mechanics import Pile
from shuffler.core.planning import coin_plan
from shuffler.device.contract import FaultLimits


def run(rate: float, passes: int = 10, cards: int = 104) -> dict:
    # the beam filter scaled too: a card blocks the beam 0.4 / rate and leaves a gap of
    # 0.6 / rate, so the gap a card must be followed by is half that (the 10 ms default
    # would merge every card above 60 a second into one long blocking: a jam at card 1)
    engine = EngineConfig(soft_start_s=0.01, beam_glitch_s=min(0.001, 0.05 / rate),
                          beam_min_blocked_s=min(0.005, 0.2 / rate),
                          beam_min_gap_s=min(0.01, 0.3 / rate))
    rig = GpioRig.for_cards(cards, card_rate=rate, rng=random.Random(1))
    # limits scaled to the rate (the first card also waits out the roller's spin-up)
    dev = RiggedGpioDevice(rig, limits=FaultLimits(jam_seconds=2 / rate,
                                                   misfeed_seconds=0.5 + 4 / rate),
                           timings=engine.timings())
    rng = random.Random(2)
    misrouted = counted = 0
    seconds = 0.0
    host = time.perf_counter()
    try:
        for _ in range(passes):
            rig.landed.clear()
            plan = coin_plan(cards, rng)
            report = dev.run_pass(plan)
            counted += report.counted
            seconds += report.seconds
            landed = [int(p) for _, p in rig.landed]
            misrouted += sum(a != b for a, b in zip(landed, plan.labels, strict=False))
            misrouted += abs(len(landed) - cards)
            rig.mechanism.restack(Pile.LEFT)
            rig._sensors()
        lat = sorted(dev.latency.samples)
        host = (time.perf_counter() - host) / passes
    finally:
        dev.close()
    return {"rate": rate, "achieved": counted / seconds, "cards": counted,
            "misrouted": misrouted, "host_seconds_per_pass": host,
            "latency_median_ms": statistics.median(lat) * 1000,
            "latency_p99_ms": lat[int(0.99 * (len(lat) - 1))] * 1000,
            "latency_max_ms": lat[-1] * 1000}


def main() -> None:
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="200,400,800,1600,3200,6400")
    args = parser.parse_args()
    rows = [run(float(r)) for r in args.rates.split(",")]
    print(f"{'cards/s':>8} {'achieved':>8} {'cards':>6} {'misrouted':>9} {'median ms':>9} "
          f"{'p99 ms':>7} {'max ms':>7} {'host s':>7}")
    for r in rows:
        print(f"{r['rate']:>8.0f} {r['achieved']:>8.0f} {r['cards']:>6} {r['misrouted']:>9} "
              f"{r['latency_median_ms']:>9.3f} {r['latency_p99_ms']:>7.3f} "
              f"{r['latency_max_ms']:>7.3f} {r['host_seconds_per_pass']:>7.3f}")
    clean = [r["rate"] for r in rows if r["misrouted"] == 0]
    print(f"highest rate with no misrouted card: {max(clean) if clean else 'none'} cards/s")
    print(json.dumps({"rows": rows, "highest_clean_rate": max(clean) if clean else None}))


if __name__ == "__main__":
    main()
