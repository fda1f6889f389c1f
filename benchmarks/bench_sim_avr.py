"""Benchmark: the firmware in simavr (``--device sim-avr``).

For rising card rates, passes of 104 cards on the simulated chip: cards misrouted
(landed on a pile other than the plan's: the harness models the servo's 20 ms frame
and a 0.1 s flap, so past a few cards a second the flap's real latency shows here),
the pass time the firmware reports against the wall time the host waited, how far
simulated time slipped behind wall time, and the harness's CPU use (a share of one
core), and any faults (a host too starved of CPU to send its heartbeat in time ends a
pass with link_lost). Prints a table, then the figures as JSON on the last line.

    python benchmarks/bench_sim_avr.py [--rates 10,25,50,100] [--passes 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

from hardware_sim.sim_avr import SimAvr, serial_on
from shuffler.core.mechanics import deal_piles
from shuffler.core.planning import coin_plan


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cards(chip: SimAvr, key: str) -> list[int]:
    return [int(c) for c in chip.state()[key].split(",") if c]


def run(rate: float, passes: int, n: int = 104) -> dict:
    chip = SimAvr(f"--cards={n}", f"--card-rate={rate}", "--spinup=0.01")
    dev = serial_on(chip)
    rng = random.Random(2)
    misrouted = counted = 0
    faults: list[str] = []
    chip_s = wall_s = 0.0
    try:
        cpu0, wall0 = cpu_seconds(chip.proc.pid), time.monotonic()
        for _ in range(passes):
            before = cards(chip, "tray")
            plan = coin_plan(n, rng)
            start = time.monotonic()
            report = dev.run_pass(plan)
            wall_s += time.monotonic() - start
            chip_s += report.seconds
            counted += report.counted
            if report.fault is not None:
                faults.append(report.fault.kind.value)
            k = report.counted  # the top feed dealt the first k cards of the tray
            want = deal_piles(before[:k], plan.labels[:k], dev.info.feed)
            got = (cards(chip, "left"), cards(chip, "right"))
            misrouted += sum(card not in got[pile] for pile in (0, 1) for card in want[pile])
            chip.command("gather")
        cpu = (cpu_seconds(chip.proc.pid) - cpu0) / (time.monotonic() - wall0)
        slip = float(chip.state()["slip_ms"])
    finally:
        dev.close()
    return {"rate": rate, "cards": counted, "misrouted": misrouted, "faults": faults,
            "chip_s_per_pass": round(chip_s / passes, 3),
            "host_s_per_pass": round(wall_s / passes, 3), "slip_ms": slip,
            "harness_cpu": round(cpu, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="10,25,50,100")
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    rows = [run(float(r), args.passes) for r in args.rates.split(",")]
    print(f"{'rate/s':>7} {'cards':>6} {'misrouted':>9} {'chip s':>7} {'host s':>7} "
          f"{'slip ms':>8} {'cpu':>6}  faults")
    for r in rows:
        print(f"{r['rate']:>7.0f} {r['cards']:>6} {r['misrouted']:>9} "
              f"{r['chip_s_per_pass']:>7.3f} {r['host_s_per_pass']:>7.3f} "
              f"{r['slip_ms']:>8.0f} {r['harness_cpu']:>6.1%}  {','.join(r['faults']) or '-'}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
