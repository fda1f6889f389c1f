"""Scenarios 2-5 of issue 27: the shipped unit, installed as docs/deploy/README.md's
Debian section says, driving the kernel's GPIO lines (gpio-sim) under real systemd.

Each asserts on what the kernel and systemd say: the motor line's level
(``sim_gpio12/value``), watched from a guest-side Python process that reads it every
millisecond and stamps each change on the guest's clock; ``systemctl show``; systemd's
and the service's journal lines; the state and the audit log on the guest's disk. The
cards are a guest-side process too (tests/vm/feeder.sh, as a transient unit): once the
motor line reads high it blocks the beam line 0.2 s and clears it 0.3 s per card (the
config's card interval, 0.5 s: tests/vm/config.toml), then reads the tray empty, and
stacks the piles as the light asks (the pile it shows lifted first), after the last pass
too: a hand is finished only once its last stack is seen.

The config gives the motor full duty (``motor_volts`` at the fresh block's volts): the
motor line is steadily high while it runs, so "high" and "low" are the line's level,
not a PWM to sample, and a line that stays high after a SIGKILL shows that only
``ExecStopPost=`` (shuffler-safe) brought it low.

Every scenario leaves the service running, idle, its fault cleared, the tray loaded and
the beam clear, for the next one: one boot serves the session (tests/vm/conftest.py).
``NRestarts`` only grows in a boot, so the kill scenarios count from its value before.

One test drop-in: ``TimeoutStopSec=60`` (the shipped 10 s). Under emulation on a busy
host shuffler-safe's Python start alone took over 10 s once, and systemd killed
ExecStopPost before it drove the pins (``State 'stop-post' timed out``); on a Pi it takes
well under a second.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from shuffler.config import load_config
from shuffler.pinmap import WIRES
from tests.vm.guest import Guest

pytestmark = [pytest.mark.vm, pytest.mark.slow]

UNIT = "shuffler"
MOTOR, TOUCH, BEAM, TRAY = (WIRES[r].bcm for r in ("motor", "touch", "beam", "tray"))
GREEN, BLUE = WIRES["led_green"].bcm, WIRES["led_blue"].bcm
#: the dealer's side of the stack (tests/vm/feeder.sh): the pile sensors, then the LED
STACK_LINES = " ".join(str(WIRES[r].bcm) for r in (
    "pile_left", "pile_right", "led_red", "led_green", "led_blue"))
CONFIG = load_config(Path(__file__).with_name("config.toml"))
#: the config's card interval (0.5 s): the feeder's pace and the stop's bound
CARD_S = CONFIG.mechanism.card_interval
BLOCK_S, GAP_S = 0.2, CARD_S - 0.2
CARDS = 24
FEEDER = "/usr/local/bin/shuffler-vm-feeder"  # tests/vm/machine.py installs tests/vm/feeder.sh
STATE, AUDIT = "/var/lib/shuffler/state.json", "/var/lib/shuffler/audit.jsonl"
WATCHER = "/usr/local/bin/shuffler-vm-motor-watch"
#: the guest-side watcher: every level change of one line, stamped with time.time(),
#: until the line has been low HOLD seconds after having been high, or SECONDS pass
WATCH_PY = '''\
import json, sys, time
path, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
HOLD = 0.2
changes, level, end = [], None, time.time() + seconds
while time.time() < end:
    with open(path) as f:
        now, high = time.time(), f.read().strip() == "1"
    if high != level:
        changes.append([now, high])
        level = high
    if changes and not high and any(h for _, h in changes) and now - changes[-1][0] >= HOLD:
        break
    time.sleep(0.001)
with open(out + ".tmp", "w") as f:
    json.dump(changes, f)
import os
os.replace(out + ".tmp", out)
'''
TIMEOUTS = """# test only (tests/vm/test_vm_scenarios.py): ExecStopPost's Python under emulation
[Service]
TimeoutStopSec=60
"""
#: the socket's stop, as any client sends it: the project's own client, its imports done
#: before the clock is read, so "asked" is when the request went
STOP_PY = '''\
import json, time
from pathlib import Path
from shuffler.service.client import ServiceClient, trusted_uids
sock = Path("/run/shuffler/shuffler.sock")
client = ServiceClient.connect(sock, trusted=trusted_uids("shuffler"))
asked = time.time()
answer = client.request("stop")
print(json.dumps({"asked": asked, "answered": time.time(), "answer": answer}))
'''


class Machine:
    """The test's side of the guest: the dealer's touch, the cards, the line watcher."""

    def __init__(self, guest: Guest) -> None:
        self.g = guest
        self.n = 0
        self.run = f"{os.getpid()}-{int(time.time())}"
        chip = guest.run("echo /sys/devices/platform/gpio-sim.0/gpiochip*").out.strip()
        self.sim = f"{chip}/sim_gpio"
        guest.put(WATCHER, WATCH_PY.encode(), mode=0o755)
        guest.put("/usr/local/bin/shuffler-vm-stop", STOP_PY.encode(), mode=0o755)
        assert guest.run(f"test -x {FEEDER}", check=False).rc == 0, f"{FEEDER}: not installed"
        guest.put(f"/etc/systemd/system/{UNIT}.service.d/vm-timeouts.conf", TIMEOUTS.encode())
        guest.run("systemctl daemon-reload")

    # -- the machine's inputs
    def touch(self) -> None:
        """The dealer's touch on the sensor (TTP223: high while touched), held 0.4 s."""
        pull = f"{self.sim}{TOUCH}/pull"
        self.g.run(f"echo pull-up > {pull}; sleep 0.4; echo pull-down > {pull}")

    def load(self) -> None:
        """Cards in the tray, the beam clear (the sensors pull low when covered)."""
        self.g.pull(TRAY, up=False)
        self.g.pull(BEAM, up=True)

    def feed(self, cards: int = CARDS) -> str:
        """The cards cross the beam once the motor runs: a transient unit's name."""
        self.n += 1
        unit = f"vm-feeder-{self.run}-{self.n}"
        self.g.run(f"systemd-run --quiet --collect --unit {unit} {FEEDER} {MOTOR} {BEAM} "
                   f"{TRAY} {cards} {BLOCK_S} {GAP_S} 120 {STACK_LINES}")
        return unit

    def watch(self, seconds: float = 300) -> str:
        """Start the motor line's watcher: the file its changes will be written to."""
        self.n += 1
        # named for this run too: a guest kept for SHUFFLER_VM_ATTACH still holds an
        # earlier run's files, which would read as this pass's changes
        out = f"/run/vm-motor-{self.run}-{self.n}.json"
        cmd = f"python3 {WATCHER} {self.sim}{MOTOR}/value {seconds} {out}"
        self.g.run(f"systemd-run --quiet --collect --unit vm-watch-{self.run}-{self.n} "
                   f"sh -c {shlex.quote(cmd)}")
        return out

    def changes(self, out: str, timeout: float = 300) -> list[tuple[float, bool]]:
        """The watched line's changes (guest time, high), once the watcher has seen it
        high and then low for good."""
        self.g.wait(lambda: self.g.run(f"test -s {out}", check=False).rc == 0, timeout,
                    f"the motor line (GPIO{MOTOR}) high, then low ({out})")
        changes = [(t, bool(h)) for t, h in json.loads(self.g.get(out))]
        if not any(high for _, high in changes):  # say why the pass never ran
            said = [e.get("MESSAGE") for e in self.g.journal(UNIT)][-40:]
            state = self.g.run(f"cat {STATE} 2>/dev/null; true").out
            raise AssertionError(f"the motor line never went high: {changes}\n"
                                 f"state.json: {state}\nthe service's last lines:\n"
                                 + "\n".join(map(str, said)))
        return changes

    # -- what the guest says
    def now(self) -> float:
        return float(self.g.run("date +%s.%N").out)

    def status(self) -> dict[str, Any]:
        return json.loads(self.g.run("shuffler --json status").out)

    def audit(self) -> list[dict[str, Any]]:
        text = self.g.run(f"cat {AUDIT} 2>/dev/null || true").out
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def in_flight(self) -> bool:
        text = self.g.run(f"cat {STATE} 2>/dev/null || echo '{{}}'").out
        return bool(json.loads(text).get("in_flight"))

    def logs(self, cursor: str) -> list[dict[str, Any]]:
        """The service's JSON log lines since ``cursor``, each with the journal's stamp."""
        lines = []
        for entry in self.g.journal(UNIT, cursor):
            try:
                line = json.loads(entry.get("MESSAGE", ""))
            except (TypeError, ValueError):
                continue
            if isinstance(line, dict):
                lines.append(line | {"_journal_s": int(entry["__REALTIME_TIMESTAMP"]) / 1e6})
        return lines

    def systemd(self, cursor: str) -> list[tuple[float, str]]:
        """systemd's own lines about the unit (and ExecStopPost's) since ``cursor``."""
        return [(int(e["__REALTIME_TIMESTAMP"]) / 1e6, str(e.get("MESSAGE", "")))
                for e in self.g.journal(UNIT, cursor)]

    def show(self, *props: str) -> dict[str, str]:
        return self.g.show(UNIT, *props)

    # -- the pass
    def start_pass(self) -> tuple[str, str]:
        """Tray loaded, cards ready, the watcher on, a touch: (watcher file, feeder)."""
        self.load()
        out, feeder = self.watch(), self.feed()
        self.touch()
        return out, feeder

    def mid_pass(self) -> None:
        """Until the pass is in flight with the motor running, then a few cards more."""
        self.g.wait(self.in_flight, 120, "the pass in flight (state.json in_flight)")
        self.g.wait(lambda: self.g.line(MOTOR) == 1, 120, f"the motor line (GPIO{MOTOR}) high")
        time.sleep(4 * CARD_S)

    def ready(self, timeout: float = 300) -> None:
        """The unit active (Type=notify: ready), the service answering."""
        self.g.wait(lambda: self.show("ActiveState")["ActiveState"] == "active", timeout,
                    "shuffler.service active (ready)")
        self.g.wait(lambda: self.g.run("shuffler --json status", check=False).rc == 0, timeout,
                    "the service answering status")

    def restore(self) -> None:
        """Running, idle, cleared, NRestarts 0, tray loaded, beam clear."""
        self.g.run("systemctl stop 'vm-feeder-*' 'vm-watch-*' 2>/dev/null; true")
        self.load()
        if self.show("ActiveState")["ActiveState"] != "active":
            self.g.run("systemctl reset-failed shuffler; systemctl start shuffler", timeout=300)
        self.ready()
        if self.status()["fault"] is not None:
            cleared = json.loads(self.g.run("shuffler --json clear").out)
            assert cleared["cleared"], cleared
        # a hand a kill cut short stays pending (the next touch finishes it: one pass)
        assert self.status()["fault"] is None
        assert self.g.line(MOTOR) == 0

    def restarts(self) -> int:
        return int(self.show("NRestarts")["NRestarts"])

    def finished(self, cursor: str, feeder: str) -> None:
        """Until the hand is finished: its last stack lifted by the feeder as the light
        asked (it lifts only what a blue or magenta light shows), then the light green.
        A scenario that moved on before would leave the hand waiting at that stack, and
        a restart would lose its plan (the next touch finishing it with no pass)."""
        self.g.wait(lambda: any(line["event"] == "hand" for line in self.logs(cursor)), 120,
                    "the hand finished once its last stack was seen")
        hands = [line for line in self.logs(cursor) if line["event"] == "hand"]
        assert hands[0]["completed"] is True, hands
        fed = [e.get("MESSAGE") for e in self.g.journal(feeder, None)]
        assert any(str(line).startswith("feeder: stacked, the ") for line in fed), fed
        self.g.wait(lambda: self.g.line(GREEN) == 1 and self.g.line(BLUE) == 0, 30,
                    "the light ready")
        assert self.status()["hand_in_progress"] is None


def went_low(changes: list[tuple[float, bool]]) -> float:
    """When the line last went low (it stays low after), having been high before."""
    assert any(high for _, high in changes), f"the motor line never went high: {changes}"
    assert not changes[-1][1], f"the motor line did not end low: {changes}"
    return changes[-1][0]


def stamp(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(line["timestamp"]).timestamp()


@pytest.fixture(scope="module")
def machine(guest: Guest):
    m = Machine(guest)
    m.restore()
    yield m
    # the kills restarted the unit: its restart count back to 0 for whatever runs next in
    # this boot (systemd's reset-failed zeroes NRestarts), the test drop-in removed
    guest.run(f"rm -f /etc/systemd/system/{UNIT}.service.d/vm-timeouts.conf && "
              f"systemctl daemon-reload && systemctl reset-failed {UNIT}", check=False)


@pytest.fixture
def fresh(machine: Machine):
    """Each scenario starts from, and ends in, the idle machine."""
    started = time.monotonic()
    yield machine
    machine.restore()
    print(f"\nvm scenario: {time.monotonic() - started:.1f} s (with the restore)")


def test_2_a_touch_starts_a_pass_the_motor_runs_then_stops_and_it_is_audited(fresh):
    m = fresh
    cursor, before = m.g.cursor(), len(m.audit())
    out, feeder = m.start_pass()
    changes = m.changes(out)
    low = went_low(changes)
    m.g.wait(lambda: len(m.audit()) > before, 60, "the pass's audit line")
    entry = m.audit()[-1]
    assert (entry["counted"], entry["expected"], entry["fault"]) == (CARDS, CARDS, None), entry
    assert entry["device"] == "gpio"
    m.finished(cursor, feeder)  # the one-pass hand's last stack, as the light asked
    fed = [e.get("MESSAGE") for e in m.g.journal(feeder, None)]
    assert f"feeder: fed {CARDS} cards, tray empty" in fed, fed
    logs = m.logs(cursor)
    passes = [line for line in logs if line["event"] == "pass"]
    assert len(passes) == 1 and passes[0]["counted"] == CARDS and passes[0]["fault"] is None
    # the motor went off when the pass ended (before its line was logged, after the audit
    # and state writes), having run through every card
    assert low <= stamp(passes[0]) + 0.25, (low, passes[0])
    first_high = next(t for t, high in changes if high)
    assert low - first_high >= (CARDS - 1) * CARD_S * 0.9  # it ran through every card


def test_3_sigkill_mid_pass_leaves_the_line_high_until_exec_stop_post_and_latches(fresh):
    m = fresh
    out, _feeder = m.start_pass()
    m.mid_pass()
    cursor, restarts = m.g.cursor(), m.restarts()
    killed = float(m.g.run("date +%s.%N; systemctl kill -s SIGKILL shuffler").out.split()[0])
    low = went_low(m.changes(out))
    assert low > killed, "the line was low before the kill: nothing to prove"
    m.g.wait(lambda: m.restarts() == restarts + 1, 300, "the unit restarted")
    m.ready()
    said = m.systemd(cursor)
    safe = [t for t, line in said if line.startswith("shuffler-safe: low:")]
    assert safe and killed <= safe[0], said  # ExecStopPost ran after the kill ...
    assert low <= safe[0] + 1.0, (low, safe)  # ... and that is when the line went low
    assert any("status=9/KILL" in line for _, line in said), said
    assert_interrupted(m)


def test_3_the_watchdog_aborts_a_wedged_loop_mid_pass_and_the_pass_latches(fresh):
    m = fresh
    out, _feeder = m.start_pass()
    m.mid_pass()
    cursor, restarts = m.g.cursor(), m.restarts()
    pid = m.show("MainPID")["MainPID"]
    wedged = float(m.g.run(f"date +%s.%N; kill -STOP {pid}").out.split()[0])
    low = went_low(m.changes(out, timeout=300))
    m.g.wait(lambda: m.restarts() == restarts + 1, 300, "the unit restarted")
    m.ready()
    said = m.systemd(cursor)
    assert any("Failed with result 'watchdog'" in line for _, line in said), said
    abort = [t for t, line in said if "with signal SIGABRT" in line]
    assert abort, said
    # the loop stopped pinging when it wedged; systemd waited out WatchdogSec (30 s, the
    # shipped unit's) and the kernel kept the motor line high all that while
    assert abort[0] - wedged >= 10, (wedged, abort)
    assert low >= abort[0] - 0.5, (low, abort)
    assert any(line.startswith("shuffler-safe: low:") for _, line in said), said
    assert_interrupted(m)


def assert_interrupted(m: Machine) -> None:
    """The pass the service was in is latched ``interrupted`` (the state on disk said so
    before the motor started) and audited as such when the service came back."""
    fault = m.status()["fault"]
    assert fault is not None and fault["kind"] == "interrupted", fault
    assert m.audit()[-1].get("interrupted") is True, m.audit()[-1]
    refused = m.g.run("shuffler --json pass", check=False)
    assert refused.rc == 3 and json.loads(refused.out)["error"]["kind"] == "fault_latched"


def test_4_the_sockets_stop_mid_pass_stops_the_motor_within_a_card_interval(fresh):
    m = fresh
    before = m.status()["counters"]
    out, _feeder = m.start_pass()
    m.mid_pass()
    stop = json.loads(m.g.run("/opt/shuffler/.venv/bin/python /usr/local/bin/shuffler-vm-stop")
                      .out)
    assert stop["answer"] == {"stopped": True}, stop
    low = went_low(m.changes(out))
    assert 0 <= low - stop["asked"] <= CARD_S, (low, stop)
    # off before the answer came back (the watcher stamps a change within its next read)
    assert low <= stop["answered"] + 0.25, (low, stop)
    m.g.wait(lambda: not m.in_flight(), 60, "the pass settled in state.json")
    entry = m.audit()[-1]
    assert entry["fault"]["kind"] == "stopped" and 0 < entry["counted"] < CARDS, entry
    m.g.wait(lambda: m.status()["counters"]["passes"] == before["passes"] + 1, 60,
             "the stopped pass counted in the state")
    assert m.status()["fault"] is None  # a stop latches nothing
    # the CLI's stop is that request: with nothing running it says so, exit 0
    again = m.g.run("shuffler --json stop")
    assert json.loads(again.out) == {"schema": 1, "stopped": False}, again


def test_4_systemctl_stop_mid_pass_stops_the_motor_within_a_card_interval(fresh):
    m = fresh
    out, _feeder = m.start_pass()
    m.mid_pass()
    cursor = m.g.cursor()
    asked = float(m.g.run("date +%s.%N; systemctl stop --no-block shuffler").out.split()[0])
    low = went_low(m.changes(out))
    m.g.wait(lambda: m.show("ActiveState")["ActiveState"] in ("inactive", "failed"), 180,
             "the unit stopped")
    said = m.systemd(cursor)
    safe = [t for t, line in said if line.startswith("shuffler-safe: low:")]
    # the service's own SIGTERM path stopped it: before its process was gone and
    # ExecStopPost ran; within a card interval of systemd's SIGTERM, which systemctl
    # sends within a second of being run, even emulated
    assert safe and low < safe[0], (low, said)
    assert 0 <= low - asked <= CARD_S + 1.0, (low, asked)
    shown = m.show("ExecMainCode", "ExecMainStatus", "Result")
    assert (shown["ExecMainStatus"], shown["Result"]) == ("0", "success"), shown  # SIGTERM's way
    m.g.run("systemctl start shuffler", timeout=300)
    m.ready()
    assert_interrupted(m)  # the state was on disk: the pass in flight is latched


def test_5_no_adc_on_the_lines_is_a_monitor_fault_and_a_build_without_one_runs(fresh):
    m = fresh
    # the installed config says adc_channel = false: a build without a monitor
    battery = m.status()["battery"]
    assert (battery["measured"], battery["state"]) == (False, "not_measured"), battery
    before, cursor = len(m.audit()), m.g.cursor()
    out, feeder = m.start_pass()
    went_low(m.changes(out))
    m.g.wait(lambda: len(m.audit()) > before, 60, "the pass's audit line")
    assert m.audit()[-1]["counted"] == CARDS
    m.finished(cursor, feeder)  # before the restart below, which would lose its plan
    m.restore()
    # the shipped adc_channel (0): an MCP3008 the lines do not have
    config = "/etc/shuffler/config.toml"
    m.g.run(f"cp {config} {config}.vm && sed -i 's/^adc_channel = false.*/adc_channel = 0/' "
            f"{config} && systemctl restart shuffler", timeout=300)
    try:
        m.ready()
        battery = m.status()["battery"]
        assert battery["state"] == "monitor_fault", battery
        assert battery["monitor"]["problem"] == "no_reading", battery
        assert "[gpio] adc_channel = false" in battery["monitor"]["message"]
        text = m.g.run("shuffler battery").out
        assert text.startswith("battery: monitor fault (no reading)"), text
        assert "Change the 9 V battery" not in text, text
        cursor = m.g.cursor()
        out = m.watch(seconds=20)
        m.load()
        m.touch()
        m.g.wait(lambda: any(line["event"] == "refused" for line in m.logs(cursor)), 120,
                 "the touch's pass refused")
        refused = [line for line in m.logs(cursor) if line["event"] == "refused"]
        assert refused[0]["kind"] == "battery_monitor", refused
        assert not any(high for _, high in json.loads(m.g.run(
            f"sleep 1; while ! test -s {out}; do sleep 1; done; cat {out}", timeout=60).out)), \
            "the motor ran on a machine that cannot read its battery"
        answer = m.g.run("shuffler --json pass", check=False)
        assert answer.rc == 3 and json.loads(answer.out)["error"]["kind"] == "battery_monitor"
    finally:
        m.g.run(f"mv {config}.vm {config} && systemctl restart shuffler", timeout=300)
