"""The reference firmware (firmware/): it builds, fits the chip, and the very ELF that
would be flashed keeps its own safety when run in simavr. The device contract runs
against it too (``sim-avr`` in tests/conftest.py)."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
import serial

from firmware_bridge.device import config_message
from firmware_bridge.framing import Frame, encode_frame
from firmware_bridge.link import Link
from firmware_bridge.messages import FaultCode, Msg, Pass, PassDone, StatusReply
from hardware_sim.sim_avr import (
    AVR_PACKAGES,
    FIRMWARE_DIR,
    SimAvr,
    build_dir,
    build_firmware,
    serial_on,
)
from shuffler.core.planning import coin_plan
from shuffler.device.contract import FaultKind, FaultLimits
from shuffler.errors import DeviceError

from .test_serial import reply

try:
    build_firmware()
    MISSING = None
except DeviceError as e:
    MISSING = f"the firmware tests need the packages {AVR_PACKAGES}: {e}"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]

FLASH, RAM = 32 * 1024, 2 * 1024  # ATmega328P
BOOTLOADER = 2048  # the Nano's old bootloader; optiboot takes 512
SILENCE_MS = 500  # docs/protocol.md: the MCU's own timeout


@pytest.fixture
def chip():
    made: list = []

    def make(*args: str):
        chip = SimAvr("--cards=104", "--card-rate=50", "--spinup=0.01", "--flap-travel=0.01",
                      "--frame-scale=0.1", *args)
        dev = serial_on(chip)
        made.append(dev)
        return chip, dev

    yield make
    for dev in made:
        dev.close()


def motor_lines(chip: SimAvr, timeout: float, want: str) -> dict[str, float]:
    """The next ``motor WANT t=... last_rx=...`` line of the harness, as numbers."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        line = chip.lines.get(timeout=left)
        if line.startswith(f"motor {want} "):
            return {k: float(v) for k, v in (f.split("=") for f in line.split()[2:])}
    raise AssertionError(f"the motor never went {want}")


def test_make_builds_the_elf_and_the_hex_from_clean(tmp_path):
    build = tmp_path / "build"
    subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), f"BUILD={build}"], check=True,
                   capture_output=True)
    assert (build / "shuffler.elf").read_bytes()[:4] == b"\x7fELF"
    hex_lines = (build / "shuffler.hex").read_text().split()
    assert all(line.startswith(":") for line in hex_lines)
    assert hex_lines[-1] == ":00000001FF"  # Intel HEX end of file: what avrdude flashes


def test_flash_and_ram_fit_the_chip():
    out = subprocess.run([shutil.which("avr-size") or "avr-size", "-A",
                          str(build_dir() / "shuffler.elf")],
                         check=True, capture_output=True, text=True).stdout
    size = {m[1]: int(m[2]) for m in re.finditer(r"^\.(\w+)\s+(\d+)", out, re.M)}
    flash = size["text"] + size.get("data", 0)
    ram = size.get("data", 0) + size.get("bss", 0)
    assert flash <= FLASH - BOOTLOADER
    assert ram <= RAM - 512  # the rest is stack: ISRs and the deepest call chain


def test_every_output_is_safe_after_reset(chip):
    c, _ = chip()
    state = c.state()
    assert float(state["motor"]) == 0 and float(state["reverse"]) == 0
    assert state["diverter"] == "0"  # parked on the left pile
    assert state["led"] == "000"  # dark until the host says what to show
    wdtcsr = int(state["wdtcsr"], 16)
    assert wdtcsr & 0x08  # WDE: the hardware watchdog resets a wedged chip
    wdp = (wdtcsr >> 2) & 0x08 | wdtcsr & 0x07  # WDP3..0: 2K << WDP cycles at 128 kHz
    assert wdp <= 4  # 0.25 s at most (WDTO_250MS)


def test_a_silent_host_has_the_motor_off_within_the_timeout(chip):
    """The host's heartbeat comes from its deciding loop: wedge that loop (here in the
    card callback) and the firmware stops the motor SILENCE_MS after the last frame."""
    c, dev = chip()

    def wedged(counted, expected):
        if counted == 10:
            time.sleep(1.2)

    report = dev.run_pass(coin_plan(104, random.Random(1)), wedged)
    motor_lines(c, 5, "forward")
    off = motor_lines(c, 5, "off")
    # in the chip's own time: from the last frame it received to the motor pin low
    assert SILENCE_MS <= off["t"] - off["last_rx"] <= SILENCE_MS + 5
    assert report.fault is not None and report.fault.kind is FaultKind.LINK_LOST
    assert 10 <= report.counted < 104
    assert not dev.health().ok  # latched until the dealer clears it


def test_garbage_and_corrupted_frames_are_dropped_and_the_link_recovers(chip):
    c, dev = chip("--cards=24")
    boot_id = dev.hello.boot_id
    rng = random.Random(16)
    good = encode_frame(Frame(0, Msg.HEARTBEAT))
    junk = [
        bytes(rng.randrange(1, 256) for _ in range(700)) + b"\x00",  # longer than any frame
        bytes(rng.randrange(256) for _ in range(2000)) + b"\x00",
        good[:-3] + bytes([good[-3] ^ 0x55]) + good[-2:],  # a bad CRC
        good[:3] + b"\x00",  # cut short
        b"\x00" * 50,
        encode_frame(Frame(0, 0x7E, b"from a newer host")),  # a type it does not know
    ]
    fd = os.open(c.path, os.O_WRONLY | os.O_NOCTTY)
    try:
        for chunk in junk:
            os.write(fd, chunk)
            time.sleep(0.05)
    finally:
        os.close(fd)
    report = dev.run_pass(coin_plan(24, random.Random(2)))
    assert report.fault is None and report.counted == 24
    assert dev.health().ok and dev.hello.boot_id == boot_id  # no restart on the way


@pytest.mark.parametrize("noise", [0.001, 0.01])
def test_every_pass_counts_right_on_a_noisy_line(chip, noise):
    """Bytes corrupted both ways: the firmware's retransmissions and checks bring every
    count home."""
    c, dev = chip("--cards=24", f"--noise={noise}", "--seed=5")
    rng = random.Random(3)
    for _ in range(5):
        report = dev.run_pass(coin_plan(24, rng))
        assert report.fault is None and report.counted == 24
        c.command("gather")
        c.state()
    if noise >= 0.01:
        assert dev.link.decoder.errors > 0 or dev.link.stats.retransmits > 0


next_of = reply  # the next message of a kind, heartbeats going meanwhile


def test_no_pass_before_config_and_no_plan_left_in_ram_after_it():
    c = SimAvr("--cards=24", "--card-rate=50", "--spinup=0.01", "--flap-travel=0.01",
               "--frame-scale=0.1")
    link = Link(serial.serial_for_url(c.path, baudrate=115200, timeout=0.05))
    try:
        link.handshake()
        labels = tuple((0xC3A55A3C >> (i % 32)) & 1 for i in range(64))  # a marked plan
        plan = Pass(pass_id=77, cards=64, labels=labels)
        link.request(plan)
        refused = next_of(link, PassDone)
        assert (refused.pass_id, refused.fault) == (77, FaultCode.NOT_CONFIGURED)
        assert float(c.state()["motor"]) == 0
        link.request(config_message(FaultLimits(), card_rate=5.0))
        assert next_of(link, StatusReply).configured
        link.request(Pass(pass_id=78, cards=64, labels=labels))
        done = next_of(link, PassDone, timeout=10)
        assert done.pass_id == 78 and done.counted == 24  # the tray ran out: 24 cards
        marks = {plan.pack()[4 + i:8 + i].hex() for i in range(0, 8, 4)}
        c.command("ram")
        ram = next(line for line in iter(lambda: c.lines.get(timeout=5), None)
                   if line.startswith("ram "))
        assert not any(mark in ram for mark in marks)  # wiped: the plan, the frame, the ring
    finally:
        link.close()
        c.close()


def test_a_reset_mid_pass_fails_that_pass_and_the_next_one_works(chip):
    c, dev = chip()
    timer = threading.Timer(0.5, c.command, ["reset"])
    timer.start()
    report = dev.run_pass(coin_plan(104, random.Random(1)))
    timer.join()
    assert report.fault is not None and report.fault.kind is FaultKind.MCU_RESTARTED
    assert float(c.state()["motor"]) == 0
    assert dev.health().ok  # RAM is gone: nothing stays latched on the chip
    c.command("gather")  # the dealer puts the cards dealt back in the tray
    again = dev.run_pass(coin_plan(104, random.Random(2)))
    assert again.fault is None and again.counted == 104


def test_the_cli_deals_a_hand_on_the_simulated_chip(tmp_path):
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path), "SHUFFLER_CONFIG": ""}
    out = subprocess.run([sys.executable, "-m", "shuffler", "--device", "sim-avr", "--json", "hand",
                          "--passes", "5"], capture_output=True, text=True, timeout=120,
                         check=False, env=env)
    assert out.returncode == 0, out.stderr
    hand = json.loads(out.stdout)["hand"]
    assert hand["completed"] and len(hand["pass_reports"]) == hand["passes"] == 5
    assert all(p["counted"] == p["expected"] == 24 and p["fault"] is None
               for p in hand["pass_reports"])


def test_a_frozen_chip_is_lost_at_the_documented_time_and_the_cli_exits_promptly(tmp_path):
    """The simavr process stopped mid-pass (SIGSTOP: nothing in or out, the chip's clock
    stopped): the link is declared lost about 3.5 s after the chip's last frame (1 s of
    quiet, then the STATUS's ACK tries) and `shuffler pass` exits 3 soon after, not once
    a wait for the stopped harness has run out (it was 11 s)."""
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path),
           "SHUFFLER_CONFIG": ""}
    cli = subprocess.Popen([sys.executable, "-m", "shuffler", "--no-service", "--device",
                            "sim-avr", "--sim-speed", "1", "--log-json", "pass", "--cards", "104"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    harness = None
    try:
        deadline = time.monotonic() + 30
        while harness is None and time.monotonic() < deadline:
            children = subprocess.run(["pgrep", "-P", str(cli.pid), "-f", "simavr-harness"],
                                      capture_output=True, text=True, check=False).stdout.split()
            harness = int(children[0]) if children else None
            time.sleep(0.1)
        assert harness is not None, "no simavr-harness under the CLI"
        time.sleep(2.5)  # the handshake, and cards flowing
        os.kill(harness, signal.SIGSTOP)
        frozen = time.time()
        _, err = cli.communicate(timeout=30)
        exited = time.time()
    finally:
        if harness is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(harness, signal.SIGCONT)
                os.kill(harness, signal.SIGKILL)
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 3, err
    lost = [json.loads(line) for line in err.splitlines()
            if line.startswith("{") and "serial link lost" in line]
    assert lost, err
    at = datetime.datetime.fromisoformat(lost[0]["timestamp"].replace("Z", "+00:00")).timestamp()
    assert 3.0 < at - frozen < 4.0, at - frozen  # its last card came at most 0.2 s before
    assert exited - at < 2.0, exited - at
