"""A simulated evening on sim-gpio: hands through the real GpioDevice on the rig,
in-process (as ``serve`` runs them), and the process's RSS after each; it must stay
within 10 MB of its value after hand 5 (issue 33: it grew 7.4 MB a hand).

    .venv/bin/python benchmarks/bench_sim_memory.py [--hands 100]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import secrets
import tempfile
import time
from pathlib import Path

from hardware_sim import SimBattery
from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.hand import HandTerms, play_hand
from shuffler.core.planning import Mode
from shuffler.logs import configure
from shuffler.store.state import StateStore

AFTER, SLACK_MB = 5, 10.0


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hands", type=int, default=100)
    args = ap.parse_args()
    configure(0)
    config = Config()
    rig = GpioRig.for_cards(24, rng=random.Random(1), gpio=config.gpio)
    device = RiggedGpioDevice(rig)
    controller = PassController(device, StateStore(Path(tempfile.mkdtemp())))
    rss: dict[int, float] = {}
    start = time.perf_counter()
    try:
        for number in range(1, args.hands + 1):
            report = play_hand(controller, config, HandTerms(5, 24, Mode.PLANNED),
                               rng=secrets.SystemRandom())
            assert report.completed, report
            rig.clock.sleep(2.0)  # the rig's dealer gathers the pack
            if number % 50 == 0:  # a block lasts about 74 hands: the dealer changes it
                rig.mechanism.battery = SimBattery()
            gc.collect()
            rss[number] = rss_mb()
            if number in (1, AFTER) or number % 10 == 0:
                pins = sum(len(p.states) for p in rig.factory.pins.values())
                print(f"hand {number:>4}: RSS {rss[number]:6.1f} MB, pin states {pins}")
    finally:
        device.close()
    base = rss.get(AFTER, rss[max(rss)])
    grown = max(v for k, v in rss.items() if k >= min(AFTER, max(rss))) - base
    print(json.dumps({"hands": args.hands, "rss_after_hand_5_mb": round(base, 1),
                      "grown_mb": round(grown, 1),
                      "seconds": round(time.perf_counter() - start, 1)}))
    return 0 if grown < SLACK_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())
