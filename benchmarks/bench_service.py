"""Benchmark: ``shuffler --json status`` against a running service, and the service's
idle footprint. Prints a table, then the figures as JSON on the last line.

    python benchmarks/bench_service.py [--runs 30] [--idle 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shuffler.service.client import ServiceClient


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--idle", type=float, default=10.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    sock = tmp / "s.sock"
    env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_SOCKET": str(sock)}
    proc = subprocess.Popen([sys.executable, "-m", "shuffler", "--state-dir", str(tmp / "state"),
                             "serve"], env=env, stderr=subprocess.DEVNULL)
    try:
        while ServiceClient.connect(sock) is None:
            time.sleep(0.05)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "shuffler", "--json", "status"], env=env,
                           check=True, capture_output=True)
            times.append((time.perf_counter() - start) * 1000)
        client = ServiceClient.connect(sock)
        rtt = []
        for _ in range(200):
            start = time.perf_counter()
            client.request("status")
            rtt.append((time.perf_counter() - start) * 1000)
        client.close()
        time.sleep(1)
        cpu0 = cpu_seconds(proc.pid)
        time.sleep(args.idle)
        idle_cpu = (cpu_seconds(proc.pid) - cpu0) / args.idle * 100
        rows = {
            "status_cli_median_ms": statistics.median(times),
            "status_cli_p95_ms": sorted(times)[int(0.95 * (len(times) - 1))],
            "status_request_median_ms": statistics.median(rtt),
            "idle_rss_mib": rss_kib(proc.pid) / 1024,
            "idle_cpu_percent": idle_cpu,
        }
    finally:
        proc.terminate()
        proc.wait(10)
    for key, value in rows.items():
        print(f"{key:<28} {value:>10.2f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
