"""An evening at the table with only the phone page: a real browser, a real service."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from .browser import needs_browser, phone_browser
from .mqtt_broker import free_port
from .served import Service

#: set to a folder (docs/img) to keep the screenshots for docs/guide.md
SHOTS = os.environ.get("SHUFFLER_SCREENSHOTS")

WATCH = """
window.seen = []; window.progress = [];
const prompt = document.getElementById('prompt');
const bar = document.getElementById('progress');
new MutationObserver(() => {
  const t = prompt.textContent;
  if (window.seen[window.seen.length - 1] !== t) window.seen.push(t);
}).observe(prompt, {childList: true, characterData: true, subtree: true});
new MutationObserver(() => window.progress.push(Number(bar.getAttribute('aria-valuenow'))))
  .observe(bar, {attributes: true, attributeFilter: ['aria-valuenow']});
"""


def wait_for(check, timeout=30.0, what="the page"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def text(driver, element_id):
    """What the element says (its text, not the capitals a style may show)."""
    return driver.find_element("id", element_id).get_attribute("textContent").strip()


def shot(driver, name):
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"page-{name}.png"))


def page_service(tmp_path, name, faults=()):
    port = free_port()
    config = f"[web]\nenabled = true\nport = {port}\n\n[hand]\npasses = 5\n"
    return Service(tmp_path, config, speed=3.0, faults=faults, name=name).start(), port


@needs_browser
def test_a_hand_and_a_game_played_from_the_phone(tmp_path):
    svc, port = page_service(tmp_path, "table")
    try:
        with phone_browser() as d:
            d.get(f"http://127.0.0.1:{port}/")
            wait_for(lambda: text(d, "prompt").startswith("Load the pack"), what="ready")
            assert text(d, "prompt") == "Load the pack and touch to start pass 1 of 5"
            assert text(d, "dealer") == "North" and text(d, "next") == "East"
            d.execute_script(WATCH)
            shot(d, "ready")
            d.find_element("id", "deal").click()
            seen_dealing = seen_stack = False
            deadline = time.monotonic() + 60
            while not d.find_element("id", "handbox").is_displayed():
                assert time.monotonic() < deadline, d.execute_script("return window.seen")
                phase = d.find_element("id", "banner").get_attribute("data-phase")
                if phase == "dealing" and not seen_dealing and \
                        d.execute_script("return window.progress.length") > 5:
                    shot(d, "dealing")
                    seen_dealing = True
                if phase == "stack" and not seen_stack:
                    shot(d, "stack")
                    seen_stack = True
                time.sleep(0.03)
            seen = d.execute_script("return window.seen")
            for n in range(1, 6):
                assert f"Dealing pass {n} of 5" in seen, seen
            stacks = [s for s in seen if s.endswith("pile on top, then touch")]
            assert len(stacks) == 4, seen
            assert all(s in ("Put the LEFT pile on top, then touch",
                             "Put the RIGHT pile on top, then touch") for s in stacks)
            assert any(s.endswith("pile on top: the pack is shuffled, deal") for s in seen)
            progress = d.execute_script("return window.progress")
            assert max(progress) == 24 and len(set(progress)) > 10  # the bar moved
            assert "Hand 1: 5 of 5 passes done" in text(d, "hand")
            assert "tracking kept" in text(d, "hand")
            wait_for(lambda: text(d, "dealer") == "East", what="the deal to move on")
            shot(d, "hand-done")

            # the score: two taps a hand, to 10
            def score(team, outcome):
                d.find_element("id", f"m{team}").click()
                d.find_element("css selector",
                               f"#outcomes button:nth-child({outcome})").click()

            score(0, 4)  # all five alone: 4
            wait_for(lambda: text(d, "s0") == "4", what="4 points")
            score(0, 4)
            wait_for(lambda: text(d, "s0") == "8", what="8 points")
            score(1, 1)  # East & West euchred: 2 to North & South
            wait_for(lambda: text(d, "s0") == "10", what="10 points")
            assert text(d, "winner") == "North & South win!"
            shot(d, "game-won")
            d.find_element("id", "undo").click()
            wait_for(lambda: text(d, "s0") == "8", what="undo")
            score(0, 2)  # three or four tricks: 1
            wait_for(lambda: text(d, "s0") == "9", what="9 points")
            d.find_element("id", "newgame").click()
            d.find_element("css selector", "#firstdealer option:nth-child(3)").click()  # South
            d.find_element("id", "startgame").click()
            wait_for(lambda: text(d, "gameno") == "game 2, to 10", what="a new game")
            assert text(d, "s0") == "0" and text(d, "s1") == "0"
            wait_for(lambda: text(d, "dealer") == "South", what="the new first dealer")
        client = svc.client()
        status = client.request("status")
        assert status["dealer"] == "South" and status["counters"]["hands"] == 1
        client.close()
    finally:
        svc.stop()
    # the score and the dealer survive a restart
    svc = svc.start()
    try:
        client = svc.client()
        assert client.request("score")["score"]["number"] == 2
        assert client.request("status")["dealer"] == "South"
        client.close()
    finally:
        svc.stop()


@needs_browser
@pytest.mark.parametrize("dark", [False, True])
def test_a_jam_is_shown_with_its_steps_and_cleared_from_the_page(tmp_path, dark):
    svc, port = page_service(tmp_path, "jam", faults=("jam:13",))
    try:
        with phone_browser(dark=dark) as d:
            d.get(f"http://127.0.0.1:{port}/")
            wait_for(lambda: text(d, "prompt").startswith("Load the pack"), what="ready")
            d.find_element("id", "deal").click()
            wait_for(lambda: d.find_element("id", "banner").get_attribute("data-phase")
                     == "fault", what="the jam")
            assert text(d, "prompt") == "Jam at card 13 of 24: 12 cards dealt"
            steps = text(d, "steps")
            assert "Put every card back in the tray" in steps
            assert d.find_element("id", "clear").is_displayed()
            shot(d, "jam-dark" if dark else "jam")
            d.find_element("id", "clear").click()
            wait_for(lambda: d.find_element("id", "banner").get_attribute("data-phase")
                     == "ready", what="the jam cleared")
            assert not d.find_element("id", "clear").is_displayed()
            assert text(d, "msg") == ""
    finally:
        svc.stop()
