"""One set of pass rules, held together: the firmware's pass (firmware/pass.c, compiled
for the host with a recording shim, firmware/harness/pass_shim.c) and the host's pass
engine (shuffler/device/engine.py) are driven with the same random event scripts, thousands of
them, with ties and limit boundaries, and must command exactly the same things: motor
speeds, diverter piles, cards counted, and the end of the pass with its report. A STOP
comes in every state of the pass, naming no pass, this one or another (STOP means stop:
both end the pass, and nothing moves after it), and the host falls quiet (past the
heartbeat rule) in the middle of retries (no retry drives the motor until it is heard).

How they are driven is how the chip runs: a 1 kHz tick; beam edges timestamped to the
microsecond, handled at the next tick in order; the tray sensor and the battery read at
the tick. The engine gets the same inputs at the same times, in microseconds (its limits
in microseconds too, so every sum is exact). The chip's clock starts just before its
2^32 us wrap, so most passes run across it."""

from __future__ import annotations

import ctypes
import random
import subprocess
from dataclasses import dataclass

import pytest

from firmware_bridge.messages import FAULT_KIND, FaultCode
from hardware_sim.sim_avr import FIRMWARE_DIR, build_dir
from hardware_sim.virtual_mcu import BRAKE_S  # firmware/pass.c's BRAKE_MS
from shuffler.device.contract import EngineTimings, FaultLimits
from shuffler.device.engine import Card, Divert, Done, Motor, PassEngine, Phase

pytestmark = pytest.mark.slow

SCRIPTS = 3000
PASS_ID = 1
WRAP = 1 << 32
CODE_OF = {kind: code for code, kind in FAULT_KIND.items()}


class Entry(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in "kabcdefghi"]


@pytest.fixture(scope="module")
def chip():
    try:
        subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), f"BUILD={build_dir()}", "shim"],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot build the pass shim (make, cc): {e}")
    lib = ctypes.CDLL(str(build_dir() / "libpass_shim.so"))
    lib.shim_limits.argtypes = [ctypes.c_uint16, ctypes.c_uint16, ctypes.c_uint8,
                                ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint16,
                                ctypes.c_uint16, ctypes.c_uint16, ctypes.c_uint16]
    lib.shim_edge.argtypes = [ctypes.c_uint32, ctypes.c_int]
    lib.shim_mv.argtypes = [ctypes.c_uint16]
    lib.pass_start.argtypes = [ctypes.c_uint16, ctypes.c_char_p, ctypes.c_uint16,
                               ctypes.c_uint32]
    lib.pass_tick.argtypes = [ctypes.c_uint32]
    lib.pass_end.argtypes = [ctypes.c_uint8, ctypes.c_uint32]
    lib.pass_stop.argtypes = [ctypes.c_uint16, ctypes.c_uint32]
    lib.pass_host_quiet.argtypes = [ctypes.c_bool]
    return lib


@dataclass
class Script:
    jam_ms: int
    misfeed_ms: int
    retries: int
    reverse_ms: int
    max_pass_ms: int
    min_blocked_us: int
    min_gap_us: int
    stall_mv: int
    soft_start_ms: int
    labels: tuple[int, ...]
    edges: list[tuple[int, bool]]  # (us since the start, blocked), alternating
    tray_empty_at: int | None  # the tick (ms) after which the tray reads empty
    mv: list[int]  # the battery, ms by ms
    stop_at: int | None  # the tick (ms) after which a STOP ends the pass
    stop_id: int  # the pass it names: 0 (none), 1 (this one) or another
    quiet: list[tuple[int, int]]  # ticks [from, to) the host is silent past the rule
    clock0: int  # the chip's clock at the start (us)


def make_script(rng: random.Random) -> Script:
    jam, misfeed = rng.randint(5, 40), rng.randint(5, 60)
    min_blocked = rng.choice([0, 1000, rng.randint(0, 3000)])
    min_gap = rng.choice([0, 0, 1000, rng.randint(0, 3000)])
    lengths = [min_blocked, min_blocked - 1, min_blocked + 1, min_gap, min_gap - 1, min_gap + 1,
               jam * 1000, jam * 1000 - 1, jam * 1000 + 1, misfeed * 1000, 1000, 2000, 0]
    edges, t, blocked = [], 0, False
    end = rng.randint(50, 400) * 1000
    while t < end:
        # half the steps a boundary, or a whole number of ticks (ties)
        step = rng.choice(lengths) if rng.random() < 0.5 else rng.randint(1, 8000)
        t += max(step, 0)
        blocked = not blocked
        edges.append((t, blocked))
    stall = rng.randint(5000, 6000)
    return Script(
        jam_ms=jam, misfeed_ms=misfeed, retries=rng.randint(0, 3),
        reverse_ms=rng.choice([0, rng.randint(1, 15)]), max_pass_ms=rng.randint(60, 500),
        min_blocked_us=max(min_blocked, 0), min_gap_us=max(min_gap, 0), stall_mv=stall,
        soft_start_ms=rng.choice([0, 1, 3, 5, rng.randint(0, 20)]),
        labels=tuple(rng.randint(0, 1) for _ in range(rng.randint(1, 12))),
        edges=edges,
        tray_empty_at=rng.choice([None, rng.randint(0, 300)]),
        mv=[rng.choice([stall - 1, stall, stall + 1, rng.randint(stall - 500, stall + 3000)])
            for _ in range(700)],
        stop_at=rng.choice([None, None, rng.randint(0, 300)]),
        stop_id=rng.choice([0, PASS_ID, rng.randint(2, 0xFFFF)]),
        quiet=sorted((a, a + rng.randint(1, 120)) for a in
                     rng.sample(range(300), rng.choice([0, 0, 1, 2, 3]))),
        clock0=(WRAP - rng.randint(0, 300_000)) % WRAP)


def engine_stream(commands, out: list[tuple]) -> None:
    for c in commands:
        if isinstance(c, Motor):
            out.append(("motor", round(c.speed * 255)))
        elif isinstance(c, Divert):
            out.append(("divert", int(c.pile)))
        elif isinstance(c, Card):
            out.append(("card", c.counted))
        elif isinstance(c, Done):
            r = c.report
            code = CODE_OF[r.fault.kind.value] if r.fault else FaultCode.NONE
            out.append(("done", r.counted, r.piles[0], r.piles[1], int(r.seconds // 1000),
                        round(r.min_volts or 0), int(r.tray_empty), min(r.retries, 255),
                        int(code), (r.fault.card or 0) if r.fault else 0))


def chip_stream(lib, out: list[tuple]) -> list[int]:
    """The shim's log since the last call into ``out``; the battery readings it took."""
    buf = (Entry * 4096)()
    n = lib.shim_log(buf, 4096)
    readings = []
    for e in buf[:n]:
        if e.k == 1:
            out.append(("motor", e.a))
        elif e.k == 2:
            out.append(("divert", e.a))
        elif e.k == 3:
            out.append(("card", e.a))
        elif e.k == 4:
            out.append(("done", e.a, e.b, e.c, e.d, e.e, e.f, e.g, e.h, e.i))
        elif e.k == 5:
            readings.append(e.a)
    return readings


def stopped_in(eng: PassEngine) -> str:
    """The state of the pass a STOP finds."""
    if eng.phase is Phase.REVERSE:
        return "brake" if eng._braking else "reverse"
    if eng.phase in (Phase.RAMP, Phase.FEED) and eng._retries_here:
        return "retry"
    return eng.phase.value


def run_both(lib, s: Script, seen: set[str] | None = None) -> tuple[list[tuple], list[tuple]]:
    limits = FaultLimits(jam_seconds=s.jam_ms * 1000, misfeed_seconds=s.misfeed_ms * 1000,
                         retries=s.retries, reverse_seconds=s.reverse_ms * 1000,
                         stall_volts=s.stall_mv, max_pass_seconds=s.max_pass_ms * 1000)
    timings = EngineTimings(soft_start_s=s.soft_start_ms * 1000, min_blocked_s=s.min_blocked_us,
                            min_gap_s=s.min_gap_us)
    eng = PassEngine(s.labels, limits, timings=timings, brake_s=BRAKE_S * 1e6)
    lib.shim_reset()
    lib.shim_limits(s.jam_ms, s.misfeed_ms, s.retries, s.reverse_ms, s.max_pass_ms,
                    s.min_blocked_us, s.min_gap_us, s.stall_mv, s.soft_start_ms)
    plan = bytearray((len(s.labels) + 7) // 8)
    for i, label in enumerate(s.labels):
        plan[i // 8] |= label << (i % 8)
    fw: list[tuple] = []
    py: list[tuple] = []
    lib.pass_start(PASS_ID, bytes(plan), len(s.labels), s.clock0)
    chip_stream(lib, fw)
    engine_stream(eng.start(0), py)
    edges = iter(s.edges)
    pending = next(edges, None)
    for tick in range(1, s.max_pass_ms + 2):
        now = tick * 1000
        quiet = any(a <= tick < b for a, b in s.quiet)
        lib.pass_host_quiet(quiet)
        eng.quiet = quiet
        lib.shim_mv(s.mv[tick])
        while pending is not None and pending[0] <= now:
            lib.shim_edge((s.clock0 + pending[0]) % WRAP, int(pending[1]))
            engine_stream(eng.beam(pending[1], pending[0]), py)
            pending = next(edges, None)
        lib.pass_tick((s.clock0 + now) % WRAP)
        readings = chip_stream(lib, fw)
        engine_stream(eng.volts(readings[0], now) if readings else eng.tick(now), py)
        if tick == s.tray_empty_at:
            lib.shim_tray(0)
            engine_stream(eng.tray(False, now), py)
        if seen is not None and eng.phase is Phase.HOLD:
            seen.add("held")
        if tick == s.stop_at:
            if seen is not None and not eng.done:
                seen.add(f"stop {stopped_in(eng)} {'other' if s.stop_id > 1 else s.stop_id}")
            lib.pass_stop(s.stop_id, (s.clock0 + now) % WRAP)
            chip_stream(lib, fw)
            engine_stream(eng.stop(now), py)
        if eng.done and fw and fw[-1][0] == "done":
            break
    return fw, py


def test_the_chip_and_the_engine_command_the_same_for_every_script(chip):
    rng = random.Random(23)
    differ = []
    ends: dict[int, int] = {}
    seen: set[str] = set()
    for n in range(SCRIPTS):
        script = make_script(rng)
        fw, py = run_both(chip, script, seen)
        if fw != py:
            differ.append((n, script, fw, py))
        end = fw[-1][8] if fw and fw[-1][0] == "done" else -1
        ends[end] = ends.get(end, 0) + 1
    if differ:
        n, script, fw, py = differ[0]
        longest = max(len(fw), len(py))
        first = next(i for i in range(longest) if fw[i:i + 1] != py[i:i + 1])
        script.mv = script.mv[:5]  # the battery readings are many; a few say enough
        raise AssertionError(f"{len(differ)} of {SCRIPTS} scripts differ; script {n}: "
                             f"{script}\n"
                             f"from command {first}:\nchip   {fw[max(first - 4, 0):first + 6]}\n"
                             f"engine {py[max(first - 4, 0):first + 6]}")
    # the scripts reach every way a pass ends
    assert {int(FaultCode.NONE), int(FaultCode.JAM), int(FaultCode.MISFEED),
            int(FaultCode.LOW_BATTERY), int(FaultCode.TIMEOUT),
            int(FaultCode.STOPPED)} <= set(ends), ends
    # a STOP of each kind in every state, and a quiet host holding a retry
    assert {f"stop {state} {kind}" for state in ("ramp", "feed", "brake", "reverse", "retry",
                                                 "hold") for kind in (0, 1, "other")} | {
        "held"} <= seen, sorted(seen)
