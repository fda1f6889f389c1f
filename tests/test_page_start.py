"""The page's Start pass on ``--device sim`` after a cleared jam and after a finished hand,
at the simulator's speeds 1, 3 and 20, in a real browser (issue 33: the simulator's clock
stood still while the machine was idle, so the restack lock-out never ran out and every
tap said "the last pass has only just ended").

Fast runs of the same rule, with no browser: tests/test_touch_policy.py."""

from __future__ import annotations

import time

import pytest

from .browser import needs_axe, needs_browser, phone_browser
from .mqtt_broker import free_port
from .served import Service
from .test_page import attr, open_page, tap, text
from .waiting import wait_for

pytestmark = [pytest.mark.slow, needs_browser, needs_axe]

ANSWERS = """
window.answers = [];
const dealmsg = document.getElementById('dealmsg');
new MutationObserver(() => window.answers.push(dealmsg.textContent))
  .observe(dealmsg, {childList: true, characterData: true, subtree: true});
"""


def served(tmp_path, name: str, speed: float, faults=()):
    port = free_port()
    config = f"[web]\nenabled = true\nport = {port}\n\n[hand]\npasses = 2\n"
    return Service(tmp_path, config, speed=speed, faults=faults, name=name).start(), port


def start_pass(d, what: str, within: float = 60) -> None:
    """Tap Start pass; the page's answer is "Pass started." (never a refusal)."""
    d.execute_script(ANSWERS)
    tap(d, "deal")
    wait_for(lambda: d.execute_script("return window.answers").count("Pass started.") >= 1
             or "ignored" in text(d, "dealmsg") or "started no pass" in text(d, "dealmsg"),
             timeout=within, what=what)
    assert "Pass started." in d.execute_script("return window.answers"), text(d, "dealmsg")


@pytest.mark.parametrize("speed", [1, 3, 20])
def test_start_pass_works_after_a_cleared_jam(tmp_path, speed):
    svc, port = served(tmp_path, "jam", speed, faults=("jam:3",))
    try:
        with phone_browser() as d:
            open_page(d, f"http://127.0.0.1:{port}/")
            start_pass(d, "the first pass")
            wait_for(lambda: attr(d, "banner", "data-phase") == "fault", timeout=60,
                     what="the jam")
            tap(d, "clear")
            wait_for(lambda: attr(d, "banner", "data-phase") == "ready", what="the jam cleared")
            time.sleep(0.6)  # past the half-second lock-out (real time at speed 1)
            start_pass(d, "a pass after the cleared jam")
    finally:
        svc.stop()


@pytest.mark.parametrize("speed", [1, 3, 20])
def test_start_pass_works_after_a_finished_hand(tmp_path, speed):
    svc, port = served(tmp_path, "hand", speed)
    try:
        with phone_browser() as d:
            open_page(d, f"http://127.0.0.1:{port}/")
            start_pass(d, "the first hand")
            wait_for(lambda: text(d, "dealer") == "East", timeout=120,
                     what="the hand to finish and the deal to move on")
            wait_for(lambda: attr(d, "banner", "data-phase") != "dealing", what="idle")
            time.sleep(0.6)  # past the half-second lock-out (real time at speed 1)
            start_pass(d, "the next hand")
            wait_for(lambda: attr(d, "banner", "data-phase") == "dealing"
                     or text(d, "dealer") == "South", timeout=60, what="the next hand")
    finally:
        svc.stop()
