"""The dealer's panel between hands: shuffled until the next pass, ignored touches named."""

from __future__ import annotations

import pytest

from shuffler.control.panel import SHUFFLED_PROMPT, Panel
from shuffler.core.mechanics import Pile
from shuffler.device.contract import Signal, Status
from shuffler.schemas import validate

HAND = {"number": 1, "dealer": "North", "passes_done": 5, "passes": 5, "completed": True,
        "tracking": True, "distance": 0.0, "fault": None}


def test_a_finished_hand_says_shuffled_deal_until_the_next_pass_starts():
    board = Panel(5)
    board.event({"event": "pass_start", "number": 5, "of": 5})
    board.event({"event": "card", "counted": 24, "expected": 24})
    board.signal(Status(Signal.STACK, on_top=Pile.LEFT, next_pass=None, of=5))
    board.hand_done(HAND)
    board.signal(Status(Signal.READY, next_pass=1, of=5))  # the LED goes green: still dealt
    board.status({"battery": None, "dealer": "East", "last_hand": HAND})
    _, data = board.snapshot()
    validate(data, "panel")
    assert (data["phase"], data["prompt"]) == ("shuffled", SHUFFLED_PROMPT)
    assert SHUFFLED_PROMPT == "Shuffled: deal"
    assert data["pass"]["expected"] is None and data["pass"]["number"] == 1  # no "24 of 24"
    board.event({"event": "pass_start", "number": 1, "of": 5})
    assert board.snapshot()[1]["phase"] == "dealing"


def test_a_hand_stopped_by_a_fault_is_not_shuffled():
    board = Panel(5)
    board.hand_done({**HAND, "completed": False, "passes_done": 2, "fault": "jam"})
    assert board.snapshot()[1]["phase"] == "ready"


def test_an_ignored_touch_is_named_and_counted_until_a_pass_starts():
    board = Panel(5)
    board.event({"event": "touch_ignored", "why": "touch ignored: the tray is empty"})
    board.event({"event": "touch_ignored", "why": "touch ignored: the tray is empty"})
    _, data = board.snapshot()
    validate(data, "panel")
    assert data["notice"] == "touch ignored: the tray is empty" and data["ignored"] == 2
    board.event({"event": "pass_start", "number": 1, "of": 5})
    assert board.snapshot()[1]["notice"] is None


def test_the_page_can_be_zoomed_and_has_its_heading():
    from importlib import resources

    page = resources.files("shuffler.faces").joinpath("page.html").read_text(encoding="utf-8")
    assert "maximum-scale" not in page and "user-scalable" not in page
    assert page.count("<h1>") == 1 and 'aria-label="Cards dealt this pass"' in page


@pytest.mark.parametrize("then, ok", [
    ({"event": "pass_start", "number": 1, "of": 5}, True),
    ({"event": "touch_ignored", "why": "touch ignored: the tray is empty"}, False),
    (None, False),  # nothing happened: never a false ok
])
def test_start_pass_answers_ok_only_once_a_pass_has_started(then, ok):
    import queue
    import threading
    from types import SimpleNamespace

    from shuffler.faces.router import Faces

    board, touches = Panel(5), queue.Queue()
    faces = SimpleNamespace(board=board, service=SimpleNamespace(
        session=SimpleNamespace(device=SimpleNamespace(events=touches))))

    def machine():  # the deciding loop takes the touch and does what it does
        touches.get(timeout=5)
        if then:
            board.event(then)

    threading.Thread(target=machine, daemon=True).start()
    reply = Faces.touch(faces, answer_within=1.0)  # type: ignore[arg-type]
    assert reply["ok"] is ok, reply
    if not ok:
        assert reply["error"]["kind"] == "touch_ignored"
        assert reply["error"]["message"].startswith(
            "touch ignored: the tray is empty" if then else "the touch started no pass")
