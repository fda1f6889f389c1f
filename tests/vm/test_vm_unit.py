"""Scenario 1 (issue 27): the shipped unit under real systemd, on a real kernel's GPIO
lines (gpio-sim): it starts as ``Type=notify`` and says when it is ready, and its
watchdog (``WatchdogSec=30``) holds for a minute idle and through a pass longer than
that. Asserted on what systemd says (``systemctl show``, its journal lines) and on the
kernel's line levels, not on the service's own logs alone."""

from __future__ import annotations

import json
import time

from shuffler.pinmap import WIRES
from tests.vm.guest import Guest

MOTOR, BEAM, TRAY = WIRES["motor"].bcm, WIRES["beam"].bcm, WIRES["tray"].bcm
UNIT = "shuffler"
WATCHDOG_S = 30
#: a pass longer than the watchdog's limit: 52 cards, one every 0.65 s (34 s), each
#: blocking the beam 0.15 s (jam: 0.5 s) and the next in well under the misfeed's 1 s
CARDS, BLOCK_S, GAP_S = 52, 0.15, 0.5


def watchdog_age(guest: Guest) -> float:
    """Seconds since the service last pinged the watchdog (systemd's own record of it,
    ``WatchdogTimestampMonotonic``, against the guest's monotonic clock)."""
    out = guest.run(f"systemctl show {UNIT} -p WatchdogTimestampMonotonic --value; "
                    "cat /proc/uptime").out.split()
    last_ping_us, uptime_s = int(out[0]), float(out[1])
    assert last_ping_us > 0, "systemd has no watchdog ping from the service at all"
    return uptime_s - last_ping_us / 1e6


def watch(guest: Guest, seconds: float, until=None) -> list[float]:
    """The watchdog's age every few seconds for ``seconds`` (or until ``until()``)."""
    ages = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (until and until()):
        ages.append(watchdog_age(guest))
        time.sleep(3)
    return ages


def assert_held(guest: Guest, before: dict[str, str], cursor: str, ages: list[float]) -> None:
    """The unit is the same running process, never restarted, no watchdog timeout in
    the journal, and every ping seen was younger than the limit."""
    now = guest.show(UNIT, "ActiveState", "SubState", "NRestarts", "MainPID", "Result")
    assert (now["ActiveState"], now["SubState"], now["Result"]) == ("active", "running",
                                                                   "success"), now
    assert now["NRestarts"] == "0", now
    assert now["MainPID"] == before["MainPID"], "the service was restarted"
    lines = [str(entry.get("MESSAGE", "")) for entry in guest.journal(UNIT, cursor)]
    assert not [line for line in lines if "Watchdog timeout" in line or "SIGABRT" in line], lines
    assert ages and max(ages) < WATCHDOG_S, f"watchdog ages {ages}"


def test_the_shipped_unit_starts_as_notify_and_reports_ready(guest: Guest) -> None:
    shown = guest.show(UNIT, "Type", "NotifyAccess", "WatchdogUSec", "ActiveState",
                       "SubState", "NRestarts", "StatusText", "ExecMainStartTimestampMonotonic",
                       "ActiveEnterTimestampMonotonic")
    assert (shown["Type"], shown["NotifyAccess"], shown["WatchdogUSec"]) == ("notify", "main",
                                                                             "30s"), shown
    assert (shown["ActiveState"], shown["SubState"], shown["NRestarts"]) == ("active",
                                                                             "running", "0")
    assert shown["StatusText"], "the service sent systemd no STATUS="
    # ready when it said so: systemd entered "active" after the process had started and
    # loaded (seconds of Python under emulation), not the moment it was forked
    started = int(shown["ExecMainStartTimestampMonotonic"])
    ready = int(shown["ActiveEnterTimestampMonotonic"])
    assert ready - started > 200_000, shown
    systemd = [entry["MESSAGE"] for entry in guest.journal(UNIT)
               if entry.get("SYSLOG_IDENTIFIER") == "systemd"]
    assert any(line.startswith("Started shuffler.service") for line in systemd), systemd
    # ready means listening: the CLI gets its answer from the service
    status = json.loads(guest.run("shuffler status --json").out)
    assert status["device"]["kind"] == "gpio", status
    assert guest.line(MOTOR) == 0


def test_the_watchdog_holds_for_a_minute_idle(guest: Guest) -> None:
    before = guest.show(UNIT, "MainPID")
    cursor = guest.cursor()
    ages = watch(guest, 2 * WATCHDOG_S + 5)
    assert_held(guest, before, cursor, ages)
    assert guest.line(MOTOR) == 0, "the motor line went high while idle"


def test_the_watchdog_holds_through_a_pass_longer_than_its_limit(guest: Guest) -> None:
    before = guest.show(UNIT, "MainPID")
    cursor = guest.cursor()
    guest.pull(TRAY, up=False)  # cards in the tray
    feeder = guest.start(f"shuffler-vm-feeder {MOTOR} {BEAM} {TRAY} {CARDS} {BLOCK_S} {GAP_S}")
    client = guest.start(f"shuffler pass --cards {CARDS} --json")
    try:
        guest.wait(lambda: guest.line(MOTOR) == 1, timeout=120,
                   what="the motor line (sim_gpio) to go high for the pass")
        ages = watch(guest, 300, until=lambda: guest.poll(client) is not None)
        answer = guest.result(client, timeout=120, what="shuffler pass")
        fed = guest.result(feeder, timeout=60, what="the feeder")
    finally:
        guest.pull(TRAY, up=True)
        guest.pull(BEAM, up=True)
    assert answer.rc == 0, answer
    done = json.loads(answer.out)["pass"]
    assert (done["counted"], done["expected"], done["fault"]) == (CARDS, CARDS, None), done
    assert done["seconds"] > WATCHDOG_S, f"the pass was shorter than the watchdog: {done}"
    assert fed.rc == 0, fed
    assert guest.line(MOTOR) == 0, "the motor line stayed high after the pass"
    assert_held(guest, before, cursor, ages)
    assert len(ages) >= WATCHDOG_S // 5, f"too few samples during the pass: {ages}"
