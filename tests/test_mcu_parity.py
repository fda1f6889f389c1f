"""The virtual MCU behaves as the firmware where issue 23 found them apart: a CLEAR with
a jammed card still in the beam is refused (firmware/main.c: ``!beam_blocked()``), and the
reply queue has the firmware's bound (firmware/link.c: six slots, PASS_DONE in a slot of
its own, a request that finds no room left unacknowledged so the host repeats it). The
queue case runs the same raw host against both: the virtual MCU and the firmware in
simavr."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import pytest

from firmware_bridge.device import SerialDevice
from firmware_bridge.messages import Ack, FaultCode, Pass, StatusAsk, StatusReply
from hardware_sim import SimDevice, parse_fault_specs
from hardware_sim.virtual_mcu import QUEUE_SLOTS, VirtualMCU
from shuffler.core.planning import coin_plan
from shuffler.device.clock import ScaledClock
from shuffler.device.contract import FaultKind

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
