"""Benchmark: from typing ``shuffler stop`` to the motor off, with the config broken.

A served simulator (``shuffler serve``, real time) deals a one-pass hand; once a card
has fallen, ``shuffler stop`` starts as a user's would, its config broken on disk (a
TOML error, a pin clash, an unknown key) and found the way each case says (--config,
SHUFFLER_CONFIG, the user's, the system's; with and without --socket). Two figures per
stop, from the command's start (just before it is spawned, wall clock):

- ``to stop``: to the service's log line for the ``stop`` request (``serve -v
  --log-json``); the service turns the motor off in the same call, before it answers;
- ``to exit``: to the command's exit, after the answer came (an upper bound).

Beside each stop, the floor: a bare ``python -c pass`` of the same interpreter, spawn to
exit, just before it (what the load costs any command).

Issue 46's goal: the motor off within a card interval (0.2 s) of the command's start,
every time, on this machine as loaded as it is. Prints a table, then one JSON object.

    .venv/bin/python benchmarks/bench_stop.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from tests.served import Service  # noqa: E402 - the tests' served simulator

#: a card interval: the goal for the motor off after the command's start
GOAL_S = 0.2
#: a bare interpreter's start and exit, beside each stop
floors: list[float] = []
BROKEN = {"toml": "[hand\ncards = 24\n", "pin_clash": "[pins]\ntouch = 17\nmotor = 17\n",
          "unknown_key": "[hand]\nbogus = 1\n"}
NAMINGS = ("--config", "SHUFFLER_CONFIG", "user's", "system's")


def stop_times(svc: Service) -> list[float]:
    """The wall-clock times of the service's ``stop`` requests, from its log."""
    times = []
    for line in svc.log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "request" and entry.get("cmd") == "stop":
            times.append(datetime.fromisoformat(entry["timestamp"]).timestamp())
    return times


def one_stop(svc: Service, command: list[str],
             env: dict[str, str]) -> tuple[float, float] | None:
    """A one-pass hand, stopped mid-pass by ``command``: (to the stop, to the exit) in s;
    None when the service refused the hand (the simulator's tray left empty)."""
    dealing, done = threading.Event(), threading.Event()

    def deal() -> None:
        try:
            svc.client().request("hand", lambda ev: ev.get("event") == "card" and dealing.set(),
                                 passes=1)
        except Exception:  # refused: the caller serves a new simulator
            pass
        finally:
            done.set()

    threading.Thread(target=deal, daemon=True).start()
    while not dealing.wait(0.05):
        if done.is_set():
            return None
    before = len(stop_times(svc))
    floor = time.time()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    floors.append(time.time() - floor)
    start = time.time()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL)
    ended = time.time()
    if proc.returncode != 0 or not proc.stdout.startswith("stopped"):
        raise SystemExit(f"{command} failed ({proc.returncode}): {proc.stderr[-500:]}")
    done.wait(30)
    stops = stop_times(svc)[before:]
    if not stops:
        raise SystemExit("the service logged no stop")
    return stops[0] - start, ended - start


def case(tmp: Path, svc: Service, broken: str, naming: str, with_socket: bool,
         shuffler: str) -> tuple[list[str], dict[str, str]]:
    root, home = tmp / "root", tmp / "home"
    env = {k: v for k, v in os.environ.items()
           if k not in ("SHUFFLER_CONFIG", "SHUFFLER_SOCKET")}
    env.update(SHUFFLER_SYSTEM_ROOT=str(root), XDG_CONFIG_HOME=str(home),
               XDG_RUNTIME_DIR=str(tmp / "runtime"), SHUFFLER_STATE_DIR=str(tmp / "cli"))
    path = {"system's": root / "etc" / "shuffler" / "config.toml",
            "user's": home / "shuffler" / "config.toml"}.get(naming, tmp / "named.toml")
    for old in (root / "etc" / "shuffler" / "config.toml", home / "shuffler" / "config.toml",
                tmp / "named.toml"):
        old.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BROKEN[broken] + f'[service]\nsocket = "{svc.socket}"\n')
    args = ["--config", str(path)] if naming == "--config" else []
    if naming == "SHUFFLER_CONFIG":
        env["SHUFFLER_CONFIG"] = str(path)
    sock = ["--socket", str(svc.socket)] if with_socket else []
    return [shuffler, *args, *sock, "stop"], env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="stops per case")
    args = parser.parse_args()
    shuffler = str(Path(sys.executable).parent / "shuffler")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for broken in sorted(BROKEN):
            for naming in NAMINGS:
                for with_socket in (False, True):
                    # a service of its own each case: a stop that came as the pass
                    # ended leaves the simulator's tray empty (issue 46)
                    got: list[tuple[float, float]] = []
                    while len(got) < args.runs:
                        svc = Service(tmp, speed=1.0, name=f"svc{len(rows)}-{len(got)}").start()
                        try:
                            command, env = case(tmp, svc, broken, naming, with_socket,
                                                shuffler)
                            while len(got) < args.runs and (
                                    timing := one_stop(svc, command, env)) is not None:
                                got.append(timing)
                        finally:
                            svc.stop()
                    rows.append({"broken": broken, "named": naming, "socket": with_socket,
                                 "to_stop_s": [round(g[0], 4) for g in got],
                                 "to_exit_s": [round(g[1], 4) for g in got]})
    to_stop = [t for r in rows for t in r["to_stop_s"]]
    to_exit = [t for r in rows for t in r["to_exit_s"]]
    print(f"{'broken':<12} {'named by':<16} {'--socket':<8} {'to stop (max)':>14} "
          f"{'to exit (max)':>14}")
    for r in rows:
        print(f"{r['broken']:<12} {r['named']:<16} {'yes' if r['socket'] else 'no':<8} "
              f"{max(r['to_stop_s']):>13.3f}s {max(r['to_exit_s']):>13.3f}s")
    summary = {"stops": len(to_stop), "goal_s": GOAL_S, "cpus": os.cpu_count(),
               "load": round(os.getloadavg()[0], 2),
               "to_stop_median_s": round(statistics.median(to_stop), 4),
               "to_stop_max_s": round(max(to_stop), 4),
               "to_exit_median_s": round(statistics.median(to_exit), 4),
               "to_exit_max_s": round(max(to_exit), 4),
               "within_goal_share": round(sum(t <= GOAL_S for t in to_stop) / len(to_stop), 3),
               "bare_python_median_s": round(statistics.median(floors), 4),
               "bare_python_max_s": round(max(floors), 4),
               "within_goal": max(to_stop) <= GOAL_S, "cases": rows}
    print(f"command start -> motor off: median {summary['to_stop_median_s']:.3f} s, max "
          f"{summary['to_stop_max_s']:.3f} s over {len(to_stop)} stops (goal {GOAL_S} s); "
          f"to the command's exit: median {summary['to_exit_median_s']:.3f} s, max "
          f"{summary['to_exit_max_s']:.3f} s; a bare `python -c pass`: median "
          f"{summary['bare_python_median_s']:.3f} s, max {summary['bare_python_max_s']:.3f} s; "
          f"load {summary['load']}")
    print(json.dumps(summary))
    return 0 if summary["within_goal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
