"""Run the test suite with both cores busy, several times in a row.

Timing-sensitive tests belong on virtual time; this script is how we check that they
are: it starts one busy loop per core, runs ``pytest -q`` RUNS times beside them and
prints a table and JSON (passed, failed, seconds per run). Exit 0 only when every run
passed.

    .venv/bin/python benchmarks/busy_suite.py --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

BUSY = "while True: pass"


def run_suite(pytest_args: list[str], log: str | None) -> dict[str, object]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *pytest_args], capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    if log:
        with open(log, "w", encoding="utf-8") as f:
            f.write(proc.stdout + proc.stderr)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", tail)}
    failures = re.findall(r"^FAILED (\S+)", proc.stdout, flags=re.M)
    return {"exit": proc.returncode, "seconds": round(seconds, 1), "summary": tail,
            "passed": counts.get("passed", 0), "failed": counts.get("failed", 0),
            "failures": failures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 2,
                        help="busy loops beside the suite (default: one per core)")
    parser.add_argument("--log-dir", help="keep each run's whole pytest output here")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    args = parser.parse_args()
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    loops = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.busy)]
    results = []
    try:
        for i in range(args.runs):
            log = os.path.join(args.log_dir, f"run{i + 1}.txt") if args.log_dir else None
            r = run_suite(args.pytest_args, log)
            results.append(r)
            print(f"run {i + 1}/{args.runs}: exit {r['exit']}, {r['passed']} passed, "
                  f"{r['failed']} failed, {r['seconds']} s {' '.join(r['failures'])}",
                  flush=True)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    ok = all(r["exit"] == 0 for r in results)
    print(f"\n{'run':>4} {'exit':>5} {'passed':>7} {'failed':>7} {'seconds':>8}")
    for i, r in enumerate(results, 1):
        print(f"{i:>4} {r['exit']:>5} {r['passed']:>7} {r['failed']:>7} {r['seconds']:>8}")
    print(json.dumps({"busy_loops": args.busy, "runs": results, "all_passed": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
