"""The virtual MCU behaves as the firmware where issues 23 and 33 found them apart: a CLEAR with
a jammed card still in the beam is refused (firmware/main.c: ``!beam_blocked()``), and the
reply queue has the firmware's bound (firmware/link.c: six slots, PASS_DONE in a slot of
its own, a request that finds no room left unacknowledged so the host repeats it), and a
STOP ends whatever runs, whichever pass it names, in every state of the pass. The queue
and STOP cases run the same raw host against both: the virtual MCU and the firmware in
simavr."""

from __future__ import annotations

import queue
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from firmware_bridge.device import SerialDevice
from firmware_bridge.messages import (
    REDRIVE_QUIET_MS,
    SILENCE_MS,
    Ack,
    Card,
    FaultCode,
    Pass,
    StatusAsk,
    StatusReply,
    Stop,
)
from hardware_sim import SimDevice, parse_fault_specs
from hardware_sim.physics import MechanismSpec
from hardware_sim.sim_avr import SimAvr
from hardware_sim.virtual_mcu import QUEUE_SLOTS, VirtualMCU
from shuffler.core.planning import coin_plan
from shuffler.device.clock import ScaledClock
from shuffler.device.contract import FaultKind, FaultLimits

from .test_firmware import MISSING
from .test_firmware_link import RawHost, new_chip, resets


def virtual(cards: int, faults: tuple[str, ...] = (), dealer: bool = True,
            speed: float = 10) -> VirtualMCU:
    sim = SimDevice.for_cards(cards, faults=parse_fault_specs(faults),
                              rng=random.Random(1), clock=ScaledClock(speed))
    return VirtualMCU(sim, seed=1, silence=3.0, dealer=dealer)


# -- CLEAR with the beam blocked -------------------------------------------------------------
def test_a_clear_with_a_jammed_card_in_the_beam_is_refused_until_the_throat_is_freed():
    mcu = virtual(24, ("jam:13",), dealer=False, speed=50)  # nobody frees the throat
    dev = SerialDevice(mcu.path)
    try:
        report = dev.run_pass(coin_plan(24, random.Random(2)))
        assert report.fault is not None and report.fault.kind is FaultKind.JAM
        assert mcu.throat_blocked()
        assert dev.clear_fault() is False  # refused: the STATUS_REPLY still says JAM
        reply = dev._ask(StatusAsk(), StatusReply)
        assert reply.fault is FaultCode.JAM and reply.fault_card == 13
        assert not dev.health().ok
        mcu.sim.mechanism.free_throat()  # the dealer pulls the card out
        assert dev.clear_fault() is True and dev.health().ok
        again = dev.run_pass(coin_plan(24, random.Random(3)))
        assert again.fault is None and again.counted == 24
    finally:
        dev.close()
        mcu.close()


def test_the_simulated_dealer_frees_the_throat_before_the_clear():
    """With its dealer (the default, and sim-serial's), the jammed card is pulled out on
    the fault LED, as firmware/harness's dealer does: the CLEAR that follows is taken."""
    mcu = virtual(24, ("jam:5",), speed=50)
    dev = SerialDevice(mcu.path)
    try:
        assert dev.run_pass(coin_plan(24, random.Random(4))).fault is not None
        assert mcu.settle() and not mcu.throat_blocked()
        assert dev.clear_fault() is True and dev.health().ok
    finally:
        dev.close()
        mcu.close()


# -- the reply queue's bound, on both ----------------------------------------------------------
@pytest.fixture(params=["virtual-mcu", "simavr"])
def chip_path(request) -> Iterator[Callable[[int], str]]:
    """A path to a microcontroller with ``cards`` cards: the virtual MCU or the firmware."""
    closing: list[Callable[[], object]] = []

    def make(cards: int) -> str:
        if request.param == "simavr":
            if MISSING is not None:
                pytest.skip(MISSING)
            chip = new_chip(cards)
            closing.append(lambda: (resets(chip) == [] or pytest.fail("the chip reset"),
                                    chip.close()))
            return chip.path
        mcu = virtual(cards)
        closing.append(mcu.close)
        return mcu.path

    yield make
    for close in closing:
        close()


def acked(host: RawHost, seqs: list[int]) -> list[int]:
    heard = {msg.seq for seq, msg in host.got if isinstance(msg, Ack)}
    return [s for s in seqs if s in heard]


def test_a_full_reply_queue_leaves_requests_unacknowledged_and_keeps_the_pass_done(chip_path):
    host = RawHost(chip_path(24))
    try:
        host.open_session()
        host.send(Pass(77, 24, tuple(coin_plan(24, random.Random(3)).labels)))
        host.pump(0.1)
        host.acking = False  # from here the replies pile up unacknowledged
        asks = []
        for _ in range(20):
            asks.append(host.send(StatusAsk()))
            host.pump(0.02)
        host.pump(1.5)  # the pass ends meanwhile: its PASS_DONE waits in its own slot
        taken = acked(host, asks)
        # the first few fill the six slots (an INPUT event may hold one); the rest
        # find no room and are left unacknowledged
        assert 1 <= len(taken) <= QUEUE_SLOTS and taken == asks[:len(taken)], taken
        assert not [d for d in host.done() if d.pass_id == 77]
        host.acking = True
        host.pump(10.0, lambda: any(d.pass_id == 77 for d in host.done()))
        done = [d for d in host.done() if d.pass_id == 77]
        assert len(done) == 1 and done[0].counted == 24 and done[0].fault is FaultCode.NONE
        # the host repeats one left unacknowledged: now there is room, it is taken
        left = asks[len(taken)]
        before = sum(isinstance(m, StatusReply) for _, m in host.got)
        host.send(StatusAsk(), left)
        host.pump(10.0, lambda: acked(host, [left]) == [left] and sum(
            isinstance(m, StatusReply) for _, m in host.got) > before)
        assert acked(host, [left]) == [left]
        assert sum(isinstance(m, StatusReply) for _, m in host.got) == before + 1
    finally:
        host.port.close()


def test_a_pass_while_the_last_pass_done_waits_for_its_ack_is_left_unacknowledged(chip_path):
    host = RawHost(chip_path(48))
    try:
        host.open_session()
        labels = tuple(coin_plan(24, random.Random(5)).labels)
        host.send(Pass(1, 24, labels))
        host.pump(0.1)
        host.acking = False
        # the pass ends: its PASS_DONE comes (it is repeated, not acknowledged)
        host.pump(10.0, lambda: bool(host.done()))
        assert [d.pass_id for d in host.done()] == [1]
        second = host.send(Pass(2, 24, labels))
        host.pump(0.3)
        assert acked(host, [second]) == []  # no room: its ACK may be on the way
        host.acking = True
        host.pump(0.5)  # PASS_DONE 1 acknowledged at its next repeat
        host.send(Pass(2, 24, labels), second)  # the host repeats it: now it runs
        host.pump(10.0, lambda: acked(host, [second]) == [second] and len(host.done()) == 2)
        assert acked(host, [second]) == [second]
        assert [(d.pass_id, d.counted, d.fault) for d in host.done()] == [
            (1, 24, FaultCode.NONE), (2, 24, FaultCode.NONE)]
    finally:
        host.port.close()


# -- STOP means stop, whichever pass it names, in every state of the pass ------------------------
PASS_ID = 10
STOP_IDS = {"none": 0, "this": PASS_ID, "other": 99}
STATES = ("ramp", "feed", "brake", "reverse", "retry")
#: card 3 never feeds: the pass waits in FEED, then brakes, reverses and retries
STOP_FAULT = "misfeed:3"
STOP_LIMITS = FaultLimits(misfeed_seconds=0.3, reverse_seconds=0.3, retries=3)
#: longer than a misfeed, a brake, a reverse and a ramp: a pass that was not ended would
#: drive its motor again within it
WATCH_S = 1.2


class WatchedSim(SimDevice):
    """A simulated machine whose motor line is watched as firmware/harness's is: each change
    (forward, reverse, off) goes into :attr:`lines` as the harness's ``motor ...`` line."""

    def __init__(self, *args, **kwargs) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self._line = "off"
        self.heard: Callable[[], float] = time.monotonic  # the MCU's last sign of life
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def _motor_on(self) -> bool:
        return self._line != "off"

    @_motor_on.setter
    def _motor_on(self, on: bool) -> None:
        run = getattr(self, "_run", None)
        line = ("off" if not on else
                "reverse" if run is not None and run.engine.motor < 0 else "forward")
        if line != self._line:
            self._line = line
            self.lines.put(f"motor {line} t={time.monotonic() * 1000:.1f} "
                           f"last_rx={self.heard() * 1000:.1f}")


@dataclass
class Machine:
    path: str
    lines: queue.Queue[str]  # the harness's lines (the virtual MCU's: only ``motor ...``)

    def motor(self, timeout: float) -> str | None:
        """The motor line's next change (forward, reverse or off), or None."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                return None
            if line.startswith("motor "):
                return line.split()[1]


@pytest.fixture(params=["virtual-mcu", "simavr"])
def machine(request) -> Iterator[Callable[..., Machine]]:
    """A microcontroller with 24 cards of which the third never feeds, its motor watched
    (the virtual MCU's silence rule is 3 s unless ``silence``: the firmware's is 0.5 s)."""
    closing: list[Callable[[], object]] = []

    def make(silence: float = 3.0) -> Machine:
        if request.param == "simavr":
            if MISSING is not None:
                pytest.skip(MISSING)
            chip = SimAvr("--cards=24", "--card-rate=50", "--spinup=0.01", "--flap-travel=0.01",
                          "--frame-scale=0.1", f"--fault={STOP_FAULT}")
            closing.append(chip.close)
            return Machine(chip.path, chip.lines)
        sim = WatchedSim.for_cards(24, faults=parse_fault_specs((STOP_FAULT,)),
                                   spec=MechanismSpec(card_rate=50, spinup=0.01),
                                   rng=random.Random(1), clock=ScaledClock(1))
        mcu = VirtualMCU(sim, seed=1, silence=silence)
        sim.heard = lambda: mcu.last_heard
        closing.append(mcu.close)
        return Machine(mcu.path, sim.lines)

    yield make
    for close in closing:
        close()


def reached(state: str, seen: list[str], host: RawHost) -> bool:
    """Whether the pass is in ``state`` now, by the motor's changes since the PASS."""
    counted = max((m.counted for _, m in host.got if isinstance(m, Card)), default=0)
    if state == "ramp":
        return seen[-1:] == ["forward"]
    if state == "feed":
        return counted >= 2  # the first two cards dealt: it waits for the third
    if state == "brake":
        return seen[-2:] == ["forward", "off"]  # the misfeed: the motor off, not reversed
    if state == "reverse":
        return seen[-1:] == ["reverse"]
    return "reverse" in seen and seen[-1:] == ["forward"]  # a retry's ramp


def start_until(state: str, chip: Machine, host: RawHost) -> list[str]:
    """A session, then pass PASS_ID until it is in ``state``: the motor's changes on the way
    (the host's port then reads only what has come, so it reacts within milliseconds)."""
    host.open_session(STOP_LIMITS)
    while chip.motor(0.05) is not None:
        pass
    host.send(Pass(PASS_ID, 24, tuple(coin_plan(24, random.Random(7)).labels)))
    host.port.timeout = 0
    seen: list[str] = []
    deadline = time.monotonic() + 10
    while not reached(state, seen, host):
        assert time.monotonic() < deadline, (state, seen)
        host.turn()
        if (line := chip.motor(0.005)) is not None:
            seen.append(line)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("named", sorted(STOP_IDS))
@pytest.mark.parametrize("state", STATES)
def test_a_stop_of_any_id_in_any_state_ends_the_pass_and_the_motor_stays_off(
        machine, state, named):
    """The STOP's ACK is the host's proof: from it on, the motor line never rises again
    without a new PASS (firmware/main.c and the virtual MCU: pass_stop). The pass ends
    STOPPED, whichever id the STOP carried."""
    for _attempt in range(3):  # the brake lasts 20 ms: a busy machine may reverse first
        chip = machine()
        host = RawHost(chip.path)
        try:
            seen = start_until(state, chip, host)
            stop = host.send(Stop(STOP_IDS[named]))
            host.port.timeout = 0.02
            assert host.pump(5.0, lambda h=host, s=stop: h.acked(s)), "no ACK for the STOP"
            host.pump(0.1)  # the motor lines of before the ACK arrive
            before: list[str] = []
            while (line := chip.motor(0)) is not None:
                before.append(line)
            if state == "brake" and "reverse" in before:
                continue  # the STOP came after the brake: try again
            assert (seen + before)[-1] == "off", (state, named, seen, before)
            host.pump(WATCH_S)
            after = []
            while (line := chip.motor(0)) is not None:
                after.append(line)
            assert after == [], (state, named, seen, before, after)
            done = [d for d in host.done() if d.pass_id == PASS_ID]
            assert [d.fault for d in done] == [FaultCode.STOPPED], done
            return
        finally:
            host.port.close()
    pytest.fail("three times the STOP came after the brake's 20 ms")


# -- no re-drive into a host's silence --------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("state", ["feed", "brake", "reverse"])
def test_no_retry_drives_the_motor_once_the_host_is_silent_past_the_heartbeat_rule(
        machine, state):
    """The host falls silent while the pass waits for a card, brakes or reverses for it:
    the retry's reverse or ramp that would come more than REDRIVE_QUIET_MS into the
    silence never starts (docs/protocol.md, the silence rule); the motor stays off until
    the silence rule ends the pass LINK_LOST."""
    chip = machine(silence=SILENCE_MS / 1000)
    host = RawHost(chip.path)
    try:
        seen = start_until(state, chip, host)
        rises = []  # every time the motor started, and how long the host had been silent
        end = time.monotonic() + (SILENCE_MS + 700) / 1000  # the host says nothing
        while (left := end - time.monotonic()) > 0:
            try:
                line = chip.lines.get(timeout=left)
            except queue.Empty:
                break
            if line.startswith(("motor forward", "motor reverse")):
                f = dict(item.split("=") for item in line.split()[2:])
                rises.append((line.split()[1], float(f["t"]) - float(f["last_rx"])))
        late = [(way, ms) for way, ms in rises if ms > REDRIVE_QUIET_MS]
        assert late == [], (state, seen, rises)
        host.port.timeout = 0.02
        assert host.pump(5.0, lambda: bool(host.done())), "no PASS_DONE"
        assert [(d.pass_id, d.fault) for d in host.done()] == [(PASS_ID, FaultCode.LINK_LOST)]
    finally:
        host.port.close()
