"""Benchmark: how long ``shuffler serve`` takes to be ready, here and under the Pi model.

Ready is what systemd waits for (``Type=notify``): the service's ``READY=1`` on
``NOTIFY_SOCKET``, timed from the spawn. The Pi model is a CPU quota of 1 ms in every
10 ms (a cgroup's ``cpu.max`` of ``1000 10000``, or cgroup v1's CFS quota where the cpu
controller is mounted there): about a Pi Zero 2's single core of Python against this
machine's. Needs root to make the cgroup; without one the throttled rows are left out and
the JSON says why. Runs alternate between the two modes, so a busy machine slows both
alike. Prints a table, then one JSON object. The goal: ready within 1.5 s (median) under
the Pi model (issue 37).

    .venv/bin/python benchmarks/bench_serve_ready.py [--runs 11]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

GOAL_S = 1.5
#: microseconds of CPU per period, and the period: 1 ms in 10 ms
QUOTA_US, PERIOD_US = 1000, 10000
CGROUP = Path("/sys/fs/cgroup")


def _v2_root() -> Path | None:
    """The cgroup v2 hierarchy with the cpu controller (pure v2, or a hybrid's unified)."""
    for root in (CGROUP, CGROUP / "unified"):
        controllers = root / "cgroup.controllers"
        if controllers.is_file() and "cpu" in controllers.read_text().split():
            return root
    return None


def pi_model(name: str) -> tuple[Path | None, str]:
    """A new cgroup throttled to the Pi model and the file a process joins it by, or
    ``None`` and why it cannot be made here."""
    try:
        if (root := _v2_root()) is not None:
            if "cpu" not in (root / "cgroup.subtree_control").read_text().split():
                (root / "cgroup.subtree_control").write_text("+cpu")
            group = root / name
            group.mkdir(exist_ok=True)
            (group / "cpu.max").write_text(f"{QUOTA_US} {PERIOD_US}")
            return group / "cgroup.procs", f"cgroup v2 cpu.max {QUOTA_US} {PERIOD_US}"
        v1 = CGROUP / "cpu"
        if (v1 / "cpu.cfs_quota_us").is_file():
            group = v1 / name
            group.mkdir(exist_ok=True)
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(QUOTA_US))
            return group / "cgroup.procs", (f"cgroup v1 cpu.cfs_quota_us {QUOTA_US} per "
                                            f"cpu.cfs_period_us {PERIOD_US}")
    except OSError as e:
        return None, f"cannot make a throttled cgroup ({e}; it needs root)"
    return None, "no cgroup cpu controller is mounted (neither v2 cpu.max nor v1 CFS quota)"


def remove(procs: Path | None) -> None:
    if procs is not None:
        with contextlib.suppress(OSError):
            procs.parent.rmdir()


def ready_after(argv: list[str], env: dict[str, str], folder: Path,
                procs: Path | None) -> float:
    """Seconds from the spawn of ``argv`` to its ``READY=1`` (in the cgroup of ``procs``)."""
    path = folder / "notify.sock"
    path.unlink(missing_ok=True)
    join: Callable[[], None] | None = None
    if procs is not None:
        def join() -> None:
            procs.write_text("0")  # this process, before it becomes the service
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(path))
        notify.settimeout(60)
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env={**env, "NOTIFY_SOCKET": str(path)},
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, preexec_fn=join)
        try:
            while True:
                try:
                    message = notify.recv(4096).decode()
                except TimeoutError:
                    raise SystemExit("shuffler serve was not ready in 60 s") from None
                if "READY=1" in message.split("\n"):
                    return time.perf_counter() - start
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=60)
            if proc.returncode not in (0, -15):
                raise SystemExit(f"shuffler serve exited {proc.returncode}: {err.decode()[-500:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    shuffler = str(Path(sys.executable).with_name("shuffler"))
    procs, model = pi_model(f"shuffler-bench-{os.getpid()}")
    modes: dict[str, Path | None] = {"unthrottled": None}
    if procs is not None:
        modes["Pi model"] = procs
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_STATE_DIR": str(folder / "state")}
            for name in ("SHUFFLER_CHECK_SCHEMAS", "PYTHONDONTWRITEBYTECODE", "WATCHDOG_USEC"):
                env.pop(name, None)  # as installed: bytecode written once, no test checks
            argv = [shuffler, "--socket", str(folder / "s.sock"), "serve"]
            ready_after(argv, env, folder, None)  # warm: bytecode, the disk cache, the state
            for _ in range(args.runs):
                for mode, group in modes.items():
                    times[mode].append(ready_after(argv, env, folder, group))
    finally:
        remove(procs)
    rows = [{"mode": mode, "median_s": round(statistics.median(t), 3),
             "min_s": round(min(t), 3), "max_s": round(max(t), 3), "runs": len(t)}
            for mode, t in times.items()]
    print(f"{'shuffler serve to READY=1':<28} {'median s':>9} {'min s':>7} {'max s':>7}")
    for row in rows:
        print(f"{row['mode']:<28} {row['median_s']:>9.3f} {row['min_s']:>7.3f} "
              f"{row['max_s']:>7.3f}")
    throttled = next((r for r in rows if r["mode"] == "Pi model"), None)
    met = None if throttled is None else throttled["median_s"] <= GOAL_S
    print(f"Pi model: {model}" if throttled else f"Pi model left out: {model}")
    if met is not None:
        print(f"goal: ready within {GOAL_S} s under the Pi model: {'met' if met else 'NOT met'}")
    print(json.dumps({"benchmark": "serve_ready", "goal_s": GOAL_S, "met": met,
                      "pi_model": model if throttled else None,
                      "why_no_pi_model": None if throttled else model,
                      "python": sys.version.split()[0], "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
