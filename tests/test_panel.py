"""The dealer's panel between hands: shuffled until the next pass, ignored touches named."""

from __future__ import annotations

import pytest

from shuffler.core.mechanics import Pile
from shuffler.device.contract import Signal, Status
from shuffler.faces.panel import SHUFFLED_PROMPT, Panel
from shuffler.schemas import validate

HAND = {"number": 1, "dealer": "North", "passes_done": 5, "passes": 5, "completed": True,
        "tracking": True, "distance": 0.0, "fault": None}


def test_a_finished_hand_says_shuffled_deal_until_the_next_pass_starts():
    board = Panel(5)
    board.pass_started(5, 5)
    board.counted(24, 24)
    board.signal(Status(Signal.STACK, on_top=Pile.LEFT, next_pass=None, of=5))
    board.hand_done(HAND)
    board.signal(Status(Signal.READY, next_pass=1, of=5))  # the LED goes green: still dealt
    board.status({"battery": None, "dealer": "East", "last_hand": HAND})
    _, data = board.snapshot()
    validate(data, "panel")
    assert (data["phase"], data["prompt"]) == ("shuffled", SHUFFLED_PROMPT)
    assert SHUFFLED_PROMPT == "Shuffled: deal"
    assert data["pass"]["expected"] is None and data["pass"]["number"] == 1  # no "24 of 24"
    board.pass_started(1, 5)
    assert board.snapshot()[1]["phase"] == "dealing"


def test_a_hand_stopped_by_a_fault_is_not_shuffled():
    board = Panel(5)
    board.hand_done({**HAND, "completed": False, "passes_done": 2, "fault": "jam"})
    assert board.snapshot()[1]["phase"] == "ready"


def test_an_ignored_touch_is_named_and_counted_until_a_pass_starts():
    board = Panel(5)
    board.touch_ignored("touch ignored: the tray is empty")
    board.touch_ignored("touch ignored: the tray is empty")
    _, data = board.snapshot()
    validate(data, "panel")
    assert data["notice"] == "touch ignored: the tray is empty" and data["ignored"] == 2
    board.pass_started(1, 5)
    assert board.snapshot()[1]["notice"] is None


def test_the_page_can_be_zoomed_and_has_its_heading():
    from importlib import resources

    page = resources.files("shuffler.faces").joinpath("page.html").read_text(encoding="utf-8")
    assert "maximum-scale" not in page and "user-scalable" not in page
    assert page.count("<h1>") == 1 and 'aria-label="Cards dealt this pass"' in page


LOW = {"measured": True, "state": "low", "volts": 7.0, "percent": 8.0, "passes_left": 3,
       "hands_left": 0}


@pytest.mark.parametrize("battery, headline", [
    (LOW, "Battery low: about 3 passes left, 5 needed: change the 9 V battery"),
    ({**LOW, "state": "critical", "passes_left": 0},
     "Battery critical: change the 9 V battery, no pass can start"),
])
def test_the_headline_says_the_battery_refuses_before_the_touch(battery, headline):
    board = Panel(5)
    board.status({"battery": battery, "dealer": "North"})
    _, data = board.snapshot()
    assert (data["phase"], data["prompt"]) == ("low_battery", headline)
    board.signal(Status(Signal.READY, next_pass=1, of=5))  # the LED's READY: still refused
    assert board.snapshot()[1]["prompt"] == headline
    board.status({"battery": {**LOW, "state": "ok", "passes_left": 300}, "dealer": "North"})
    assert board.snapshot()[1]["prompt"] == "Load the pack and touch to start pass 1 of 5"


def test_a_low_battery_that_still_runs_the_hand_keeps_the_ready_headline():
    board = Panel(5)
    board.status({"battery": {**LOW, "passes_left": 12}, "dealer": "North"})
    assert board.snapshot()[1]["prompt"] == "Load the pack and touch to start pass 1 of 5"
    board.pass_started(4, 5)  # and a fault (since cleared) stopped the hand there
    pending = {"number": 1, "passes": 5, "passes_done": 3, "cards": 24, "mode": "planned"}
    board.status({"battery": {**LOW, "passes_left": 12}, "hand_in_progress": pending})
    board.signal(Status(Signal.READY))
    board.status({"battery": {**LOW, "passes_left": 2}, "dealer": "North",
                  "hand_in_progress": pending})
    assert board.snapshot()[1]["prompt"] == "Load the pack and touch to start pass 4 of 5"


def test_the_last_hand_is_a_hand_that_is_over():
    board = Panel(5)
    board.hand_done(HAND)
    stopped = {**HAND, "number": 2, "completed": False, "passes_done": 2,
               "fault": {"kind": "jam", "message": "Jam at card 13", "card": 13}}
    board.hand_done(stopped)
    board.status({"battery": None, "dealer": "East", "last_hand": stopped})
    assert board.snapshot()[1]["hand"]["number"] == 1


def test_after_a_lone_pass_the_headline_says_what_a_touch_starts():
    """A touch starts a hand (the configured passes) or goes on with the hand a fault
    left unfinished; the page said "touch to start pass 1 of 1" after a lone pass."""
    board = Panel(5)
    board.pass_started(1, 1)  # `shuffler pass`
    board.counted(24, 24)
    board.signal(Status(Signal.READY))
    board.status({"battery": None, "dealer": "North", "hand_in_progress": None})
    _, data = board.snapshot()
    validate(data, "panel")
    assert data["prompt"] == "Load the pack and touch to start pass 1 of 5"
    assert data["pass"] == {"number": 1, "of": 5, "counted": 0, "expected": None}
    board.pass_started(3, 5)  # a hand's third pass jams; the clear: ready again
    board.status({"battery": None, "fault": {"kind": "jam", "message": "Jam at card 4. Free"},
                  "hand_in_progress": {"number": 2, "passes": 5, "passes_done": 2,
                                       "cards": 24, "mode": "planned"}})
    board.status({"battery": None, "hand_in_progress": {
        "number": 2, "passes": 5, "passes_done": 2, "cards": 24, "mode": "planned"}})
    assert board.snapshot()[1]["prompt"] == "Load the pack and touch to start pass 3 of 5"
