"""Benchmark: how long the CLI takes to start, against bare ``import click, structlog``.

Whole processes, as a user runs them, each timed from spawn to exit; the median of
``--runs`` runs (interleaved, so a busy machine slows all three alike). Our modules run
from cached bytecode, as an installed package's do (pip compiles click's and
structlog's), even where PYTHONDONTWRITEBYTECODE is set. Prints a table, then one JSON
object. The goals: each command at most 1.2x the baseline (issue 13), and ``status``
asked of a running service (``shuffler serve`` on the simulator, started here) at most
1.0x: a thin client costs no more than the imports it cannot avoid (issue 26).

    .venv/bin/python benchmarks/bench_startup.py [--runs 21]
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

GOAL = 1.2
#: the thin client's goal: status through a running service
SOCKET_GOAL = 1.0
THROUGH_SERVICE = "shuffler --socket S status (a service)"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                          check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-500:]}")
    return elapsed


def serve(shuffler: str, folder: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``shuffler serve`` on the simulator, answering on ``folder/s.sock``."""
    sock = folder / "s.sock"
    proc = subprocess.Popen([shuffler, "--state-dir", str(folder / "served"), "--socket",
                             str(sock), "serve"], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("shuffler serve did not start")
        time.sleep(0.05)
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    py = sys.executable
    shuffler = str(Path(py).with_name("shuffler"))
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SHUFFLER_STATE_DIR": str(Path(tmp) / "state"),
               "SHUFFLER_CONFIG": "", "XDG_RUNTIME_DIR": str(Path(tmp) / "run")}
        env.pop("SHUFFLER_CHECK_SCHEMAS", None)
        env.pop("SHUFFLER_SOCKET", None)  # no service at the default socket: status in-process
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up run writes our bytecode
        cases = {
            "baseline: python -c 'import click, structlog'":
                [py, "-c", "import click, structlog"],
            "shuffler --help": [shuffler, "--help"],
            "shuffler --json status": [shuffler, "--json", "status"],
            THROUGH_SERVICE: [shuffler, "--socket", str(Path(tmp) / "s.sock"), "--json",
                              "status"],
        }
        service = serve(shuffler, Path(tmp), env)
        try:
            for cmd in cases.values():  # warm the disk cache and write the state once
                timed(cmd, env)
            times: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(args.runs):
                for name, cmd in cases.items():
                    times[name].append(timed(cmd, env))
        finally:
            service.terminate()
            service.wait(30)
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = next(iter(medians.values()))
    print(f"{'command':<46} {'median ms':>10} {'x baseline':>11}")
    rows = []
    for name, m in medians.items():
        ratio = m / base
        print(f"{name:<46} {m * 1000:>10.1f} {ratio:>11.2f}")
        rows.append({"command": name, "median_ms": round(m * 1000, 2),
                     "ratio": round(ratio, 3), "runs": args.runs})
    ok = all(r["ratio"] <= GOAL for r in rows) and medians[THROUGH_SERVICE] / base <= SOCKET_GOAL
    print(f"goal: every command at most {GOAL}x the baseline, status through a service at "
          f"most {SOCKET_GOAL}x: {'met' if ok else 'NOT met'}")
    print(json.dumps({"benchmark": "startup", "goal_ratio": GOAL,
                      "socket_goal_ratio": SOCKET_GOAL, "met": ok,
                      "python": sys.version.split()[0], "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
