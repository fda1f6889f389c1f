"""The firmware's link under pressure, in simavr: a flood of valid frames (idle and
mid-pass), a reply queue left full by a host that does not acknowledge, duplicates and
stale sequence numbers. The chip never resets, never loses a PASS_DONE and never runs a
pass twice."""

from __future__ import annotations

import os
import queue
import random
import threading
import time
from collections.abc import Callable

import pytest
import serial

from firmware_bridge.device import config_message
from firmware_bridge.framing import Frame, FrameDecoder, encode_frame
from firmware_bridge.messages import (
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    Ack,
    FaultCode,
    Hello,
    HelloReply,
    Message,
    Msg,
    Pass,
    PassDone,
    StatusAsk,
    Stop,
    decode_payload,
)
from hardware_sim.sim_avr import SimAvr, serial_on
from shuffler.core.planning import coin_plan
from shuffler.device.contract import FaultLimits

from .test_firmware import MISSING

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]


def new_chip(cards: int = 104) -> SimAvr:
    return SimAvr(f"--cards={cards}", "--card-rate=50", "--spinup=0.01", "--flap-travel=0.01",
                  "--frame-scale=0.1")


def resets(chip: SimAvr) -> list[str]:
    """The harness's "reset" lines so far (every reboot of the chip, the watchdog's too)."""
    seen = []
    while True:
        try:
            line = chip.lines.get_nowait()
        except queue.Empty:
            return seen
        if line.startswith(("reset ", "crashed ")):
            seen.append(line)


class Flood(threading.Thread):
    """Valid frames as fast as the line takes them, written beside the host's own (the
    pseudo-terminal opened a second time, write-only): HEARTBEATs, and copies of one
    STATUS request (a sequence number far from the host's), each of which the chip
    acknowledges again: more ACKs than the line can carry back."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
        self.stop = threading.Event()
        self.frames = 0

    def run(self) -> None:
        burst = (encode_frame(Frame(0, Msg.HEARTBEAT)) * 10
                 + encode_frame(Frame(200, Msg.STATUS)) * 10)
        while not self.stop.is_set():
            os.write(self.fd, burst)
            self.frames += 20
            time.sleep(0.005)

    def close(self) -> float:
        self.stop.set()
        self.join(2)
        os.close(self.fd)
        return self.frames


def test_a_flood_of_valid_frames_idle_and_mid_pass_neither_resets_nor_loses_a_pass():
    chip = new_chip()
    dev = serial_on(chip)
    resets(chip)
    flood = Flood(chip.path)
    started = time.monotonic()
    flood.start()
    try:
        time.sleep(1.5)  # idle
        assert dev.health().ok
        report = dev.run_pass(coin_plan(104, random.Random(1)))  # mid-pass
        seconds = time.monotonic() - started
        frames = flood.close()
        assert report.fault is None and report.counted == 104, report
        # the line carries at most about 2,000 such frames a second at 115200 baud; the
        # flood fills it (less on a loaded machine, where simulated time slips)
        assert frames / seconds > 500, frames / seconds
        assert resets(chip) == []  # the watchdog never fired
        assert dev.health().ok
    finally:
        if flood.is_alive():
            flood.close()
        dev.close()


class RawHost:
    """A host written by hand on the chip's pseudo-terminal: it acknowledges only when
    told to, so the chip's reply queue can be left full."""

    def __init__(self, path: str) -> None:
        self.port = serial.Serial(path, 115200, timeout=0.02)
        self.decoder = FrameDecoder()
        self.seq = 0
        self.got: list[tuple[int, Message]] = []
        self.acking = True

    def send(self, msg: Message, seq: int | None = None) -> int:
        if seq is None:
            self.seq = self.seq % 255 + 1
            seq = self.seq
        self.port.write(encode_frame(Frame(seq, msg.TYPE, msg.pack())))
        return seq

    def beat(self) -> None:
        self.port.write(encode_frame(Frame(0, Msg.HEARTBEAT)))

    def pump(self, seconds: float, until: Callable[[], bool] | None = None) -> bool:
        """Read (acknowledging if ``acking``) and beat for ``seconds``, or only until
        ``until()`` holds (a bound for a wait on something that must come): whether it
        held. A wait for something that must *not* come gives no ``until``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if until is not None and until():
                return True
            self.turn()
        return until is None or until()

    def turn(self, read: int = 512) -> None:
        """Beat once, then read what came (at most the port's timeout) and acknowledge."""
        self.beat()
        for frame in self.decoder.feed(self.port.read(read)):
            msg = decode_payload(frame.type, frame.payload)
            self.got.append((frame.seq, msg))
            if frame.seq and self.acking:
                self.port.write(encode_frame(Frame(0, Msg.ACK, bytes([frame.seq]))))

    def done(self) -> list[PassDone]:
        """Every PASS_DONE heard, each copy counted once (the chip repeats until an ACK)."""
        seen: dict[int, PassDone] = {}
        for seq, msg in self.got:
            if isinstance(msg, PassDone):
                seen[seq] = msg
        return list(seen.values())

    def acked(self, seq: int) -> bool:
        return any(isinstance(msg, Ack) and msg.seq == seq for _, msg in self.got)

    def open_session(self, limits: FaultLimits | None = None) -> None:
        self.send(Hello(PROTOCOL_MAJOR, PROTOCOL_MINOR))
        assert self.pump(10.0, lambda: any(isinstance(m, HelloReply) for _, m in self.got))
        config = self.send(config_message(limits or FaultLimits(), 5.0))
        assert self.pump(10.0, lambda: self.acked(config))


def test_a_full_reply_queue_never_loses_the_pass_done():
    chip = new_chip(24)
    host = RawHost(chip.path)
    try:
        host.open_session()
        host.send(Pass(77, 24, tuple(coin_plan(24, random.Random(3)).labels)))
        host.pump(0.1)
        host.acking = False  # from here the chip's replies pile up unacknowledged
        for _ in range(20):
            host.send(StatusAsk())
            host.pump(0.02)
        host.pump(1.5)  # the pass ends meanwhile: its PASS_DONE waits in its own slot
        assert not [d for d in host.done() if d.pass_id == 77]
        host.acking = True
        host.pump(3.0)
        done = [d for d in host.done() if d.pass_id == 77]
        assert len(done) == 1 and done[0].counted == 24 and done[0].fault is FaultCode.NONE
        assert resets(chip) == []
    finally:
        host.port.close()
        chip.close()


def test_duplicates_and_stale_sequence_numbers_never_run_a_pass_twice():
    chip = new_chip(48)
    host = RawHost(chip.path)
    try:
        host.open_session()
        plan = Pass(9, 24, tuple(coin_plan(24, random.Random(4)).labels))
        seq = host.send(plan)
        host.pump(0.05)
        host.send(plan, seq)  # a duplicate: acknowledged again, not applied
        host.send(StatusAsk())
        host.send(StatusAsk())
        host.pump(1.5)  # the pass ends
        host.send(plan, seq)  # stale: a copy of one applied three messages ago
        host.pump(1.0)
        host.send(Pass(10, 24, plan.labels), 0)  # a PASS with seq 0: dropped, never run
        host.pump(1.0)
        done = host.done()
        assert [(d.pass_id, d.counted, d.fault) for d in done] == [(9, 24, FaultCode.NONE)]
        state = chip.state()
        assert len(state["tray"].split(",")) == 24  # 24 of the 48 dealt, once
        assert resets(chip) == []
    finally:
        host.port.close()
        chip.close()


def test_a_frozen_chip_ends_the_pass_link_lost_within_the_documented_bound():
    """docs/protocol.md: nothing heard for 1 s, a STATUS goes unacknowledged: the pass
    ends link_lost, latched, about 3.5 s after the chip's last frame."""
    chip = new_chip()
    dev = serial_on(chip)
    froze: list[float] = []

    def freeze(counted: int, expected: int) -> None:
        if counted == 10 and not froze:
            chip.command("freeze")
            froze.append(time.monotonic())

    try:
        report = dev.run_pass(coin_plan(104, random.Random(5)), freeze)
        took = time.monotonic() - froze[0]
        assert report.fault is not None and report.fault.kind.value == "link_lost", report
        assert took < 6.0, took  # 1 s + the ACK tries (2.4 s), with room for a busy machine
        assert not dev.health().ok  # latched
    finally:
        dev.close()


def test_a_pass_that_arrives_after_a_stop_for_it_never_runs():
    """STOP names the pass: if its PASS comes later (a race on the host), the chip
    refuses it with STOPPED and nothing moves; the next pass runs."""
    chip = new_chip(24)
    host = RawHost(chip.path)
    try:
        host.open_session()
        labels = tuple(coin_plan(24, random.Random(6)).labels)
        host.send(Stop(55))
        host.pump(0.1)
        host.send(Pass(55, 24, labels))
        host.pump(0.5)
        assert [(d.pass_id, d.counted, d.fault) for d in host.done()] == [
            (55, 0, FaultCode.STOPPED)]
        assert len(chip.state()["tray"].split(",")) == 24  # not one card moved
        host.send(Pass(56, 24, labels))
        host.pump(1.5)
        assert [(d.pass_id, d.counted) for d in host.done()][-1] == (56, 24)
    finally:
        host.port.close()
        chip.close()
