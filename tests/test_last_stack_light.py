"""The light at the last stack, on every backend (issue 47): after a hand's last pass the
LED asks for the pile to lift first, as between passes, and turns READY only once the
sensors have seen the stack match it. The dealer follows the light: a green light there
would send them to gather the cards as they fell, and the hand, which waits for that
stack, would wait in vain. The Nano's own firmware is checked in simavr
(tests/test_firmware_last_stack.py)."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace

import pytest

from firmware_bridge.device import signal_next_pass
from firmware_bridge.messages import NO_PASS
from hardware_sim import DealerHabit, SimDevice
from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
from shuffler.config import Config, GpioConfig, load_config_text
from shuffler.control.controller import PassController
from shuffler.control.events import StackAsked
from shuffler.control.hand import HandRunner
from shuffler.control.touch import Ignore
from shuffler.core.mechanics import Pile
from shuffler.core.planning import PlannedPlanner
from shuffler.device.clock import VirtualClock
from shuffler.device.contract import FaultLimits, Signal, Status
from shuffler.errors import DeviceTimeoutError
from shuffler.gpio.device import COLOURS
from shuffler.store.state import StateStore
from tests import test_serial
from tests.test_watchdog import run, serve

GREEN = COLOURS[(Signal.READY, None)][0]
#: the fixture: a virtual MCU on a simulated machine, and its host
machine = test_serial.machine


def one_pass_hand(device, tmp_path, seed: int = 5, config: Config | None = None):
    """A one-pass planned hand (its only stack is the last): the report and the light
    each stack asked for."""
    asked: list[StackAsked] = []
    runner = HandRunner(PassController(device, StateStore(tmp_path)),
                        PlannedPlanner(1, random.Random(seed)), config or Config())
    report = runner.run(1, 24, lambda e: isinstance(e, StackAsked) and asked.append(e))
    return report, asked


def test_on_the_gpio_rig_the_last_stack_lights_its_pile_then_green(tmp_path):
    rig = GpioRig.for_cards(24, card_rate=5.0, gpio=GpioConfig(),
                            habit=DealerHabit.INSTRUCTED, rng=random.Random(3))
    dev = RiggedGpioDevice(rig, limits=FaultLimits(retries=1))
    lit: list[tuple[Status, tuple[float, ...]]] = []
    show = dev.show

    def shown(status: Status) -> None:  # the LED's colour the moment each light is shown
        show(status)
        lit.append((status, tuple(round(c, 2) for c in rig.led())))

    dev.show = shown  # type: ignore[method-assign]
    try:
        report, asked = one_pass_hand(dev, tmp_path)
    finally:
        dev.close()
    assert report.completed and report.distance_exact
    (ask,) = asked
    assert ask.next_pass is None  # the last stack
    stacks = [colour for status, colour in lit if status.signal is Signal.STACK]
    # blue for the left pile, magenta for the right: the dealer's cue to lift it first
    assert stacks and stacks[0] == COLOURS[(Signal.STACK, Pile[ask.on_top.upper()])][0] != GREEN
    assert lit[-1] == (Status(Signal.READY), GREEN)  # once the stack was seen
    assert report.pass_reports[-1].stacking == ask.on_top


class Away(SimDevice):
    """A dealer who walks away after the last pass: no pile is ever lifted."""

    def _dealer_restacks(self, status: Status) -> None:
        pass


def test_a_touch_the_service_tells_at_a_waiting_last_stack_shows_its_pile_again(
        tmp_path, monkeypatch):
    """The hand timed out at its last stack (the dealer walked away): it waits there, and
    a touch told again shows that stack's pile with its beep, never READY."""
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    clock = VirtualClock()
    device = Away.for_cards(24, rng=random.Random(3), clock=clock)
    service = serve(tmp_path, device, clock)
    service.session.config = load_config_text("[hand]\ntouch_timeout_s = 5", "t.toml")
    answer = run(service, "hand", passes=1)
    assert not answer["ok"], answer  # the stack was never seen: the hand is not finished
    ask = device.shown[-1]
    assert ask.signal is Signal.STACK and ask.on_top is not None and ask.next_pass is None
    service._touch_ignored(Ignore("touch ignored: a test"))
    assert device.shown[-1] == replace(ask, told=True)


def on_a_chip(machine, protocol: tuple[int, int] | None = None, listens: bool = True):
    """A SerialDevice on a virtual MCU (tests/test_serial.py's ``machine``) on a simulated
    machine whose dealer listens to the warning or not: (device, the sim)."""
    mcu, dev = machine(seed=7, **({"protocol": protocol} if protocol else {}))
    mcu.sim.dealer.listens = listens
    return dev, mcu.sim


@pytest.mark.parametrize("minor", [3, 2], ids=["protocol-2.3", "a-2.2-firmware"])
def test_over_the_serial_link_the_chip_shows_the_last_stacks_pile(machine, tmp_path, minor):
    """The chip shows what SIGNAL says: the last stack's pile (a 2.2 chip, which shows
    READY for a STACK with no next pass, is sent NO_PASS there), then READY."""
    dev, sim = on_a_chip(machine, (2, minor))
    assert dev.link.peer_minor == minor
    report, (ask,) = one_pass_hand(dev, tmp_path)
    assert report.completed and report.distance_exact
    stacks = [s for s in sim.shown if s.signal is Signal.STACK]
    # the chip lit the pile, not READY
    assert stacks and stacks[0].on_top.name.lower() == ask.on_top
    deadline = time.monotonic() + 10  # READY crosses the link after the hand returned
    while sim.shown[-1].signal is not Signal.READY and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sim.shown[-1].signal is Signal.READY


def test_the_last_stacks_next_pass_on_the_wire():
    last = Status(Signal.STACK, Pile.RIGHT, None)
    assert signal_next_pass(last, 3) == 0  # 2.3: "no next pass" is the last stack
    assert signal_next_pass(last, 2) == NO_PASS  # 2.2 would show READY for a 0
    assert signal_next_pass(Status(Signal.STACK, Pile.LEFT, 2), 2) == 2
    assert signal_next_pass(Status(Signal.READY), 2) == 0


def test_a_long_press_is_never_an_input_on_the_wire(machine, tmp_path, monkeypatch):
    """The chip reports a touch at its press edge and no hold. A simulated dealer who
    holds the sensor at a warning (a long press, refused: no keep) must not break the
    virtual MCU: its INPUT table has no long press, and it raised KeyError in its thread,
    losing the inputs queued behind it."""
    raised: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    dev, sim = on_a_chip(machine, listens=False)  # goes on as it is until made to, holds
    sim.dealer.habit = DealerHabit.OTHER  # the other pile first, every time
    started = time.monotonic()
    report, asked = one_pass_hand(dev, tmp_path)
    assert not raised, raised
    assert asked[1].warning  # warned of the other pile, the dealer held the sensor: refused
    assert report.completed and report.distance_exact, report
    # made to, it stacked as asked
    assert report.pass_reports[-1].stacking == asked[0].on_top
    assert time.monotonic() - started < 60


def test_a_hand_waits_at_its_last_stack_for_the_dealer(tmp_path):
    """No lift after the last pass: the hand is not finished, and says what it waits for."""
    device = Away.for_cards(24, rng=random.Random(3), clock=VirtualClock())
    with pytest.raises(DeviceTimeoutError, match="stack the light asks for"):
        one_pass_hand(device, tmp_path,
                      config=load_config_text("[hand]\ntouch_timeout_s = 5", "t.toml"))
    assert device.shown[-1].signal is Signal.STACK
