"""Benchmark: the serial link over a real pseudo-terminal.

Round-trip time of a STATUS request (host to the virtual microcontroller and back,
acknowledgements included); the fastest card rate at which every CARD event of ten
104-card passes reaches the host; and passes on a noisy line (bytes corrupted,
dropped and duplicated in both directions), each report checked against what the
simulated machine really did. Prints tables, then JSON on the last line.

    python benchmarks/bench_serial.py [--passes N] [--noise-only]
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import time

from firmware_bridge.device import SerialDevice
from firmware_bridge.messages import Card, StatusAsk, StatusReply
from hardware_sim import SimDevice
from hardware_sim.virtual_mcu import Noise, VirtualMCU
from shuffler.core.planning import coin_plan
from shuffler.device.clock import ScaledClock
from shuffler.errors import DeviceError


def open_pair(speed: float, cards: int = 104, noise: Noise | None = None, seed: int = 1):
    sim = SimDevice.for_cards(cards, clock=ScaledClock(speed), rng=random.Random(seed))
    mcu = VirtualMCU(sim, noise=noise, seed=seed)
    try:
        return mcu, SerialDevice(mcu.path)
    except BaseException:
        mcu.close()
        raise


def round_trips(n: int = 500) -> list[float]:
    mcu, dev = open_pair(50)
    try:
        out = []
        for _ in range(n):
            start = time.perf_counter()
            dev._ask(StatusAsk(), StatusReply)
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
        real_next = dev._next
        seen: list[int] = []

        def spy(*args):
            msg = real_next(*args)
            if isinstance(msg, Card):
                seen.append(msg.counted)
            return msg

        dev._next = spy  # type: ignore[method-assign]
        done, fault = 0, None
        for _ in range(passes):
            seen.clear()
            start = time.perf_counter()
            try:
                report = dev.run_pass(coin_plan(cards, rng))
            except DeviceError as e:  # the link did not keep up (a loaded host, a high rate)
                fault = str(e)
                break
            seconds += time.perf_counter() - start
            lost += report.counted - len(set(seen))
            done += 1
            mcu.sim.mechanism.gather()
    finally:
        dev.close()
        mcu.close()
    return {"asked": 5 * speed, "achieved": done * cards / seconds if seconds else 0.0,
            "lost_events": int(lost), "fault": fault}


def noisy_passes(corrupt: float, passes: int, cards: int = 24) -> dict:
    """``passes`` passes at ``corrupt`` (drop and duplicate a fifth of it each). A pass
    the host calls complete must have dealt every card and ended; a port that will not
    open is a loud failure, and the next pass opens a new one."""
    noise = Noise(corrupt=corrupt, drop=corrupt / 5, duplicate=corrupt / 5)
    out: collections.Counter[str] = collections.Counter()
    rng, seed, start = random.Random(5), 0, time.perf_counter()
    mcu = dev = None
    while out["tried"] < passes:
        if dev is None or dev._fault is not None:
            if dev is not None:
                dev.close()
                mcu.close()  # type: ignore[union-attr]
            seed += 1
            try:
                mcu, dev = open_pair(50, cards, noise, seed)
            except DeviceError:
                out["tried"] += 1
                out["failed loudly: the port did not open"] += 1
                dev = None
                continue
        assert mcu is not None
        out["tried"] += 1
        report = dev.run_pass(coin_plan(cards, rng))
        running = mcu._running()
        deadline = time.monotonic() + 5
        while mcu._running() and time.monotonic() < deadline:
            time.sleep(0.01)
        dealt = sum(len(p) for p in mcu.sim.mechanism.piles)
        if report.ok:
            out["complete"] += 1
            if running or dealt != cards:
                out["FALSE completion"] += 1
        else:
            kind = report.fault.kind.value if report.fault else "count_mismatch"
            out[f"failed loudly: {kind}"] += 1
        if report.counted > dealt:
            out["WRONG count"] += 1
        mcu.sim.mechanism.gather()
    if dev is not None:
        dev.close()
        mcu.close()  # type: ignore[union-attr]
    return {"corrupt": corrupt, "seconds": round(time.perf_counter() - start, 1), **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=100, help="passes per noise level")
    parser.add_argument("--noise-only", action="store_true")
    args = parser.parse_args()
    result: dict = {}
    if not args.noise_only:
        rtt = round_trips()
        rows = [card_rate(speed) for speed in (40, 200, 1000, 5000)]
        print(f"STATUS round trip: median {statistics.median(rtt):.3f} ms, "
              f"p99 {rtt[int(0.99 * (len(rtt) - 1))]:.3f} ms")
        print(f"{'asked cards/s':>14} {'achieved':>9} {'lost CARD events':>17}")
        for r in rows:
            print(f"{r['asked']:>14.0f} {r['achieved']:>9.0f} {r['lost_events']:>17}"
                  + (f"  stopped: {r['fault']}" if r["fault"] else ""))
        clean = [r["achieved"] for r in rows if r["lost_events"] == 0 and not r["fault"]]
        best = max(clean) if clean else None
        print(f"fastest rate with no lost event: {best:.0f} cards/s" if best else "none clean")
        result.update({"rtt_median_ms": statistics.median(rtt),
                       "rtt_p99_ms": rtt[int(0.99 * (len(rtt) - 1))], "rows": rows,
                       "fastest_clean_rate": best})
    noise = [noisy_passes(level, args.passes) for level in (0.001, 0.01, 0.05)]
    keys = sorted({k for row in noise for k in row} - {"corrupt", "seconds", "tried"})
    print(f"\n{'corrupt':>8} {'tried':>6} {'seconds':>8}  outcomes")
    for row in noise:
        outcomes = ", ".join(f"{k} {row[k]}" for k in keys if row.get(k))
        print(f"{row['corrupt']:>8.1%} {row['tried']:>6} {row['seconds']:>8}  {outcomes}")
    result["noise"] = noise
    print(json.dumps(result))


if __name__ == "__main__":
    main()
