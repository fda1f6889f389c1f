"""The page's Start pass is answered by the touch policy's decision (issue 48):
``Service.touch()`` returns a future the deciding loop resolves when the policy decides,
and the page's answer is made from it, never from watching its panel. A real service
on the simulator; the test is its loop (``service.step``), the page a thread."""

from __future__ import annotations

import random
import threading
import time

import pytest

from hardware_sim import SimDevice, parse_fault_specs
from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.session import Session
from shuffler.control.touch import (
    HELD,
    PASS_RUNNING,
    RESTACK_LOCKOUT,
    RESTACKING,
    RUNNING_NOW,
    STOPPING,
    Start,
)
from shuffler.device.clock import ScaledClock
from shuffler.faces.router import Faces
from shuffler.service.events import PassStarted, TouchIgnored
from shuffler.service.loop import Service
from shuffler.store.state import StateStore

from .test_watchdog import run

SPEED = 200


@pytest.fixture
def table(tmp_path):
    device = SimDevice.for_cards(24, rng=random.Random(3), clock=ScaledClock(SPEED))
    session = Session(PassController(device, StateStore(tmp_path)), Config(),
                      random.Random(1))
    service = Service(session, tmp_path / "s.sock", faces=Faces)
    try:
        yield device, service
    finally:
        service.close()
        device.close()


def page_touch(service: Service, turns: int = 200) -> dict:
    """The page's Start pass from its own thread, the deciding loop turning here."""
    replies: list[dict] = []
    page = threading.Thread(target=lambda: replies.append(service.faces.touch()))
    page.start()
    for _ in range(turns):
        if not page.is_alive():
            break
        service.step(0.01)
    page.join(5)
    assert replies, "the page's touch was never answered"
    return replies[0]


def refused(ignore) -> dict:
    return {"ok": False, "error": {"kind": ignore.kind, "message": ignore.why, "exit": 3}}


def rested() -> None:
    time.sleep(RESTACK_LOCKOUT / SPEED + 0.05)  # past the lock-out, in device time


def test_a_touch_that_starts_a_pass_is_answered_started(table):
    _, service = table
    rested()
    assert page_touch(service) == {"ok": True, "result": {"touch": True, "started": True}}
    assert service.session.controller.store.load().passes > 0


def test_a_touch_with_a_jam_latched_is_refused_as_the_machine_refuses_it(table):
    device, service = table
    device.mechanism.faults = parse_fault_specs(["jam:3"])
    assert run(service, "pass")["result"]["pass"]["fault"]["kind"] == "jam"
    rested()
    reply = page_touch(service)
    assert not reply["ok"] and reply["error"]["kind"] == "fault_latched", reply
    assert service.session.controller.store.load().passes == 1  # nothing moved


def test_a_touch_while_a_pass_runs_is_answered_at_once(table):
    _, service = table
    answers = []
    service.subscribe(lambda e: answers.append(service.touch()) if isinstance(
        e, PassStarted) else None)
    rested()
    run(service, "pass")
    assert answers and all(a.done() and a.result() == RUNNING_NOW for a in answers)


def test_two_faces_touching_at_once_are_both_answered_one_pass_starts(table):
    """The second was pressed before the first's pass ended: the policy's restacking."""
    _, service = table
    rested()
    first, second = service.touch(), service.touch()  # both queued before the loop turns
    for _ in range(100):
        if first.done() and second.done():
            break
        service.step(0.01)
    assert [first.result(0), second.result(0)] == [Start(), RESTACKING]  # pressed in it
    assert service.session.controller.store.load().passes > 0


def test_a_touch_while_a_client_holds_the_machine_waits_then_starts(table):
    _, service = table
    rested()
    service.claim.acquire()
    answer = service.touch()
    for _ in range(5):
        service.step(0.01)
    assert not answer.done()  # the policy said wait: the answer waits too
    service.claim.release()
    for _ in range(100):
        if answer.done():
            break
        service.step(0.01)
    assert answer.result(0) == Start()


def test_a_touch_held_past_the_wait_is_told_why(table, monkeypatch):
    _, service = table
    rested()
    service.claim.acquire()
    answer = service.touch()
    service.step(0.01)
    now = service.clock.now()
    monkeypatch.setattr(service.clock, "now", lambda: now + 6.0)  # past TOUCH_WAIT_S
    service.step(0.01)
    assert answer.result(0) == HELD
    service.claim.release()


def test_the_service_stopping_answers_a_pending_touch_never_leaves_it_hanging(table):
    _, service = table
    queued = service.touch()  # the loop never turns
    service.claim.acquire()
    waiting = service.touch()
    service.step(0.01)  # decided: wait (a client holds the machine)
    assert not queued.done() or queued.result(0) is not None
    service.close()
    assert waiting.result(1) == STOPPING
    assert service.touch().result(0) == STOPPING  # after it stopped: at once


def test_a_touch_between_a_hands_passes_is_answered_by_the_hands_decision(table):
    """Between passes the hand decides the page's touch as the sensor's: its answer is
    the next pass started, or the refusal the hand told (never left waiting)."""
    _, service = table
    answers, told = [], []
    service.subscribe(lambda e: told.append(e.why) if isinstance(e, TouchIgnored) else None)

    asked = []

    def watch(msg):  # (seen before the loop takes it: the touch comes one message later)
        if asked and asked.pop() == "stack":  # the light asks for the stack: a touch
            answers.append(service.touch())
        asked.append(msg.get("event"))

    rested()
    assert run(service, "hand", watch=watch)["ok"]
    assert answers and all(a.done() for a in answers)
    for answer in answers:
        decision = answer.result(0)
        assert decision == Start() or decision.why in told or decision == PASS_RUNNING
    assert Start() in [a.result(0) for a in answers]
