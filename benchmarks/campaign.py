"""The fault and fuzz campaign: everything an outsider would throw at the program.

Sections (each counts inputs tried and outcomes):

- ``faults <device>``: every fault (jam, misfeed, double feed) at every card of 24
  and 32 cards, and sampled across 104, on sim, sim-gpio and sim-serial; the report
  must name the fault and the count, a jam or misfeed must latch and refuse the next
  pass, and no pass may call itself complete.
- ``sigkill``: ``shuffler hand``/``pass`` killed with SIGKILL at several points of a
  pass; afterwards the state file passes its schema, no audit line is torn, every
  latched fault the audit log holds is still latched, and status answers.
- ``serial noise <p>``: passes over a line corrupting p of the bytes (and dropping
  and duplicating a fifth of that); a pass the host calls complete must have dealt
  every card (checked against the simulated machine).
- ``fuzz cli``, ``fuzz config``, ``fuzz state``, ``fuzz socket``, ``fuzz serial``:
  generated inputs (hypothesis, fixed seeds) for the command line, config files,
  state files, requests to a running ``shuffler serve`` and serial frames.
- ``files ...``, ``torn audit``, ``tmpfs full``, ``symlinks``, ``socket``
  (benchmarks/campaign_files.py): every writing file operation of pass, hand, clear and
  a service's hand killed before and after or failed (EIO, ENOSPC); torn audit tails; a
  real tmpfs filled mid-pass (root); symlinked state files; a squatted socket (root);
  idle-connection floods. Its summary line: runs, latches lost, records lost,
  tracebacks.

Outcomes: ok / clean error (a documented exit code and a one-line message) /
traceback (exit 1 or an exception: a bug) / hang / lost latch / lost record (a whole
audit record written, then gone) / false completion /
wrong (a report or a file that is wrong but not one of those: a wrong count, a torn
audit line, a state file that fails its schema). Prints a table, the failures with
a command that reproduces each, and JSON on the last line.

    python benchmarks/campaign.py --quick      # about a minute
    python benchmarks/campaign.py --full       # several minutes on 2 cores
    python benchmarks/campaign.py --full --only faults,sigkill --json-out out.json
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUTCOMES = ("ok", "clean error", "traceback", "hang", "lost latch", "lost record",
            "false completion", "wrong")
BAD = ("traceback", "hang", "lost latch", "lost record", "false completion", "wrong")
SHUFFLER = str(Path(sys.executable).with_name("shuffler"))
#: simulated time per real second, per backend: fast, but the rig and the pty keep up. The
#: gpio rig runs in real time: at 100 (500 cards a second) on a loaded machine it loses a
#: beam edge now and then; at 40 (200 cards a second, as the gpio tests use) it does not
SPEED = {"sim": 1e6, "sim-gpio": 40.0, "sim-serial": 200.0}


#: every scratch folder of this run (workers are forked, so they share it); main removes it
RUN_DIR = Path(tempfile.gettempdir()) / f"campaign-{os.getpid()}"


def scratch(prefix: str) -> Path:
    RUN_DIR.mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=RUN_DIR))


class Hang(BaseException):
    """Raised by the alarm when one input takes longer than its limit."""


def quiet() -> None:
    """The program's logs off: the campaign judges outcomes, and stdout is its table."""
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
                        logger_factory=structlog.PrintLoggerFactory(io.StringIO()))


@contextlib.contextmanager
def limit(seconds: float) -> Iterator[None]:
    def ring(signum, frame):
        raise Hang()

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Section:
    name: str
    counts: collections.Counter = field(default_factory=collections.Counter)
    failures: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    #: why the section (or part of it) did not run here, e.g. "needs root"
    skipped: str = ""

    @property
    def tried(self) -> int:
        return sum(self.counts.values())

    def add(self, outcome: str, what: str = "", repro: str = "", detail: str = "") -> None:
        assert outcome in OUTCOMES, outcome
        self.counts[outcome] += 1
        if outcome in BAD and len(self.failures) < 20:
            self.failures.append({"outcome": outcome, "input": what[:300],
                                  "repro": repro[:600], "detail": detail[-600:]})

    def to_dict(self) -> dict:
        return {"name": self.name, "tried": self.tried, "seconds": round(self.seconds, 1),
                **{o: self.counts[o] for o in OUTCOMES}, "failures": self.failures,
                "skipped": self.skipped}


def exit_outcome(code: int | None, output: str = "") -> str:
    """The README's exit codes: 0 ok, 2/3/4 a clean refusal, anything else a bug."""
    if code == 0:
        return "ok"
    if code in (2, 3, 4) and "Traceback" not in output:
        return "clean error"
    return "traceback"


def cmdline(args: list[str]) -> str:
    return "shuffler " + " ".join(shlex.quote(a) for a in args)


# -- the fault matrix --------------------------------------------------------------


def matrix_cases(full: bool, loads: tuple[int, ...] = (24, 32, 104)
                 ) -> list[tuple[int, str, int]]:
    """(cards, kind, position): every card of 24 and 32, 31 across 104 (quick: a few)."""
    cases = []
    for cards in loads:
        if cards == 104:
            positions = sorted({1, 2, 52, 103, 104, *range(4, 104, 4)} if full
                               else {1, 52, 104})
        else:
            positions = list(range(1, cards + 1)) if full else [1, cards // 2, cards]
        cases += [(cards, kind, p) for kind in ("jam", "misfeed", "double") for p in positions]
    return cases


def fault_case(device: str, cards: int, kind: str, pos: int, seed: int = 1) -> tuple[str, str]:
    """Run one pass with one injected fault; the outcome and what was wrong."""
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.core.planning import coin_plan
    from shuffler.device.contract import FaultKind
    from shuffler.device.registry import SimOptions, open_device
    from shuffler.errors import FaultLatchedError, ShufflerError
    from shuffler.store.state import StateStore

    cfg = Config()
    with tempfile.TemporaryDirectory() as folder:
        try:
            with limit(60):
                dev = open_device(device, cfg, cards=cards, sim=SimOptions(
                    speed=SPEED[device], seed=seed, faults=(f"{kind}:{pos}",)))
                try:
                    ctl = PassController(dev, StateStore(Path(folder)), cfg.battery, 4)
                    report = ctl.run_pass(coin_plan(cards, random.Random(seed)))
                    latched = StateStore(Path(folder)).load().fault
                    refused = False
                    if kind in ("jam", "misfeed"):  # a double feed leaves the tray empty
                        try:
                            ctl.check_ready(cards)
                        except FaultLatchedError:
                            refused = True
                finally:
                    dev.close()
        except Hang:
            return "hang", "no answer within 60 s"
        except ShufflerError as e:
            return "clean error", str(e)
        except Exception as e:
            return "traceback", f"{type(e).__name__}: {e}"
    got = (report.fault.kind.value if report.fault else None, report.counted)
    if kind == "double" and pos == cards:  # the last card has no second card to drag
        want = (None, cards)
    elif kind == "double":
        want = (FaultKind.COUNT_MISMATCH.value, cards - 1)
    else:
        want = (kind, pos - 1)
    if report.ok and want[0] is not None:
        return "false completion", f"reported {report.counted}/{cards}, no fault"
    if got != want:
        return "wrong", f"reported {got}, expected {want}"
    if kind in ("jam", "misfeed") and (latched is None or not refused):
        return "lost latch", f"latched in state: {latched}, next pass refused: {refused}"
    return "ok", ""


def run_matrix(device: str, full: bool, loads: tuple[int, ...] = (24, 32, 104)) -> Section:
    section = Section(f"faults {device} {'/'.join(map(str, loads))}")
    for cards, kind, pos in matrix_cases(full, loads):
        outcome, detail = fault_case(device, cards, kind, pos)
        repro = cmdline(["--no-service", "--device", device, "--sim-seed", "1",
                         "--sim-fault", f"{kind}:{pos}", "pass", "--cards", str(cards)])
        section.add(outcome, f"{kind}:{pos} of {cards}", repro, detail)
    return section


# -- SIGKILL in the middle ------------------------------------------------------------


def run(args: list[str], state_dir: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_STATE_DIR": str(state_dir)}
    return subprocess.run([SHUFFLER, "--no-service", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _in_flight(state_dir: Path) -> bool:
    try:
        return json.loads((state_dir / "state.json").read_text()).get("in_flight") is not None
    except (OSError, ValueError):
        return False


def kill_case(device: str, args: list[str], delay: float) -> tuple[str, str]:
    """Start ``args``, SIGKILL it ``delay`` s after its first pass is in flight, then
    check what it left behind."""
    from shuffler.device.contract import FaultKind
    from shuffler.store.state import Invalid, check_state

    with tempfile.TemporaryDirectory() as folder:
        state_dir = Path(folder)
        env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_STATE_DIR": folder}
        child = subprocess.Popen([SHUFFLER, "--no-service", "--device", device, *args],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 30
        while not _in_flight(state_dir) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay)
        child.kill()
        stderr = child.communicate()[1].decode(errors="replace")
        if "Traceback" in stderr:
            return "traceback", stderr
        state_file = state_dir / "state.json"
        try:
            left = check_state(json.loads(state_file.read_bytes()) if state_file.exists() else
                               {"version": 1, "fault": None})
        except (Invalid, ValueError) as e:
            return "wrong", f"state after the kill fails its schema: {e}"
        audit = state_dir / "audit.jsonl"
        lines = audit.read_bytes().split(b"\n") if audit.exists() else [b""]
        if lines[-1] != b"" or any(not _json_ok(line) for line in lines[:-1]):
            return "wrong", "a torn audit line"
        entries = [json.loads(line) for line in lines[:-1]]
        # a jam in the log, or a pass cut off in flight (cards may be in the machine)
        latched = left.in_flight is not None or any(
            e.get("fault") and FaultKind(e["fault"]["kind"]).latches for e in entries)
        status = run(["--json", "status"], state_dir)
        outcome = exit_outcome(status.returncode, status.stderr)
        if outcome != "ok":
            return outcome, f"status after the kill: exit {status.returncode}: {status.stderr}"
        fault = json.loads(status.stdout).get("fault")
        again = run(["--sim-speed", "1e6", "pass"], state_dir)
        if latched and (fault is None or again.returncode != 3):
            return "lost latch", (f"the audit log holds a latched fault; status says "
                                  f"{fault}, the next pass exits {again.returncode}")
        if latched:
            return "ok", ""
        return exit_outcome(again.returncode, again.stderr), again.stderr


def _json_ok(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def run_sigkill(full: bool) -> Section:
    section = Section("sigkill")
    delays = (0.0, 0.05, 0.15, 0.3, 0.5, 0.8) if full else (0.05,)
    devices = ("sim", "sim-gpio", "sim-serial") if full else ("sim",)
    for device in devices:
        for delay in delays:
            for args in (["--sim-speed", "4", "hand", "--passes", "3"],
                         ["--sim-speed", "4", "--sim-fault", "jam:13", "pass"]):
                outcome, detail = kill_case(device, args, delay)
                section.add(outcome, f"{device} {' '.join(args)}, killed {delay} s into the "
                            "pass", cmdline(["--no-service", "--device", device, *args]) +
                            f" & sleep {delay}; kill -9 $!", detail)
    return section


# -- serial noise --------------------------------------------------------------------


def run_noise(level: float, passes: int) -> Section:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_serial import noisy_passes

    section = Section(f"serial noise {level:.1%}")
    try:
        with limit(60 + passes * 5):
            row = noisy_passes(level, passes)
    except Hang:
        section.add("hang", f"{passes} passes at {level:.1%}")
        return section
    except Exception as e:
        section.add("traceback", f"{passes} passes at {level:.1%}", "",
                    f"{type(e).__name__}: {e}")
        return section
    repro = f"python benchmarks/bench_serial.py --noise-only --passes {passes}"
    for key, n in row.items():
        if key in ("corrupt", "seconds", "tried"):
            continue
        outcome = {"complete": "ok", "FALSE completion": "false completion",
                   "WRONG count": "wrong"}.get(key, "clean error")
        for _ in range(n):
            section.add(outcome, f"a pass at {level:.1%}: {key}", repro, key)
    section.counts["ok"] -= row.get("FALSE completion", 0)  # counted as complete too
    return section


# -- fuzzers ---------------------------------------------------------------------------


def _hypothesis(examples: int, seed: int):
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as hseed

    def wrap(test):
        return hseed(seed)(settings(max_examples=examples, database=None, deadline=None,
                                    phases=[Phase.generate], derandomize=False,
                                    suppress_health_check=list(HealthCheck))(test))
    return wrap


def _json_values():
    from hypothesis import strategies as st

    scalars = (st.none() | st.booleans() | st.integers() | st.integers(-3, 200)
               | st.floats() | st.text(max_size=20))
    return st.recursive(scalars, lambda kids: st.lists(kids, max_size=4)
                        | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=12)


def invoke_cli(args: list[str], env: dict[str, str], seconds: float = 20) -> tuple[str, str]:
    """The CLI in this process (fast): its outcome and output."""
    from click.testing import CliRunner

    from shuffler_cli.main import cli

    runner = CliRunner()
    try:
        with limit(seconds):
            result = runner.invoke(cli, args, env=env)
    except Hang:
        return "hang", ""
    finally:
        quiet()  # the CLI pointed the logs at the runner's stream, closed by now
    output = result.output + (getattr(result, "stderr", "") or "")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        return "traceback", "".join(traceback.format_exception(result.exception))
    return exit_outcome(result.exit_code, output), output


def run_fuzz_cli(examples: int, seed: int) -> Section:
    from hypothesis import given
    from hypothesis import strategies as st

    section = Section("fuzz cli")
    folder = scratch("campaign-cli-")
    digits = st.sampled_from(["1", "13", "24", "0", "-1", "999", "²", "١", "1e3", "nan", "",
                              "13:1", "13:x", " 7"])
    fault = st.builds(lambda k, d: f"{k}:{d}", st.sampled_from(
        ["jam", "misfeed", "double", "battery", "fire", ""]), digits) | st.text(max_size=12)
    number = st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e-9", "x", "1e308", "²",
                              "1e6", "20"]) | st.floats().map(str)
    paths = st.sampled_from([str(folder / "s"), "/proc/x", "/dev/null", "/", "",
                             str(folder / ("x" * 300)), "/nonexistent/a/b", "\u00e9t\u00e9"])
    options = st.lists(st.one_of(
        st.tuples(st.just("--sim-fault"), fault),
        st.tuples(st.just("--sim-speed"), number),
        st.tuples(st.just("--sim-seed"), st.integers().map(str) | st.text(max_size=5)),
        st.tuples(st.just("--sim-dealer"), st.sampled_from(["other", "both", "x"])),
        st.tuples(st.just("--device"), st.sampled_from(["sim", "sim-gpio", "bogus", "",
                                                        "serial:", "gpio"])),
        st.tuples(st.just("--state-dir"), paths),
        st.tuples(st.just("--config"), paths),
        st.tuples(st.just("--socket"), paths),
        st.tuples(st.sampled_from(["--json", "-v", "--log-json", "--no-color"])),
    ), max_size=4)
    count = st.sampled_from(["1", "2", "24", "104", "105", "0", "-3", "x", "nan", "²"])
    command = st.one_of(
        st.tuples(st.sampled_from(["status", "battery", "clear", "score", "--help"])),
        st.tuples(st.sampled_from(["pass", "battery"]), st.just("--cards"), count),
        st.tuples(st.just("hand"), st.just("--passes"), st.sampled_from(["1", "2", "0", "31",
                                                                         "x"])),
        st.tuples(st.just("mixing"), st.sampled_from(["--cards", "--passes", "--target"]),
                  count | number),
        st.tuples(st.just("simulate"), st.sampled_from(["--cards", "--orders", "--trials",
                                                        "--seed"]), count | paths),
        st.lists(st.text(max_size=10), max_size=3).map(tuple),
    )

    @_hypothesis(examples, seed)
    @given(options, command)
    def one(opts, cmd):
        if any(c in ("pass", "hand", "simulate") for c in cmd):
            # keep every pass quick: a fuzzed slow speed only where nothing moves
            opts = [("--sim-speed", "1e6"), *(o for o in opts if o[0] != "--sim-speed")]
            if "simulate" in cmd:
                cmd = (*cmd, "--trials", "3")
        args = [a for opt in opts for a in opt] + list(cmd)
        env = {"SHUFFLER_STATE_DIR": str(folder / "state"), "SHUFFLER_CONFIG": "",
               "SHUFFLER_SOCKET": str(folder / "no.sock")}
        outcome, out = invoke_cli(["--no-service", *args], env)
        section.add(outcome, " ".join(args), cmdline(["--no-service", *args]), out)

    with contextlib.chdir(folder):  # relative paths (--orders 24, --state-dir x) land here
        one()
    return section


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == float("inf") else
                                     "-inf" if v == float("-inf") else repr(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    return '""'


CONFIG_KEYS = {
    "": ["device", "state_dir"],
    "mechanism": ["feed", "card_rate", "jam_limit_s", "misfeed_limit_s", "retries",
                  "reverse_s", "stall_volts", "max_pass_s", "both_window_s"],
    "hand": ["passes", "cards", "mode", "touch_timeout_s"],
    "table": ["seats", "first_dealer", "decks", "game_to"],
    "battery": ["chemistry", "low_volts", "critical_volts", "cutoff_load_volts"],
    "pins": ["touch", "motor", "beam", "tray", "led_red"],
    "gpio": ["servo_angle", "adc_channel", "divider_ratio", "motor", "diverter"],
    "service": ["socket", "group", "max_clients"],
    "web": ["enabled", "lan", "port"],
    "mqtt": ["host", "port", "table", "tls", "ca_file", "keepalive_s"],
    "nonsense": ["x"],
}


def run_fuzz_config(examples: int, seed: int) -> Section:
    from hypothesis import given
    from hypothesis import strategies as st

    section = Section("fuzz config")
    folder = scratch("campaign-config-")
    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
    value = st.recursive(st.booleans() | st.integers(-2, 2**70) | st.integers(0, 110)
                         | st.floats() | text, lambda kids: st.lists(kids, max_size=3)
                         | st.dictionaries(text, kids, max_size=3), max_leaves=8)
    entry = st.sampled_from(sorted(CONFIG_KEYS)).flatmap(
        lambda sec: st.tuples(st.just(sec), st.sampled_from(CONFIG_KEYS[sec]) | text, value))
    documents = st.lists(entry, max_size=6).map(_toml_doc)
    raw = st.binary(max_size=200) | st.builds(
        lambda d, n: ("a = " + "[" * n + "]" * n if d else "[" + ".".join(["t"] * n) + "]"
                      ).encode(), st.booleans(), st.integers(1, 3000))

    @_hypothesis(examples, seed)
    @given(documents.map(str.encode) | raw)
    def one(content):
        path = folder / "config.toml"
        path.write_bytes(content)
        env = {"SHUFFLER_STATE_DIR": str(folder / "state"), "SHUFFLER_SOCKET": str(folder / "s")}
        args = ["--no-service", "--config", str(path), "--sim-speed", "1e6", "status"]
        outcome, out = invoke_cli(args, env)
        section.add(outcome, repr(content[:200]), f"printf %s {shlex.quote(repr(content))} > "
                    f"c.toml; {cmdline(args)}", out)

    one()
    specials = {"FIFO": "fifo", "/dev/zero": "/dev/zero", "/dev/null": "/dev/null",
                "folder": str(folder), "missing": str(folder / "missing.toml")}
    os.mkfifo(folder / "fifo")
    for name, target in specials.items():
        target = str(folder / "fifo") if target == "fifo" else target
        args = ["--no-service", "--config", target, "status"]
        outcome, out = invoke_cli(args, {"SHUFFLER_STATE_DIR": str(folder / "state")}, 10)
        section.add(outcome, name, cmdline(args), out)
    return section


def _toml_doc(entries: list[tuple[str, str, Any]]) -> str:
    tables: dict[str, list[str]] = collections.defaultdict(list)
    for sec, key, val in entries:
        tables[sec].append(f"{json.dumps(key)} = {toml_value(val)}")
    out = tables.pop("", [])
    for sec, lines in tables.items():
        out += [f"[{sec}]", *lines]
    return "\n".join(out) + "\n"


def base_state() -> dict:
    return {"version": 1, "hands_completed": 3, "dealer": 1, "passes": 14, "cards": 336,
            "jams": 1, "faults": 1, "interrupted": 0, "next_pass_id": 15, "deck": 0,
            "fault": {"kind": "jam", "message": "Jam at card 13 of 24.", "card": 13},
            "battery": [[24, 8.51], [24, 8.5]], "in_flight": None,
            "hand": {"number": 4, "passes": 4, "cards": 24, "mode": "planned", "done": 2},
            "score": None, "extra": {}}


def run_fuzz_state(examples: int, seed: int) -> Section:
    """Every state starts from one with a latched jam; a pass that runs afterwards is a
    lost latch unless the mutation itself set the fault to null."""
    from hypothesis import given
    from hypothesis import strategies as st

    section = Section("fuzz state")
    folder = scratch("campaign-state-")
    fields = st.sampled_from([*sorted(base_state()), "fault.kind", "fault.card", "hand.done",
                              "hand.mode", "battery.0", "unknown"])
    mutation = st.lists(st.tuples(fields, _json_values() | st.just("<delete>")), min_size=1,
                        max_size=3)
    raw = st.binary(max_size=100) | st.builds(lambda n: b"[" * n, st.integers(1, 100_000))

    @_hypothesis(examples, seed)
    @given(mutation | raw, st.sampled_from(["status", "pass", "clear", "hand", "battery"]))
    def one(change, command):
        doc = base_state()
        if isinstance(change, bytes):
            content = change
        else:
            for where, value in change:
                _mutate(doc, where, value)
            content = json.dumps(doc).encode()
        state_dir = folder / "state"
        state_dir.mkdir(exist_ok=True)
        for old in state_dir.iterdir():
            old.unlink()
        (state_dir / "state.json").write_bytes(content)
        env = {"SHUFFLER_SOCKET": str(folder / "s"), "SHUFFLER_CONFIG": ""}
        args = ["--no-service", "--state-dir", str(state_dir), "--sim-speed", "1e6"]
        outcome, out = invoke_cli([*args, command], env)
        if outcome in ("ok", "clean error"):
            passed, out2 = invoke_cli([*args, "pass"], env)
            nulled = isinstance(change, list) and doc.get("fault", 0) is None
            if passed == "ok" and not nulled and command != "clear":
                outcome, out = "lost latch", out2
            elif passed not in ("ok", "clean error"):
                outcome, out = passed, out2
        section.add(outcome, repr(content[:200]), f"printf %s {shlex.quote(repr(content))} > "
                    f"state.json; {cmdline([*args, command])}", out)

    one()
    return section


def _mutate(doc: dict, where: str, value: Any) -> None:
    parent: Any = doc
    *path, last = where.split(".")
    for key in path:
        parent = parent.get(key) if isinstance(parent, dict) else None
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        parent[int(last)] = value
    elif isinstance(parent, dict):
        if value == "<delete>":
            parent.pop(last, None)
        else:
            parent[last] = value


@contextlib.contextmanager
def service(folder: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    sock = folder / "s.sock"
    env = {**os.environ, "SHUFFLER_CONFIG": ""}
    with open(folder / "serve.log", "wb") as log:
        child = subprocess.Popen([SHUFFLER, "--no-service", "--sim-speed", "1e6", "--state-dir",
                                  str(folder / "state"), "--socket", str(sock), "serve"],
                                 stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        deadline = time.monotonic() + 20
        while not sock.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        yield child, sock
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def ask(sock: Path, line: bytes, seconds: float = 10) -> tuple[str, str]:
    """Send one request line; the outcome by the reply (or its absence)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(seconds)
    try:
        conn.connect(str(sock))
        reader = conn.makefile("rb")
        reader.readline()  # the greeting
        conn.sendall(line)
        while True:
            reply = reader.readline(1 << 20)
            if not reply:
                return "clean error", "closed without an answer"
            msg = json.loads(reply)
            if isinstance(msg, dict) and "ok" in msg:
                return ("ok", "") if msg["ok"] else ("clean error", json.dumps(msg)[:300])
    except TimeoutError:
        return "hang", f"no answer within {seconds} s"
    except (ConnectionError, BrokenPipeError) as e:
        return "clean error", str(e)
    except ValueError as e:
        return "wrong", f"an answer that is not JSON: {e}"
    finally:
        conn.close()


#: requests every socket run tries: deep, huge, not UTF-8, not an object, blank
EDGE_REQUESTS = (b"[" * 100_000 + b"]" * 100_000 + b"\n", b'{"cmd": "' + b"x" * 2_000_000 + b'"}\n',
                 b'{"cmd": "status", "x": "\xff\xfe"}\n', b"[]\n", b"\n", b"\x00\x01\n",
                 b'{"cmd": "pass", "cards": 1e999}\n', b'{"cmd": "hand", "passes": -1}\n')


def run_fuzz_socket(examples: int, seed: int) -> Section:
    from hypothesis import given
    from hypothesis import strategies as st

    section = Section("fuzz socket")
    folder = scratch("campaign-socket-")
    cmds = st.sampled_from(["status", "battery", "pass", "hand", "clear", "stop", "score",
                            "undo", "new_game", "nope", ""]) | _json_values()
    keys = st.sampled_from(["cards", "passes", "mode", "makers", "tricks", "alone",
                            "first_dealer", "x"]) | st.text(max_size=6)
    requests = st.builds(lambda c, a: json.dumps({"cmd": c, **a}).encode() + b"\n", cmds,
                         st.dictionaries(keys, _json_values(), max_size=3))
    garbage = (st.binary(max_size=200).map(lambda b: b + b"\n")
               | _json_values().map(lambda v: json.dumps(v).encode() + b"\n")
               | st.integers(1, 100_000).map(lambda n: b"[" * n + b"]" * n + b"\n")
               | st.integers(1, 3_000_000).map(lambda n: b'{"cmd": "' + b"x" * n + b'"}\n'))
    log = folder / "serve.log"

    def new_log(seen: list[int]) -> str:
        data = log.read_bytes()
        text, seen[0] = data[seen[0]:].decode(errors="replace"), len(data)
        return text

    seen = [0]
    with service(folder) as (child, sock):
        if child.poll() is not None or not sock.exists():
            section.add("traceback", "shuffler serve did not start", "", new_log(seen))
            return section

        @_hypothesis(examples, seed)
        @given(requests | garbage)
        def one(line):
            if not line.strip():  # a blank line may be ignored: then the next one answers
                line += b'{"cmd": "status"}\n'
            outcome, detail = ask(sock, line)
            logged = new_log(seen)
            if child.poll() is not None:
                outcome, detail = "traceback", f"the service died (exit {child.returncode})"
            elif "Traceback" in logged:
                outcome, detail = "traceback", f"the service logged a traceback: {logged}"
            shown = line if len(line) < 200 else line[:60] + b"...(%d bytes)" % len(line)
            section.add(outcome, repr(shown), f'python3 -c "import sys; sys.stdout.buffer.write('
                        f"{line[:60]!r}{f' * {len(line) // 60}' if len(line) > 200 else ''})\" "
                        "| socat - UNIX-CONNECT:$XDG_RUNTIME_DIR/shuffler.sock", detail)

        if child.poll() is None:
            one()
        for line in EDGE_REQUESTS:  # always tried, whatever the generator drew
            if child.poll() is None:
                one.hypothesis.inner_test(line)
        alive = child.poll() is None and ask(sock, b'{"cmd": "status"}\n')[0] == "ok"
    if not alive:
        section.add("traceback", "status after the fuzzing", "", "the service stopped answering")
    return section


def run_fuzz_serial(examples: int, seed: int) -> Section:
    """Bytes into the host's frame decoder, and frames with a good CRC but any type and
    payload into its message decoder: a bad one is a counted, dropped frame."""
    from hypothesis import given
    from hypothesis import strategies as st

    from firmware_bridge.framing import Frame, FrameDecoder, encode_frame
    from firmware_bridge.messages import Msg, decode_payload
    from shuffler.errors import ShufflerError

    section = Section("fuzz serial")
    types = st.sampled_from([int(m) for m in Msg]) | st.integers(0, 255)
    frames = st.builds(lambda s, t, p: encode_frame(Frame(s, t, p)), st.integers(0, 255), types,
                       st.binary(max_size=40))

    @_hypothesis(examples, seed)
    @given(st.lists(frames | st.binary(max_size=60), max_size=4).map(b"".join))
    def one(data):
        decoder = FrameDecoder()
        try:
            got = decoder.feed(data + b"\x00")
            for frame in got:
                try:
                    decode_payload(frame.type, frame.payload)
                    section.add("ok")
                except ShufflerError:
                    section.add("clean error")
            if not got:
                section.add("clean error")
        except Exception as e:
            section.add("traceback", data.hex(), f"FrameDecoder().feed(bytes.fromhex("
                        f"{data.hex()!r}) + b'\\x00')", f"{type(e).__name__}: {e}")

    one()
    return section


# -- the whole run ------------------------------------------------------------------


def plan(profile: str) -> list[tuple[str, Callable[..., Section], tuple]]:
    full = profile == "full"
    n = {"quick": 25, "full": 300}[profile]
    # the longest first, so the workers finish together
    jobs: list[tuple[str, Callable[..., Section], tuple]] = [
        ("noise", run_noise, (level, 100 if full else 5)) for level in (0.05, 0.01, 0.001)]
    jobs += [("faults", run_matrix, (d, full, loads)) for d in ("sim-gpio", "sim-serial")
             for loads in ((24, 32), (104,))]
    jobs += [("sigkill", run_sigkill, (full,)), ("faults", run_matrix, ("sim", full))]
    from campaign_files import plan_files

    jobs += plan_files(full)
    jobs += [("fuzz", run_fuzz_cli, (n, 1)), ("fuzz", run_fuzz_config, (n, 2)),
             ("fuzz", run_fuzz_state, (n, 3)), ("fuzz", run_fuzz_socket, (n, 4)),
             ("fuzz", run_fuzz_serial, (n * 10, 5))]
    return jobs


def timed(fn: Callable[..., Section], args: tuple) -> dict:
    quiet()
    start = time.perf_counter()
    try:
        section = fn(*args)
    except Exception as e:
        section = Section(f"{fn.__name__}{args}")
        section.add("traceback", "the section itself", "", f"{type(e).__name__}: {e}")
    section.seconds = time.perf_counter() - start
    return section.to_dict()


def print_table(rows: list[dict]) -> None:
    head = f"{'section':<20} {'tried':>6} " + " ".join(f"{o:>{max(len(o), 5)}}" for o in OUTCOMES)
    print(head + f" {'seconds':>8}")
    for r in rows:
        print(f"{r['name']:<20} {r['tried']:>6} "
              + " ".join(f"{r[o]:>{max(len(o), 5)}}" for o in OUTCOMES) + f" {r['seconds']:>8}")
    total = {o: sum(r[o] for r in rows) for o in OUTCOMES}
    print(f"{'total':<20} {sum(r['tried'] for r in rows):>6} "
          + " ".join(f"{total[o]:>{max(len(o), 5)}}" for o in OUTCOMES))
    for r in rows:
        if r.get("skipped"):
            print(f"skipped in {r['name']}: {r['skipped']}")
    print(f"summary: runs {sum(r['tried'] for r in rows)}, latches lost {total['lost latch']}, "
          f"records lost {total['lost record']}, tracebacks {total['traceback']}")
    failures = [(r["name"], f) for r in rows for f in r["failures"]]
    if failures:
        print(f"\n{len(failures)} failures (at most 20 a section shown):")
    for name, f in failures:
        print(f"- [{name}] {f['outcome']}: {f['input']}\n    repro: {f['repro']}")
        lines = [line for line in f["detail"].splitlines() if line.strip(" -")]
        if lines:  # the last line says most: the exception, or the message
            print("    " + lines[-1].strip()[:300])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", dest="profile", const="quick")
    mode.add_argument("--full", action="store_const", dest="profile", const="full")
    parser.add_argument("--only", default="", help="comma-separated: faults, sigkill, noise, "
                        "fuzz, files")
    parser.add_argument("--jobs", type=int, default=3,
                        help="worker processes (the noisy line mostly waits on timeouts)")
    parser.add_argument("--json-out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    sys.modules.setdefault("campaign", sys.modules[__name__])  # campaign_files imports it
    sys.path.insert(0, str(Path(__file__).parent))
    profile = args.profile or "quick"
    jobs = [(fn, a) for kind, fn, a in plan(profile)
            if not args.only or kind in args.only.split(",")]
    start = time.perf_counter()
    try:
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = list(pool.map(timed, *zip(*jobs, strict=True)))
    finally:
        shutil.rmtree(RUN_DIR, ignore_errors=True)
    result = {"profile": profile, "seconds": round(time.perf_counter() - start, 1),
              "sections": rows,
              "total": {o: sum(r[o] for r in rows) for o in ("tried", *OUTCOMES)}}
    print_table(rows)
    print(f"\n{profile} run: {result['seconds']} s")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 1 if any(result["total"][o] for o in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
