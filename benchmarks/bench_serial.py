"""Benchmark: the serial link over a real pseudo-terminal.

Round-trip time of a STATUS request (host to the virtual microcontroller and back,
acknowledgements included), and the fastest card rate at which every CARD event of
ten 104-card passes reaches the host. Prints a table, then JSON on the last line.

    python benchmarks/bench_serial.py
"""

from __future__ import annotations

import json
import random
import statistics
import time

from firmware_bridge.device import SerialDevice
from firmware_bridge.messages import Msg
from hardware_sim import SimDevice
from hardware_sim.virtual_mcu import VirtualMCU
from shuffler.clock import ScaledClock
from shuffler.planning import coin_plan


def open_pair(speed: float, cards: int = 104):
    sim = SimDevice.for_cards(cards, clock=ScaledClock(speed), rng=random.Random(1))
    mcu = VirtualMCU(sim)
    return mcu, SerialDevice(mcu.path)


def round_trips(n: int = 500) -> list[float]:
    mcu, dev = open_pair(50)
    try:
        out = []
        for _ in range(n):
            start = time.perf_counter()
            dev._ask(Msg.STATUS, Msg.STATUS_REPLY)
            out.append((time.perf_counter() - start) * 1000)
        return sorted(out)
    finally:
        dev.close()
        mcu.close()


def card_rate(speed: float, passes: int = 10, cards: int = 104) -> dict:
    """Cards a second (real time) the link carries; a lost CARD event shows as a gap."""
    mcu, dev = open_pair(speed, cards)
    lost = seconds = 0.0
    try:
        rng = random.Random(2)
        for _ in range(passes):
            seen: list[int] = []
            start = time.perf_counter()
            real_next = dev._next

            def spy(timeout, seen=seen, real_next=real_next):
                frame = real_next(timeout)
                if frame is not None and frame.type == Msg.CARD:
                    seen.append(int.from_bytes(frame.payload[:2], "big"))
                return frame

            dev._next = spy
            report = dev.run_pass(coin_plan(cards, rng))
            seconds += time.perf_counter() - start
            lost += report.counted - len(set(seen))
            mcu.sim.mechanism.gather()
    finally:
        dev.close()
        mcu.close()
    return {"asked": 5 * speed, "achieved": passes * cards / seconds, "lost_events": int(lost)}


def main() -> None:
    rtt = round_trips()
    rows = [card_rate(speed) for speed in (40, 200, 1000, 5000)]
    print(f"STATUS round trip: median {statistics.median(rtt):.3f} ms, "
          f"p99 {rtt[int(0.99 * (len(rtt) - 1))]:.3f} ms")
    print(f"{'asked cards/s':>14} {'achieved':>9} {'lost CARD events':>17}")
    for r in rows:
        print(f"{r['asked']:>14.0f} {r['achieved']:>9.0f} {r['lost_events']:>17}")
    clean = [r["achieved"] for r in rows if r["lost_events"] == 0]
    best = max(clean) if clean else None
    print(f"fastest rate with no lost event: {best:.0f} cards/s" if best else "none clean")
    print(json.dumps({"rtt_median_ms": statistics.median(rtt),
                      "rtt_p99_ms": rtt[int(0.99 * (len(rtt) - 1))], "rows": rows,
                      "fastest_clean_rate": best}))


if __name__ == "__main__":
    main()
