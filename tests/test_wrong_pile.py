"""The light the dealer follows: the other pile lifted first is warned of at once, and
the next pass (after the last pass: the hand's end) waits for the stack the light asks
for; no stack off the light is ever kept (issue 47)."""

from __future__ import annotations

import json
import random

import pytest

from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.events import StackAsked, TouchIgnored
from shuffler.control.hand import HandRunner, Lifts, stack_event
from shuffler.control.prompts import wrong_pile_prompt
from shuffler.control.touch import (
    BEFORE_FAULT,
    KEEP_REFUSED,
    NOT_STACKED,
    NOTHING_TO_CLEAR,
    NOTHING_TO_KEEP,
    RESTACKING,
    WRONG_PILE,
    Clear,
    Machine,
    Start,
    TouchPolicy,
)
from shuffler.core.mechanics import Pile, Stacked
from shuffler.core.planning import PlannedPlanner
from shuffler.device.contract import EventKind, InputEvent, Signal, Status
from shuffler.faces.panel import Panel
from shuffler.store.state import StateStore

ASK = Status(Signal.STACK, Pile.LEFT, 2, 5)


def lift(pile: Pile, at: float) -> InputEvent:
    return InputEvent(EventKind.PILE_LIFTED, at, pile)


# -- the touch policy --------------------------------------------------------------------

def policy() -> TouchPolicy:
    p = TouchPolicy()
    p.pass_ended(10.0)
    return p


def test_a_touch_while_the_warning_stands_is_refused_with_the_sentence():
    warned = Machine(restacking=True, warned=11.0)
    assert policy().decide(InputEvent(EventKind.TOUCH, 12.0), warned) is WRONG_PILE
    assert "the other pile first: put it back" in WRONG_PILE.why
    # inside the lock-out too, the warning is what the dealer must hear
    assert policy().decide(InputEvent(EventKind.TOUCH, 10.1), warned) is WRONG_PILE
    assert policy().decide(InputEvent(EventKind.TOUCH, 10.1),
                           Machine(restacking=True)) is RESTACKING
    assert policy().decide(InputEvent(EventKind.TOUCH, 12.0),
                           Machine(restacking=True)) == Start()


def test_a_long_press_at_the_warning_keeps_nothing_and_says_why():
    """No keep: a dealer who could keep a warned stack could choose, by the cards, which
    hands leave the exact label (issue 47)."""
    for at in (10.9, 11.0, 30.0):
        for machine in (Machine(restacking=True, warned=11.0),
                        Machine(tray_loaded=False, restacking=True, warned=11.0)):
            assert policy().decide(InputEvent(EventKind.LONG_PRESS, at), machine) is KEEP_REFUSED
    assert "cannot be kept" in KEEP_REFUSED.why


def test_a_touch_before_the_sensors_saw_the_stack_is_refused():
    """Between passes the next pass waits for both piles lifted, the light's first: a stack
    the sensors did not see would be one the controller cannot vouch for."""
    unseen = Machine(restacking=True, stacked=False)
    assert policy().decide(InputEvent(EventKind.TOUCH, 12.0), unseen) is NOT_STACKED
    assert policy().decide(InputEvent(EventKind.TOUCH, 12.0), Machine(stacked=False)) == Start()


def test_a_long_press_with_no_warning_keeps_nothing_and_a_latched_fault_still_clears():
    press = InputEvent(EventKind.LONG_PRESS, 12.0)
    assert policy().decide(press, Machine(restacking=True)) is NOTHING_TO_KEEP
    assert policy().decide(press, Machine()) is NOTHING_TO_CLEAR
    assert policy().decide(press, Machine(latched=True, warned=11.0)) == Clear()
    early = InputEvent(EventKind.LONG_PRESS, 9.0)
    assert policy().decide(early, Machine(latched=True)) is BEFORE_FAULT


# -- the lifts against the light ---------------------------------------------------------

def test_the_wrong_first_lift_warns_and_a_restack_as_asked_corrects_it():
    lifts = Lifts(ASK, 0.15)
    assert lifts.lift(lift(Pile.RIGHT, 1.0)) == "warn"
    assert lifts.warned == 1.0 and lifts.light == Status(Signal.STACK, Pile.LEFT, 2, 5,
                                                         warn=True)
    assert lifts.lift(lift(Pile.LEFT, 2.0)) is None  # put back, the left one lifted
    assert lifts.lift(lift(Pile.RIGHT, 2.6)) == "right"  # then the pack
    assert lifts.warned is None and lifts.light == ASK and lifts.settled
    assert (lifts.stacking, lifts.stacked) == (Pile.LEFT, Stacked.CORRECTED)


def test_a_dealer_who_stacks_on_after_the_warning_has_no_stack_that_matches():
    lifts = Lifts(ASK, 0.15)
    assert lifts.lift(lift(Pile.RIGHT, 1.0)) == "warn"
    assert lifts.lift(lift(Pile.LEFT, 1.6)) is None  # the pack lifted: right on left
    assert lifts.warned == 1.0 and not lifts.settled
    assert (lifts.stacking, lifts.stacked) == (Pile.RIGHT, Stacked.IGNORED)


def test_one_pile_lifted_is_no_stack():
    lifts = Lifts(ASK, 0.15)
    assert lifts.lift(lift(Pile.LEFT, 1.0)) is None
    assert not lifts.settled and lifts.stacking is None


def test_both_piles_at_once_are_warned_of_at_the_second_lift():
    lifts = Lifts(ASK, 0.15)
    assert lifts.lift(lift(Pile.LEFT, 1.0)) is None  # the pile asked for: so far so good
    assert lifts.lift(lift(Pile.RIGHT, 1.05)) == "warn"  # within the window: cannot tell
    assert lifts.warned == 1.05 and lifts.stacked is Stacked.UNKNOWN
    assert lifts.lift(lift(Pile.LEFT, 2.0)) is None
    assert lifts.lift(lift(Pile.RIGHT, 2.6)) == "right"
    assert lifts.stacked is Stacked.CORRECTED


def test_the_first_lift_as_the_light_asks_follows_and_never_warns():
    lifts = Lifts(ASK, 0.15)
    assert lifts.lift(lift(Pile.LEFT, 1.0)) is None
    assert lifts.lift(lift(Pile.RIGHT, 1.6)) is None
    assert lifts.stacked is Stacked.FOLLOWED and not lifts.ever_warned


# -- what the dealer is told ----------------------------------------------------------

def test_the_page_and_the_prompt_say_the_other_pile_first():
    warn = Status(Signal.STACK, Pile.LEFT, 2, 5, warn=True)
    event = stack_event(warn)
    assert event.warning is True and event.prompt == wrong_pile_prompt(Pile.LEFT)
    assert event.prompt.startswith("The other pile first: put it back")
    assert "warning" not in stack_event(ASK).to_json()
    panel = Panel(5)
    panel.signal(warn)
    data = panel.snapshot()[1]
    assert (data["phase"], data["prompt"]) == ("wrong_pile", wrong_pile_prompt(Pile.LEFT))
    panel.signal(ASK)  # the stack matches the light again
    assert panel.snapshot()[1]["phase"] == "stack"


# -- a hand on the simulators ------------------------------------------------------------

def hand_on(sim, tmp_path, habit: str, passes: int = 5, device=None):
    dev = device or sim.make(24, (), habit)
    events: list[tuple[str, StackAsked | str]] = []

    def heard(e):
        if isinstance(e, StackAsked):
            events.append(("stack", e))
        elif isinstance(e, TouchIgnored):
            events.append(("ignored", e.why))

    runner = HandRunner(PassController(dev, StateStore(tmp_path)),
                        PlannedPlanner(passes, random.Random(5)), Config())
    hand = runner.run(passes, 24, heard)
    return hand, events, dev


HABITS = ["other", "both", "follows-but-last", "taller", "last-card", "first-card"]


@pytest.mark.parametrize("habit", HABITS)
def test_a_dealer_of_any_habit_who_listens_gets_the_plan_exactly(sim, tmp_path, habit):
    hand, events, _ = hand_on(sim, tmp_path, habit)
    stacked = [Stacked(r.stacked) for r in hand.pass_reports]
    assert hand.completed and hand.departures == () and hand.distance == 0
    assert hand.distance_exact and hand.tracking
    assert set(stacked) <= {Stacked.FOLLOWED, Stacked.CORRECTED}
    warnings = [st for kind, st in events if kind == "stack" and st.warning]
    assert len(warnings) == stacked.count(Stacked.CORRECTED)
    assert not [e for e in events if e[0] == "ignored"]  # the dealer waited for the light
    if habit == "other":
        assert stacked == [Stacked.CORRECTED] * 5
        assert [r.stacked for r in hand.pass_reports] == ["corrected"] * 5


def test_a_dealer_who_ignores_the_warning_is_refused_until_it_corrects(sim, tmp_path):
    """Touched and held to keep its stack, every stack refused, the last one included:
    the dealer corrects in the end, and the hand is the plan's."""
    hand, events, _ = hand_on(sim, tmp_path, "other:ignores")
    assert [Stacked(r.stacked) for r in hand.pass_reports] == [Stacked.CORRECTED] * 5
    assert hand.completed and hand.departures == () and hand.distance_exact
    refused = [why for kind, why in events if kind == "ignored"]
    assert refused == [WRONG_PILE.why, KEEP_REFUSED.why] * 5
    report = hand.to_json()
    assert [r["stacked"] for r in report["pass_reports"]] == ["corrected"] * 5
    assert report["distance_note"] is None


@pytest.fixture(params=["gpio", "serial"])
def backend(request):
    """The GpioDevice on its rig and the SerialDevice on the virtual MCU: their pile
    sensors, and their simulated dealers reading the light."""
    from .conftest import BACKENDS

    h = BACKENDS[request.param]()
    h._open = []
    yield h
    h.close()


@pytest.mark.parametrize("habit", ["other", "both"])
def test_on_the_gpio_rig_and_the_serial_link_a_listening_dealer_is_corrected(
        backend, tmp_path, habit):
    hand, events, _ = hand_on(backend, tmp_path, habit, passes=3)
    assert hand.completed and hand.departures == () and hand.distance_exact
    assert [Stacked(r.stacked) for r in hand.pass_reports] == [Stacked.CORRECTED] * 3
    assert [bool(st.warning) for kind, st in events if kind == "stack"] == [
        False, True, False] * 3


def test_on_the_gpio_rig_a_deaf_dealer_is_refused_its_keep_and_corrects(tmp_path):
    from .conftest import GpioHarness

    rig = GpioHarness()
    rig._open = []
    try:
        hand, events, _ = hand_on(rig, tmp_path, "other:ignores", passes=3)
    finally:
        rig.close()
    assert [Stacked(r.stacked) for r in hand.pass_reports] == [Stacked.CORRECTED] * 3
    assert hand.completed and hand.departures == () and hand.distance_exact
    assert [why for kind, why in events if kind == "ignored"] == [KEEP_REFUSED.why] * 3


def test_a_deaf_dealer_on_the_firmware_harness_is_refused_naming_why(run):
    result = run("--device", "sim-avr", "--sim-dealer", "other", "--sim-ignores", "hand")
    assert result.exit_code == 2 and "always puts the pile back" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_deaf_dealer_over_a_serial_link_is_made_to_stack_as_the_light_asks(run):
    """The virtual MCU's dealer holds the sensor at each warning: the chip sends no long
    press (it sent its touch at the press), every stack is refused until it matches the
    light, the last one too, and the hand ends exact."""
    result = run("--device", "sim-serial", "--sim-dealer", "other", "--sim-ignores",
                 "--json", "hand", "--passes", "2")
    assert result.exit_code == 0, result.stderr
    hand = json.loads(result.stdout)["hand"]
    assert hand["completed"] and hand["distance_exact"], hand
    assert [p["stacked"] for p in hand["pass_reports"]] == ["corrected"] * 2, hand
