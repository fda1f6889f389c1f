"""The Nano's light at the last stack (issue 47, protocol 2.3), on the firmware's own ELF
in simavr: after the hand's last pass the LED asks for the pile to lift first (blue for
the left, magenta for the right), as between passes, and stays so while the dealer
stacks; READY comes when the host says so, once its sensors saw the stack match. A 2.2
firmware, built from the commit before 2.3, showed READY there; the host sends it the
last stack's ``next_pass`` as 255, and it lights the pile too."""

from __future__ import annotations

import random
import time

import pytest

from firmware_bridge.link import LinkLostError
from firmware_bridge.messages import PileCode, SignalCode, SignalMsg
from hardware_sim.sim_avr import SimAvr, serial_on
from shuffler.core.mechanics import Pile
from shuffler.core.planning import coin_plan
from shuffler.device.contract import EventKind, Signal, Status
from tests import test_firmware
from tests.old_firmware import firmware_before

pytestmark = test_firmware.pytestmark  # slow; skipped without the AVR packages

FAST = ("--cards=24", "--card-rate=50", "--spinup=0.01", "--flap-travel=0.01",
        "--frame-scale=0.1")
#: the LED's pins, red green blue, as the harness's state line gives them
LED = {Pile.LEFT: "001", Pile.RIGHT: "101"}
GREEN = "010"


def led_becomes(chip: SimAvr, want: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while (led := chip.state()["led"]) != want and time.monotonic() < deadline:
        time.sleep(0.02)
    return led


def lifts(dev, timeout: float = 10.0) -> list[Pile | None]:
    """The piles the chip saw lifted, in order, until both were (or the time is up)."""
    seen: list[Pile | None] = []
    deadline = time.monotonic() + timeout
    while len(seen) < 2 and (left := deadline - time.monotonic()) > 0:
        ev = dev.wait_event(left)
        if ev is not None and ev.kind is EventKind.PILE_LIFTED:
            seen.append(ev.pile)
    return seen


@pytest.fixture(scope="module")
def elf_2_2(tmp_path_factory):
    """The 2.2 firmware, built from the commit before protocol 2.3."""
    return firmware_before("shown as its pile since 2.3",
                           tmp_path_factory.mktemp("firmware-2.2"))


def last_stack(chip: SimAvr, pile: Pile) -> None:
    """A pass, then the hand's last stack asked for: the LED lights ``pile`` and the
    harness's dealer, who follows it, lifts that pile first; the LED stays until the host
    shows READY."""
    dev = serial_on(chip)
    try:
        report = dev.run_pass(coin_plan(24, random.Random(4)))
        assert report.fault is None and report.counted == 24
        dev.show(Status(Signal.STACK, pile, None, 1))  # no next pass: the last stack
        assert led_becomes(chip, LED[pile]) == LED[pile]
        assert lifts(dev) == [pile, pile.other]
        assert chip.state()["led"] == LED[pile]  # the chip does not end the hand itself
        dev.show(Status(Signal.READY))
        assert led_becomes(chip, GREEN) == GREEN
    finally:
        dev.close()


@pytest.mark.parametrize("pile", list(Pile), ids=lambda p: p.name.lower())
def test_after_the_last_pass_the_nano_lights_the_pile_then_ready(pile):
    last_stack(SimAvr(*FAST), pile)


def test_a_2_2_firmware_lights_the_last_stacks_pile_for_this_host(elf_2_2):
    chip = SimAvr(*FAST, elf=elf_2_2)
    dev = serial_on(chip)
    assert dev.link.peer_minor == 2
    dev.close()
    last_stack(SimAvr(*FAST, elf=elf_2_2), Pile.RIGHT)


@pytest.mark.parametrize(("new", "shown"), [(True, LED[Pile.RIGHT]), (False, GREEN)],
                         ids=["2.3", "2.2"])
def test_a_stack_with_no_next_pass_on_the_wire(elf_2_2, new, shown):
    """The SIGNAL itself: STACK RIGHT with next_pass 0 is magenta on 2.3, READY on 2.2
    (why the host sends a 2.2 chip 255 there)."""
    chip = SimAvr(*FAST, **({} if new else {"elf": elf_2_2}))
    dev = serial_on(chip)
    try:
        try:
            dev.link.request(SignalMsg(SignalCode.STACK, PileCode.RIGHT, 0))
        except LinkLostError:
            pytest.fail("the chip dropped the link")
        assert led_becomes(chip, shown) == shown
    finally:
        dev.close()
