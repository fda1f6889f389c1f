"""The firmware bridge: framing, the link under noise, and the microcontroller's own safety."""

from __future__ import annotations

import queue
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest
import serial

from firmware_bridge.device import QUIET_PROBE_S, SerialDevice, StampClock
from firmware_bridge.framing import (
    MAX_PAYLOAD,
    Frame,
    FrameDecoder,
    FrameError,
    cobs_decode,
    cobs_encode,
    crc16,
    decode_frame,
    encode_frame,
)
from firmware_bridge.link import Link, ProtocolError
from firmware_bridge.messages import (
    SILENCE_MS,
    Card,
    Clear,
    Config,
    FaultCode,
    Input,
    InputKind,
    Msg,
    Pass,
    PassDone,
    PayloadError,
    PileCode,
    StatusAsk,
    StatusReply,
    Stop,
    pack_bits,
    unpack_bits,
)
from hardware_sim import SimDevice, parse_fault_specs
from hardware_sim.virtual_mcu import Noise, VirtualMCU
from shuffler.core.planning import coin_plan
from shuffler.device.clock import ScaledClock
from shuffler.device.contract import EventKind, FaultKind, InputEvent
from shuffler.errors import DeviceError, FaultLatchedError
from shuffler.service.events import TouchIgnored


def test_the_crc_is_ccitt_false_with_its_check_value():
    assert crc16(b"123456789") == 0x29B1


@pytest.mark.parametrize("size", [0, 1, 253, 254, 255, 256, 600])
def test_cobs_round_trips_and_never_sends_a_zero(size):
    rng = random.Random(size)
    for _ in range(50):
        data = bytes(rng.choice([0, 0, rng.randrange(256)]) for _ in range(size))
        encoded = cobs_encode(data)
        assert 0 not in encoded and cobs_decode(encoded) == data


def test_labels_pack_into_bits():
    labels = tuple(random.Random(1).randrange(2) for _ in range(104))
    assert len(pack_bits(labels)) == 13
    assert unpack_bits(pack_bits(labels), 104) == labels
    with pytest.raises(PayloadError):
        unpack_bits(b"\x00", 24)


@pytest.mark.slow
def test_the_decoder_survives_100000_random_and_mutated_frames():
    rng = random.Random(2026)
    decoder = FrameDecoder()
    good = [encode_frame(Frame(rng.randrange(256), rng.randrange(256),
                               bytes(rng.randrange(256) for _ in range(rng.randrange(40)))))
            for _ in range(100)]
    decoded = 0
    for i in range(100_000):
        if i % 2:
            blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        else:
            blob = bytearray(rng.choice(good))
            for _ in range(rng.randrange(1, 4)):
                op = rng.randrange(3)
                at = rng.randrange(len(blob))
                if op == 0:
                    blob[at] ^= rng.randrange(1, 256)
                elif op == 1:
                    del blob[at]
                else:
                    blob.insert(at, rng.randrange(256))
            blob = bytes(blob)
        try:
            decode_frame(blob.rstrip(b"\x00").split(b"\x00")[-1] or b"\x01")
            decoded += 1
        except FrameError:
            pass  # the one error the decoder may raise
        decoder.feed(blob)  # never raises
    assert decoder.errors > 10_000
    assert decoded < 2_000  # a CRC lets almost nothing through


def test_a_payload_too_big_is_refused():
    with pytest.raises(FrameError):
        encode_frame(Frame(1, 0x20, bytes(MAX_PAYLOAD + 1)))


@pytest.fixture
def machine():
    made = []

    def make(cards=24, faults=(), noise=None, seed=1, speed=50, silence=3.0, **mcu_kwargs):
        """A virtual MCU and its host. The silence rule gets more time than SILENCE_MS
        unless a test is about it: a loaded machine must not end a pass for it."""
        sim = SimDevice.for_cards(cards, faults=parse_fault_specs(faults),
                                  rng=random.Random(seed), clock=ScaledClock(speed))
        mcu = VirtualMCU(sim, noise=noise, seed=seed, silence=silence, **mcu_kwargs)
        try:
            dev = SerialDevice(mcu.path)
        except BaseException:
            mcu.close()
            raise
        made.append((mcu, dev))
        return mcu, dev

    yield make
    for mcu, dev in made:
        dev.close()
        mcu.close()


def run_passes(mcu, dev, n, cards=24, seed=3):
    """``n`` passes; each report checked against what the machine really did."""
    rng = random.Random(seed)
    reports = []
    for _ in range(n):
        if dev._fault is not None:
            break
        report = dev.run_pass(coin_plan(cards, rng))
        still_running = mcu._running()
        deadline = time.monotonic() + 5
        while mcu._running() and time.monotonic() < deadline:
            time.sleep(0.01)
        dealt = len(mcu.sim.mechanism.piles[0]) + len(mcu.sim.mechanism.piles[1])
        if report.ok:  # a pass reported complete was complete, and over
            assert not still_running and dealt == cards == report.counted
        assert report.counted <= dealt
        reports.append(report)
        mcu.sim.mechanism.gather()
    return reports


@pytest.mark.parametrize("corrupt", [0.001, 0.01])
def test_every_pass_completes_with_the_right_count_on_a_noisy_line(machine, corrupt):
    mcu, dev = machine(noise=Noise(corrupt=corrupt, drop=corrupt / 4, duplicate=corrupt / 4))
    reports = run_passes(mcu, dev, 10)
    assert [r.fault for r in reports] == [None] * 10
    assert all(r.counted == 24 for r in reports)
    if corrupt >= 0.01:
        assert dev.link.decoder.errors > 0 or dev.link.stats.retransmits > 0


@pytest.mark.slow
def test_at_5_percent_no_pass_is_reported_complete_that_was_not(machine):
    """At 5% a pass may fail (loudly: a fault, or a port that will not open), but a
    pass reported complete dealt every card and had ended."""
    start, reports, refused = time.monotonic(), [], 0
    for seed in range(4):
        try:
            mcu, dev = machine(noise=Noise(corrupt=0.05, drop=0.01, duplicate=0.01),
                               seed=seed)
        except DeviceError:
            refused += 1
            continue
        reports += run_passes(mcu, dev, 3, seed=seed)
    assert time.monotonic() - start < 120  # never a hang
    for r in reports:
        assert r.ok or (r.fault is not None and r.fault.kind is FaultKind.LINK_LOST)
    assert reports or refused


def at_card(n, action):
    """A card callback that sets ``action`` going (on its own thread) at card ``n``."""
    def on_card(counted, expected):
        if counted == n:
            threading.Thread(target=action).start()
    return on_card


def test_a_reset_mid_pass_fails_that_pass_and_the_next_one_works(machine):
    mcu, dev = machine(speed=10)
    report = dev.run_pass(coin_plan(24, random.Random(1)), at_card(8, mcu.reset))
    assert report.fault is not None and report.fault.kind is FaultKind.MCU_RESTARTED
    assert "restarted" in report.fault.message
    assert not mcu.sim.health().motor_on
    mcu.sim.mechanism.gather()
    again = dev.run_pass(coin_plan(24, random.Random(2)))
    assert again.fault is None and again.counted == 24


def test_a_pulled_cable_ends_in_link_lost(machine):
    mcu, dev = machine(speed=10)
    report = dev.run_pass(coin_plan(24, random.Random(1)), at_card(8, mcu.pull_cable))
    assert report.fault is not None and report.fault.kind is FaultKind.LINK_LOST
    assert "shuffler clear" in report.fault.message
    assert not dev.health().ok and not mcu.sim.health().motor_on
    with pytest.raises(FaultLatchedError):
        dev.run_pass(coin_plan(24, random.Random(1)))


def test_a_wedged_host_looks_dead_and_the_microcontroller_stops_the_motor(machine):
    """The heartbeat comes from the loop that decides: when it is stuck (here in the
    card callback), the microcontroller stops the motor within SILENCE_MS."""
    mcu, dev = machine(104, speed=10, silence=SILENCE_MS / 1000)  # a pass: about 2 s

    def wedged(counted, expected):
        if counted == 10:
            time.sleep(1.2)

    report = dev.run_pass(coin_plan(104, random.Random(1)), wedged)
    assert report.fault is not None and report.fault.kind is FaultKind.LINK_LOST
    assert 10 <= report.counted < 104 and not mcu.sim.health().motor_on
    assert mcu.silenced_at is not None
    assert SILENCE_MS / 1000 <= mcu.silenced_at - mcu.heard_before_silence < 0.75


def test_new_limits_reach_the_microcontroller_at_once_and_bad_ones_change_nothing(machine):
    mcu, dev = machine()
    dev.limits = replace(dev.limits, max_pass_seconds=2.0, retries=1)
    assert (mcu.config.max_pass_ms, mcu.config.retries) == (2000, 1)
    with pytest.raises(DeviceError, match="cannot be given to the microcontroller"):
        dev.limits = replace(dev.limits, jam_seconds=1e6)  # past the wire's 16 bits
    assert dev.limits.max_pass_seconds == 2.0 and mcu.config.jam_ms == dev.config.jam_ms


def test_a_different_major_protocol_is_refused():
    sim = SimDevice.for_cards(24, clock=ScaledClock(50))
    mcu = VirtualMCU(sim, protocol=(3, 0))
    try:
        with pytest.raises(ProtocolError, match=r"protocol 3\.0"):
            SerialDevice(mcu.path)
    finally:
        mcu.close()


def test_the_link_comes_back_when_the_port_does(tmp_path):
    """The udev rule gives the port a stable name; when a new board appears behind it,
    the device reconnects by itself, and the dealer clears the latched fault."""
    port = tmp_path / "shuffler"
    first = VirtualMCU(SimDevice.for_cards(24, clock=ScaledClock(50)))
    port.symlink_to(first.path)
    dev = SerialDevice(str(port))
    first.pull_cable()
    report = dev.run_pass(coin_plan(24, random.Random(1)))
    assert report.fault is not None and report.fault.kind is FaultKind.LINK_LOST
    assert not dev.health().ok
    second = VirtualMCU(SimDevice.for_cards(24, clock=ScaledClock(50)), seed=2)
    port.unlink()
    port.symlink_to(second.path)
    try:
        assert dev.health().fault is not None  # back, but the fault stays latched
        assert not dev.link.lost
        assert dev.clear_fault() and dev.health().ok
        assert dev.run_pass(coin_plan(24, random.Random(2))).counted == 24
    finally:
        dev.close()
        second.close()


# -- issue 17: what the fuzz campaign found --------------------------------------------------
def inject(mcu, msg_type, payload, seq=0):
    """A frame with a good CRC, straight onto the wire from the microcontroller's side."""
    mcu.port.write(encode_frame(Frame(seq, msg_type, payload)))


def test_a_stale_end_of_pass_never_completes_the_new_pass(machine):
    # 104 cards at 25x: the new pass runs 0.8 s past the stale PASS_DONE sent at its first
    mcu, dev = machine(104, speed=25)
    stale = PassDone(dev._pass_id - 1 or 0xFFFF, 104, 52, 52, 900, 0, True, 0,
                     FaultCode.NONE, 0)

    def first_card(counted, expected):
        if counted == 1:  # an earlier pass's PASS_DONE, delivered late
            mcu.outbox.put(stale)

    report = dev.run_pass(coin_plan(104, random.Random(1)), first_card)
    assert report.ok and not mcu._running()
    dealt = len(mcu.sim.mechanism.piles[0]) + len(mcu.sim.mechanism.piles[1])
    assert dealt == 104 and dev.link.stats.stale >= 1


@pytest.mark.parametrize("msg_type, payload, seq", [
    (Msg.PASS_DONE, b"\x00\x01", 201),  # short: struct.error before
    (Msg.PASS_DONE, PassDone(1, 3, 1, 2, 0, 0, False, 0, FaultCode.NONE, 0).pack()[:-3]
     + b"\x63\x00\x00", 202),  # fault code 99: ValueError before
    (Msg.CARD, b"\x00", 0),
    (Msg.INPUT, b"\x09\x00\x00\x00\x00\x00", 203),  # no such input kind
    (Msg.HELLO_REPLY, b"\x02", 204),
    (0x7E, b"\x01\x02", 205),  # a type nobody declared
])
def test_a_malformed_payload_with_a_good_crc_is_dropped_and_the_pass_goes_on(
        machine, msg_type, payload, seq):
    mcu, dev = machine()
    sent = []

    def noisy(counted, expected):
        if counted == 5:
            inject(mcu, msg_type, payload, seq)
            sent.append(counted)

    report = dev.run_pass(coin_plan(24, random.Random(1)), noisy)
    assert sent and report.ok
    assert dev.link.stats.bad_frames >= 1


def test_a_short_status_reply_is_a_link_error_not_an_exception(machine):
    """A short STATUS_REPLY stopped the service's main loop (struct.error from health)."""
    mcu, dev = machine()
    inject(mcu, Msg.STATUS_REPLY, b"\x00", seq=99)
    inject(mcu, Msg.BATTERY_REPLY, b"\x1f", seq=98)
    health = dev.health()
    assert health.ok and health.detail["link"]["bad_frames"] >= 2
    assert dev.battery().volts > 5


SIGTERM_DURING_A_REQUEST = """
import signal, sys
from firmware_bridge.device import SerialDevice
from hardware_sim import SimDevice
from hardware_sim.virtual_mcu import VirtualMCU
from shuffler.device.clock import ScaledClock

mcu = VirtualMCU(SimDevice.for_cards(24, clock=ScaledClock(50)))
dev = SerialDevice(mcu.path)

def stop(signum, frame):  # what the service's handler does
    dev.stop()
    raise SystemExit(0)

signal.signal(signal.SIGTERM, stop)
mcu.noise.drop = 1.0  # the microcontroller goes deaf: the request waits for its ACK
print("asking", flush=True)
try:
    dev.battery()
finally:
    mcu.noise.drop = 0.0
    dev.close()
    mcu.close()
"""


def test_sigterm_during_a_request_exits_instead_of_deadlocking_on_the_send_lock():
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_DURING_A_REQUEST],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "asking\n"
        time.sleep(0.3)  # inside the request, waiting for an ACK that never comes
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


# -- the microcontroller's side of docs/protocol.md, spoken to by a bare link -----------------
@pytest.fixture
def bare():
    """A virtual MCU and a bare host link (no SerialDevice): the test speaks the protocol.
    The silence rule gets 3 s, as in ``machine``: no test here is about it, and a loaded
    machine's late heartbeat ended a pass LINK_LOST at 19 cards of 24."""
    sim = SimDevice.for_cards(24, rng=random.Random(1), clock=ScaledClock(50))
    mcu = VirtualMCU(sim, silence=3.0)
    link = Link(serial.serial_for_url(mcu.path, timeout=0.05))
    link.handshake()
    yield mcu, link
    link.close()
    mcu.close()


def reply(link, kind, timeout=5.0):
    """The next message of ``kind``, heartbeats going meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        link.beat()
        try:
            msg = link.inbox.get(timeout=0.05)
        except queue.Empty:
            continue
        if isinstance(msg, kind):
            return msg
    raise AssertionError(f"no {kind.__name__}")


LIMITS = Config(500, 1000, 2, 300, 90_000, 60, 200, 2000, 5600, 100, 0)
PLAN = tuple(random.Random(4).randrange(2) for _ in range(24))


def test_the_mcu_refuses_a_pass_until_it_has_the_limits(bare):
    mcu, link = bare
    link.request(Pass(41, 24, PLAN))
    assert reply(link, PassDone) == PassDone(41, 0, 0, 0, 0, 0, False, 0,
                                             FaultCode.NOT_CONFIGURED, 0)
    assert mcu.sim.mechanism.piles == ([], [])  # nothing moved
    link.request(LIMITS)
    assert reply(link, StatusReply).configured
    link.request(Pass(42, 24, PLAN))
    done = reply(link, PassDone)
    assert (done.pass_id, done.counted, done.fault) == (42, 24, FaultCode.NONE)
    assert (done.left, done.right) == (PLAN.count(0), PLAN.count(1))


def test_a_hello_during_a_pass_ends_it_latched_and_forgets_the_limits(bare):
    _, link = bare
    link.request(LIMITS)
    reply(link, StatusReply)
    link.request(Pass(7, 24, PLAN))
    reply(link, Card)
    link.handshake()  # a new host session
    link.request(StatusAsk())
    status = reply(link, StatusReply)
    assert not status.motor_on and status.fault is FaultCode.LINK_LOST
    assert not status.configured and status.pass_id == 0
    link.request(Pass(8, 24, PLAN))
    assert reply(link, PassDone).fault is FaultCode.LATCHED  # checked before the limits
    link.request(Clear())
    assert reply(link, StatusReply).fault is FaultCode.NONE


def test_stop_ends_a_pass_with_its_own_code(bare):
    _, link = bare
    link.request(LIMITS)
    reply(link, StatusReply)
    link.request(Pass(9, 24, PLAN))
    reply(link, Card)
    link.request(Stop(0))
    done = reply(link, PassDone)
    assert done.pass_id == 9 and done.fault is FaultCode.STOPPED and done.counted < 24
    link.request(StatusAsk())
    assert reply(link, StatusReply).fault is FaultCode.NONE  # a stop does not latch


@pytest.mark.slow
def test_a_silent_virtual_mcu_ends_the_pass_link_lost_within_the_documented_bound():
    """Every byte either way lost from card 5 on: the host's quiet probe is not
    acknowledged and the pass ends link_lost, latched, within about 3.5 s."""
    mcu = VirtualMCU(SimDevice.for_cards(24, clock=ScaledClock(5)))
    dev = SerialDevice(mcu.path)
    went: list[float] = []

    def silence(counted: int, expected: int) -> None:
        if counted == 5 and not went:
            mcu.noise.drop = 1.0
            went.append(time.monotonic())

    try:
        report = dev.run_pass(coin_plan(24, random.Random(5)), silence)
        assert report.fault is not None and report.fault.kind.value == "link_lost", report
        assert time.monotonic() - went[0] < 6.0
        assert dev._fault is not None  # latched
    finally:
        dev.close()
        mcu.close()


@pytest.mark.slow
def test_an_input_just_before_the_silence_does_not_put_the_link_loss_off():
    """The last frame the MCU sends is an INPUT, heard early in the host's wait for the
    next card: the quiet probe still goes out QUIET_PROBE_S after it (it went out a
    whole wait later), so the link is lost about 3.5 s after the last frame, not 4.5."""
    mcu = VirtualMCU(SimDevice.for_cards(24, clock=ScaledClock(1)))
    dev = SerialDevice(mcu.path)
    went: list[float] = []

    def last_words() -> None:
        time.sleep(0.05)  # cards come every 0.2 s: this INPUT is heard between two
        mcu.outbox.put(Input(InputKind.TOUCH, PileCode.NONE, 0))
        time.sleep(0.05)
        mcu.noise.drop = 1.0

    def silence(counted: int, expected: int) -> None:
        if counted == 5 and not went:
            went.append(time.monotonic())
            threading.Thread(target=last_words, daemon=True).start()

    try:
        report = dev.run_pass(coin_plan(24, random.Random(5)), silence)
        took = time.monotonic() - dev.link.last_heard
        assert report.fault is not None and report.fault.kind.value == "link_lost", report
        assert dev.link.last_heard > went[0] + 0.04  # the INPUT was the last frame heard
        # 1 s of quiet and 2.43 s of ACK tries; it was 4.4 s
        assert QUIET_PROBE_S + 2.4 < took < QUIET_PROBE_S + 2.8, took
    finally:
        dev.close()
        mcu.close()


@pytest.mark.slow
def test_the_virtual_mcu_repeats_an_unacknowledged_reply_with_the_same_sequence_number():
    """As the firmware: never given up, never renumbered (a renumbered copy would be
    applied twice by the host)."""
    from firmware_bridge.framing import FrameDecoder as Decoder

    mcu = VirtualMCU(SimDevice.for_cards(24))
    port = serial.Serial(mcu.path, 115200, timeout=0.05)
    decoder, seqs = Decoder(), []
    try:
        port.write(encode_frame(Frame(1, Msg.HELLO, bytes([2, 1]))))
        end = time.monotonic() + 3.5  # past the eight tries (about 2.4 s) of a host
        while time.monotonic() < end:
            port.write(encode_frame(Frame(0, Msg.HEARTBEAT)))
            seqs += [f.seq for f in decoder.feed(port.read(256)) if f.type == Msg.HELLO_REPLY]
        assert len(seqs) > 8 and set(seqs) == {seqs[0]}
    finally:
        port.close()
        mcu.close()


def test_the_restack_lockout_is_measured_on_the_microcontrollers_clock(machine, tmp_path):
    """The MCU stamps its inputs; the host has no clock of its own for it. A simulated
    dealer at 100x lifts and touches a few host milliseconds after the pass, but 1.4 s
    after it on the MCU's clock: no touch of the hand is refused as too soon."""
    _, dev = machine(speed=100)
    assert hand_told(dev, tmp_path) == []


def hand_told(dev, tmp_path, passes=3) -> list[dict]:
    """A hand of ``passes`` passes on ``dev``: the touches it refused (it completes)."""
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.session import Session
    from shuffler.store.state import StateStore

    session = Session(PassController(dev, StateStore(tmp_path)), Config(), random.Random(1))
    events: list[dict] = []
    result = session.do_hand(session.terms(passes),
                              on_event=lambda e: events.append(e.to_json())).to_json()
    assert result["hand"]["completed"]
    return [e for e in events if e["event"] == "touch_ignored"]


def test_a_hasty_touch_on_the_microcontrollers_clock_is_still_refused(machine, tmp_path):
    # restacked and touched 0.25 s (MCU time) after the light: inside the lock-out, read
    # on the MCU's clock from its stamps (at speed 1: the host reads a faster MCU's clock
    # no faster than its own between stamps, never ahead of it, so there it is lenient)
    from hardware_sim.dealer import SimDealer
    from hardware_sim.device import SimTiming

    mcu, dev = machine(cards=4, speed=1)
    mcu.sim.timing = SimTiming(restack_pause=0.0)
    mcu.sim.dealer = SimDealer(rng=random.Random(4), lift_gap=0.2, settle=0.05)
    told = hand_told(dev, tmp_path, passes=2)  # one restack between, a short pack at speed 1
    assert told and all("restacking" in e["why"] for e in told)


@pytest.mark.parametrize(("after_end", "refused"), [(0.6, False), (0.1, True)])
def test_between_jobs_the_lockout_reads_the_microcontrollers_stamps(machine, tmp_path,
                                                                    after_end, refused):
    """The service between jobs: a touch the MCU stamped 0.6 s after the job ended (its
    clock, as the stamps tell it) is past the lock-out though the host heard it a moment
    later; 0.1 s is not. A client's job holds the machine, so a touch taken only waits."""
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.session import Session
    from shuffler.device.contract import EventKind, InputEvent
    from shuffler.service.loop import Service
    from shuffler.store.state import StateStore

    _, dev = machine(speed=1)
    session = Session(PassController(dev, StateStore(tmp_path)), Config(), random.Random(1))
    service = Service(session, tmp_path / "s.sock")
    seen: list = []
    service.subscribe(seen.append)
    ended = dev.now()
    session.controller.touch.pass_ended(ended)
    service.claim.acquire()
    dev.events.put(InputEvent(EventKind.TOUCH, ended + after_end))
    service._idle()
    told = [e for e in seen if isinstance(e, TouchIgnored)]
    assert bool(told) is refused and (not service.touch_waiting) is refused


def test_a_board_up_for_weeks_is_no_jump_at_its_first_input():
    # a touch wait begun before the first INPUT of a board up for 3 weeks must not see
    # 3 weeks pass when that INPUT arrives (it ended the wait at once: a hand stopped
    # "no touch within 300 s" 1 s in)
    host = [100.0]
    clock = StampClock(lambda: host[0])
    host[0] += 0.5
    since = clock.now()
    at = clock.heard_ms(21 * 86400 * 1000)  # the chip's ms since its reset
    assert at == pytest.approx(since) and clock.now() - since < 0.01
    host[0] += 0.3
    assert clock.heard_ms(21 * 86400 * 1000 + 300) == pytest.approx(since + 0.3)


def test_a_board_that_restarts_goes_on_from_the_device_time_reached():
    # its ms back near 0: read as the chip's time, the clock would hold still for the
    # whole uptime before (never going back); anchored afresh, it goes on
    host = [0.0]
    clock = StampClock(lambda: host[0])
    clock.heard_ms(5_000_000)
    host[0] += 10.0
    before = clock.now()
    clock.new_boot()
    host[0] += 0.2
    assert clock.heard_ms(40) == pytest.approx(before + 0.2)
    host[0] += 1.0
    assert clock.now() == pytest.approx(before + 1.2)


def test_the_first_input_of_a_long_running_mcu_is_timed_as_it_happened():
    # end to end: the virtual MCU up 4,294 s (the us wrap's neighbourhood), its first
    # INPUT heard only after the host began a wait
    sim = SimDevice.for_cards(24, clock=ScaledClock(1, start=2**32 / 1e6 - 1.0))
    mcu = VirtualMCU(sim)
    dev = SerialDevice(mcu.path)
    try:
        since = dev.now()
        sim.events.put(InputEvent(EventKind.TOUCH, sim.now()))
        got = dev.wait_event(2.0)
        assert got is not None and got.kind is EventKind.TOUCH
        assert dev.now() - since < 1.0 and abs(got.at - since) < 1.0, (since, got.at)
    finally:
        dev.close()
        mcu.close()


def test_the_mcus_time_between_stamps_never_goes_back_on_a_slower_chip():
    # simavr on a busy host runs slower than the host: its next stamp is behind what the
    # host's extrapolation already handed out; the clock holds still, never steps back
    host = [100.0]
    clock = StampClock(lambda: host[0])
    clock.heard(1.0)
    host[0] += 0.5
    assert clock.now() == pytest.approx(1.5)
    clock.heard(1.2)  # the chip got only 0.2 s through in the host's 0.5 s
    assert clock.now() == pytest.approx(1.5)  # held, not 1.2
    host[0] += 0.2
    assert clock.now() == pytest.approx(1.5)  # 1.4 by the stamp: still held
    host[0] += 0.2
    assert clock.now() == pytest.approx(1.6)  # past the reading: moving again
    clock.heard(5.0)  # a faster stamp sets it right at once
    assert clock.now() == pytest.approx(5.0)
