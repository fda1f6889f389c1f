"""In real time on sim-gpio (gpiozero's mock pins on the rig, its clock paced at real
speed): the test is the dealer, lifting piles and touching the sensor by hand. The other
pile lifted first is warned of (the light, the buzzer, the prompt and the page) within
100 ms; a touch is refused until the stack matches the light, and so is a long press (no
stack off the light is kept); after the last pass the hand does not end until the stack
matches the light."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable

import pytest

from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.session import Session
from shuffler.control.touch import KEEP_REFUSED, WRONG_PILE
from shuffler.core.mechanics import Pile
from shuffler.device.clock import EventClock
from shuffler.device.contract import Signal
from shuffler.faces.router import Faces
from shuffler.gpio.device import COLOURS, WARN_RED
from shuffler.service.loop import Service
from shuffler.store.state import StateStore

pytestmark = pytest.mark.slow  # seconds of real time

#: the promise: the warning within this many seconds of the lift
WITHIN = 0.1


class Hands(GpioRig):
    """The rig moves the cards; nobody reads the light: the test is the dealer."""

    def _watch_led(self) -> None:
        pass


def wait_for(what: Callable[[], object], timeout: float = 15.0, say=None) -> float:
    """Poll until ``what()`` holds; the wall-clock time it took."""
    start = time.monotonic()
    while not what():
        assert time.monotonic() - start < timeout, ("timed out", say and say())
        time.sleep(0.002)
    return time.monotonic() - start


class Table:
    def __init__(self, tmp_path) -> None:
        config = Config()
        config = dataclasses.replace(config, gpio=dataclasses.replace(config.gpio,
                                                                      long_press_s=0.6))
        self.clock = EventClock(speed=1.0)
        self.rig = Hands.for_cards(8, card_rate=20.0, rng=random.Random(1), clock=self.clock,
                                   gpio=config.gpio)
        self.device = RiggedGpioDevice(self.rig)
        session = Session(PassController(self.device, StateStore(tmp_path)), config,
                          random.Random(1))
        self.service = Service(session, tmp_path / "s.sock", faces=Faces)
        self.events: list[dict] = []
        self.result: dict = {}
        self.worker = threading.Thread(target=self._hand, daemon=True)

    def _hand(self) -> None:
        self.result.update(self.service.session.do_hand(
            self.service.session.terms(3, 8, "planned"),
            on_event=lambda e: self.events.append(e.to_json())).to_json())

    def stacks(self) -> list[dict]:
        return [e for e in self.events if e["event"] == "stack"]

    def asked_after(self, n: int) -> Pile:
        """Wait for the light that asks for the stack after pass ``n``; its pile."""
        def asked() -> list[dict]:
            starts = [i for i, e in enumerate(self.events) if e["event"] == "pass_start"]
            if len(starts) < n:
                return []
            return [e for e in self.events[starts[n - 1]:] if e["event"] == "stack"]

        wait_for(asked)
        time.sleep(0.05)  # the light follows the prompt
        return Pile.LEFT if asked()[0]["on_top"] == "left" else Pile.RIGHT

    def lift(self, pile: Pile) -> None:
        self.rig.set_sensor(f"pile_{pile.name.lower()}", False, bounce=False)

    def put_back(self, pile: Pile) -> None:
        self.rig.set_sensor(f"pile_{pile.name.lower()}", True, bounce=False)

    def stack_and_load(self, on_top: Pile) -> None:
        """``on_top`` on the other pile, the pack lifted and put in the tray."""
        self.rig.mechanism.restack(on_top)
        self.rig._sensors()

    def press(self, seconds: float) -> None:
        self.rig.set_sensor("touch", True, bounce=False)
        time.sleep(seconds)
        self.rig.set_sensor("touch", False, bounce=False)

    def warned(self) -> bool:
        return (tuple(round(c, 2) for c in self.rig.led()) == WARN_RED
                and bool(self.rig.pins["buzzer"].state)
                and bool(self.stacks()) and bool(self.stacks()[-1].get("warning"))
                and self.service.faces.board.snapshot()[1]["phase"] == "wrong_pile")

    def refused(self) -> list[str]:
        return [e["why"] for e in self.events if e["event"] == "touch_ignored"]


def test_the_wrong_pile_is_warned_of_at_once_and_the_touch_waits_for_the_right_stack(tmp_path):
    table = Table(tmp_path)
    rig, clock = table.rig, table.clock
    table.worker.start()
    try:
        # pass 1 done: lift the other pile first
        asked = table.asked_after(1)
        wrong = asked.other
        assert tuple(round(c, 2) for c in rig.led()) == COLOURS[(Signal.STACK, asked)][0]
        lifted_at = clock.now()
        table.lift(wrong)
        took = wait_for(table.warned, timeout=5.0)
        assert took < WITHIN, f"the warning came {took * 1000:.0f} ms after the lift"
        assert clock.now() - lifted_at < WITHIN  # on the machine's clock too
        assert table.service.faces.board.snapshot()[1]["prompt"].startswith(
            "The other pile first: put it back")
        # a touch now starts nothing, and says why
        table.press(0.05)
        wait_for(lambda: table.refused() == [WRONG_PILE.why], timeout=5.0)
        time.sleep(0.5)
        assert not rig.forward() and rig.pins["motor"].state == 0
        assert len([e for e in table.events if e["event"] == "pass_start"]) == 1
        # put it back, lift the pile the light shows, stack: the light steady again
        table.put_back(wrong)
        time.sleep(0.1)
        table.lift(asked)
        time.sleep(0.3)
        table.stack_and_load(asked)  # the pack lifted: the other pile's sensor uncovered
        wait_for(lambda: tuple(round(c, 2) for c in rig.led())
                 == COLOURS[(Signal.STACK, asked)][0] and not table.stacks()[-1].get("warning"))
        assert table.service.faces.board.snapshot()[1]["phase"] == "stack"
        table.press(0.05)
        wait_for(lambda: len([e for e in table.events if e["event"] == "pass_start"]) == 2)

        # pass 2 done: the other pile first again, and the dealer tries to keep it
        asked = table.asked_after(2)
        table.lift(asked.other)
        assert wait_for(table.warned, timeout=5.0) < WITHIN
        time.sleep(0.4)
        table.lift(asked)  # the pack lifted: the other pile on top
        time.sleep(0.3)
        table.press(0.05)
        wait_for(lambda: len(table.refused()) == 2, timeout=5.0)
        table.press(1.2)  # a long press (0.6 s) with room for a loaded host: keep it? refused
        wait_for(lambda: table.refused()[2:] == [KEEP_REFUSED.why], timeout=5.0,
                 say=table.refused)
        time.sleep(0.3)
        assert len([e for e in table.events if e["event"] == "pass_start"]) == 2
        for pile in Pile:  # put both back, and stack as the light asks
            table.put_back(pile)
        time.sleep(0.1)
        table.lift(asked)
        time.sleep(0.3)
        table.stack_and_load(asked)
        wait_for(lambda: not table.stacks()[-1].get("warning"))
        table.press(0.05)
        wait_for(lambda: len([e for e in table.events if e["event"] == "pass_start"]) == 3)

        # the last pass: the other pile first, and the hand waits for the right stack
        asked = table.asked_after(3)
        table.lift(asked.other)
        assert wait_for(table.warned, timeout=5.0) < WITHIN
        time.sleep(0.5)
        assert table.worker.is_alive() and "hand" not in table.result
        table.put_back(asked.other)
        time.sleep(0.1)
        table.lift(asked)
        time.sleep(0.3)
        table.stack_and_load(asked)
        table.worker.join(15)
        assert not table.worker.is_alive()
    finally:
        table.device.close()
    hand = table.result["hand"]
    assert hand["completed"]
    assert [p["stacked"] for p in hand["pass_reports"]] == ["corrected"] * 3
    assert hand["departures"] == [] and hand["distance_exact"]
