"""An evening at the table with only the phone page: a real browser, a real service, and
axe-core on every state of the page (light and dark, phone and desktop)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from .browser import audit, needs_axe, needs_browser, phone_browser
from .mqtt_broker import free_port
from .served import Service
from .waiting import wait_for

#: set to a folder (docs/img) to keep the screenshots for docs/guide.md
SHOTS = os.environ.get("SHUFFLER_SCREENSHOTS")

pytestmark = [pytest.mark.slow, needs_browser, needs_axe]

WATCH = """
window.seen = []; window.progress = []; window.said = []; window.awake = [];
const prompt = document.getElementById('prompt');
const bar = document.getElementById('progress');
new MutationObserver(() => {
  const t = prompt.textContent;
  if (window.seen[window.seen.length - 1] !== t) window.seen.push(t);
}).observe(prompt, {childList: true, characterData: true, subtree: true});
new MutationObserver(() => window.progress.push(Number(bar.getAttribute('aria-valuenow'))))
  .observe(bar, {attributes: true, attributeFilter: ['aria-valuenow']});
const announce = document.getElementById('announce');
new MutationObserver(() => window.said.push(announce.textContent))
  .observe(announce, {childList: true, characterData: true, subtree: true});
window.answers = [];
const dealmsg = document.getElementById('dealmsg');
new MutationObserver(() => window.answers.push(dealmsg.textContent))
  .observe(dealmsg, {childList: true, characterData: true, subtree: true});
new MutationObserver(() => window.awake.push(document.body.dataset.awake))
  .observe(document.body, {attributes: true, attributeFilter: ['data-awake']});
"""


def text(driver, element_id):
    """What the element says (its text, not the capitals a style may show)."""
    return driver.find_element("id", element_id).get_attribute("textContent").strip()


def attr(driver, element_id, name):
    return driver.find_element("id", element_id).get_attribute(name)


def shown(driver, element_id):
    return driver.find_element("id", element_id).is_displayed()


def shot(driver, name):
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"page-{name}.png"))


def page_service(tmp_path, name, faults=(), web=""):
    port = free_port()
    config = f"[web]\nenabled = true\nport = {port}\n{web}\n[hand]\npasses = 5\n"
    return Service(tmp_path, config, speed=3.0, faults=faults, name=name).start(), port


def open_page(d, url):
    d.get(url)
    wait_for(lambda: attr(d, "banner", "data-live") == "true", what="the live panel")


def in_view(d, element_id):
    """The element is wholly on the screen as it stands (no scrolling)."""
    return d.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight;",
        d.find_element("id", element_id))


def visible(d, element_id):
    """Shown and not kept invisible in its place (the page's .invisible)."""
    return shown(d, element_id) and d.execute_script(
        "return getComputedStyle(arguments[0]).visibility !== 'hidden'",
        d.find_element("id", element_id))


def score_in_view(d):
    """The score bar is on screen (the header sticks to the top of a phone)."""
    return d.execute_script(
        "const r = document.getElementById('scorebar').getBoundingClientRect();"
        "return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0;")


def enter(d, makers, tricks, alone=False, renege=None, submit=True):
    """One hand as the seed's keeper takes it: who named trump, each team's tricks, each
    a big button."""
    def choose(element_id, on):
        if attr(d, element_id, "aria-pressed") != ("true" if on else "false"):
            tap(d, element_id)
    for team in (0, 1):
        choose(f"m{team}", team == makers)
        for n in range(6):
            choose(f"tk{team}_{n}", tricks[team] == n)
        choose(f"rn{team}", renege == team)
    choose("alone", alone)
    if submit:
        tap(d, "enter")


def tap(d, element_id=None, css=None):
    """Scroll the element to the middle of the screen and tap it, as a thumb would."""
    el = d.find_element("id", element_id) if element_id else d.find_element("css selector", css)
    d.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
    el.click()


def totals(d):
    return text(d, "s0"), text(d, "s1")


def test_a_hand_and_a_game_played_from_the_phone(tmp_path):
    svc, port = page_service(tmp_path, "table")
    try:
        with phone_browser() as d:
            open_page(d, f"http://127.0.0.1:{port}/")
            wait_for(lambda: text(d, "prompt").startswith("Load the pack"), what="ready")
            assert text(d, "prompt") == "Load the pack and touch to start pass 1 of 5"
            assert text(d, "dealer") == "North" and text(d, "next") == "East"
            d.execute_script(WATCH)
            audit(d, "ready")
            shot(d, "ready")
            # a Legion player's phone (390 x 844): Start pass and the score card, who named
            # trump included, without scrolling; no Stop with the motor stopped; no last hand
            assert d.execute_script("return [window.innerWidth, window.innerHeight]") == [390, 844]
            for element_id in ("deal", "s0", "s1", "m0", "m1"):
                assert in_view(d, element_id), element_id
            assert not visible(d, "stop") and not shown(d, "handbox")
            layout = d.execute_script("return document.getElementById('deal')"
                                      ".getBoundingClientRect().top")
            tap(d, "deal")
            wait_for(lambda: "Pass started." in d.execute_script("return window.answers"),
                     what="ok, once the pass had started")
            seen_dealing = seen_stack = False
            tops, stops = set(), set()
            deadline = time.monotonic() + 90
            while attr(d, "banner", "data-phase") != "shuffled":
                assert time.monotonic() < deadline, d.execute_script("return window.seen")
                phase = attr(d, "banner", "data-phase")
                tops.add(d.execute_script("return document.getElementById('deal')"
                                          ".getBoundingClientRect().top"))
                if phase == "dealing":
                    assert not shown(d, "handbox")  # no hand is over yet
                    stops.add(d.execute_script(  # in one look: the phase moves on meanwhile
                        "return document.getElementById('banner').dataset.phase === 'dealing'"
                        " ? document.getElementById('stop').className : 'danger'"))
                if phase == "dealing" and not seen_dealing and \
                        d.execute_script("return window.progress.length") > 5:
                    shot(d, "dealing")
                    audit(d, "dealing")
                    seen_dealing = True
                if phase == "stack" and not seen_stack:
                    shot(d, "stack")
                    audit(d, "stack")
                    seen_stack = True
                time.sleep(0.03)
            assert tops == {layout}  # the layout does not jump while dealing
            assert stops == {"danger"}  # a red Stop while the motor runs
            seen = d.execute_script("return window.seen")
            for n in range(1, 6):
                assert f"Dealing pass {n} of 5" in seen, seen
            stacks = [s for s in seen if s.endswith("pile on top, then touch")]
            assert len(stacks) == 4, seen
            progress = d.execute_script("return window.progress")
            assert max(progress) == 24 and len(set(progress)) > 10  # the bar moved
            # the live region speaks when the state changes, never for each card
            said = d.execute_script("return window.said")
            assert not any("cards" in s for s in said) and len(said) < 30, said
            assert "true" in d.execute_script("return window.awake")  # the screen stayed on
            # hand done: "shuffled: deal" stays until the next pass, not "touch to start 5"
            wait_for(lambda: text(d, "dealer") == "East", what="the deal to move on")
            time.sleep(2.5)  # past the service's status refresh and the LED's READY
            assert text(d, "prompt") == "Shuffled: deal", d.execute_script("return window.seen")
            assert text(d, "cardline") == ""
            assert text(d, "passline") == "The pack is perfectly shuffled."
            assert text(d, "hand") == ("Hand 1, dealt by North: 5 passes. "
                                       "The pack is perfectly shuffled.")
            assert d.execute_script("return document.body.dataset.awake") == "false"
            audit(d, "hand-done")
            shot(d, "hand-done")
            play_the_seeds_worked_game(d)
        client = svc.client()
        status = client.request("status")
        assert status["dealer"] == "South" and status["counters"]["hands"] == 1
        client.close()
    finally:
        svc.stop()
    svc = svc.start()  # the score, its target and names, and the dealer survive a restart
    try:
        client = svc.client()
        score = client.request("score")["score"]
        assert (score["number"], score["target"], score["team_names"]) == (2, 11, ["Us", "Them"])
        assert client.request("status")["dealer"] == "South"
        client.close()
    finally:
        svc.stop()


def play_the_seeds_worked_game(d):
    """Us and Them to 10: 2, 2 (a euchre), 4 alone, 1 to Them, 1, 2: 11 to 1 (the seed)."""
    from selenium.webdriver.support.ui import Select

    tap(d, css="#gamebox summary")
    for team, name in ((0, "Us"), (1, "Them")):
        d.find_element("id", f"name{team}").clear()
        d.find_element("id", f"name{team}").send_keys(name)
    Select(d.find_element("id", "target")).select_by_value("10")
    audit(d, "target, names and a new game")
    tap(d, "savegame")
    wait_for(lambda: text(d, "t0") == "Us" and text(d, "t1") == "Them", what="the names")
    for where in ("0", "document.body.scrollHeight"):  # the score stays on a phone's screen
        d.execute_script(f"window.scrollTo(0, {where})")
        assert score_in_view(d) and text(d, "scorebar") == "Us 0 · Them 0 · to 10"
    # entry by each team's tricks, with the seed's warning when they do not add to five
    enter(d, 0, (4, 2), submit=False)
    assert text(d, "trickwarn") == "The tricks add up to 6, not 5: check them"
    assert not d.find_element("id", "enter").is_enabled()
    audit(d, "score entry with the warning")
    shot(d, "score-warning")
    enter(d, 0, (5, 0))
    wait_for(lambda: totals(d) == ("2", "0"), what="a march")
    assert text(d, "scoremsg").startswith("Hand 1 (Us march: 2 to Us)")
    enter(d, 1, (3, 2))  # Them named trump and took two: euchred, 2 to Us
    wait_for(lambda: totals(d) == ("4", "0"), what="a euchre")
    enter(d, 0, (5, 0), alone=True)
    wait_for(lambda: totals(d) == ("8", "0"), what="a loner")
    enter(d, 1, (1, 4))
    wait_for(lambda: totals(d) == ("8", "1"), what="Them 1")
    # a renege (the house rule: 2 to the other side), then deleted: it was a mistake
    enter(d, 1, (None, None), renege=0)
    wait_for(lambda: totals(d) == ("8", "3"), what="a renege")
    assert "Them" in text(d, "scoremsg") and "renege" in text(d, "scoremsg")
    audit(d, "renege")
    tap(d, css="#handsbox summary")
    audit(d, "the hands listed, each with Edit and Delete")
    shot(d, "hands")
    tap(d, css="[aria-label='Delete hand 5']")
    wait_for(lambda: totals(d) == ("8", "1"), what="the renege deleted")
    # a double tap scores once
    enter(d, 0, (3, 2), submit=False)
    d.execute_script("const b = document.getElementById('enter'); b.click(); b.click();")
    wait_for(lambda: totals(d) == ("9", "1"), what="9 to 1")
    time.sleep(1.0)
    assert totals(d) == ("9", "1") and text(d, "handcount") == "5"
    # edit hand 5: three tricks were really all five
    tap(d, css="[aria-label='Edit hand 5']")
    assert text(d, "enter") == "Score hand 5" or text(d, "enter") == "Save hand 5"
    enter(d, 0, (5, 0))
    wait_for(lambda: totals(d) == ("10", "1"), what="the edit")
    assert text(d, "winner") == "Us win!"
    audit(d, "game won")
    shot(d, "game-won")
    # a target past the winner's score would take the win back: the page asks first
    Select(d.find_element("id", "target")).select_by_value("15")
    tap(d, "savegame")
    assert shown(d, "confirm") and text(d, "winner") == "Us win!"
    assert text(d, "confirmsay") == ("Us won this game 10 to 1. A target of 15 takes the win "
                                     "back and the game goes on. Play on to 15?")
    audit(d, "asking before the target reopens a won game")
    shot(d, "target-confirm")
    tap(d, "confirmno")
    assert not shown(d, "confirm") and text(d, "gamemsg") == "The win stands: nothing changed."
    assert d.find_element("id", "target").get_attribute("value") == "10"
    Select(d.find_element("id", "target")).select_by_value("15")
    tap(d, "savegame")
    tap(d, "confirmyes")
    wait_for(lambda: not shown(d, "winner"), what="the game reopened")
    assert text(d, "gamemsg") == "The target (15); Us had won at 10, so the game goes on."
    tap(d, "undo")  # back to the win at 10
    wait_for(lambda: text(d, "winner") == "Us win!", what="the win back")
    # undo and redo say what they did
    tap(d, "undo")
    wait_for(lambda: totals(d) == ("9", "1"), what="undo")
    assert text(d, "scoremsg").startswith("Undid the edit of hand 5")
    tap(d, "redo")
    wait_for(lambda: totals(d) == ("10", "1"), what="redo")
    assert text(d, "scoremsg").startswith("Redid the edit of hand 5")
    tap(d, "undo")
    wait_for(lambda: totals(d) == ("9", "1"), what="undo again")
    enter(d, 0, (5, 0))
    wait_for(lambda: totals(d) == ("11", "1"), what="the seed's 11 to 1")
    # a new game, undone, then started again at 11 with South dealing
    Select(d.find_element("id", "target")).select_by_value("11")
    tap(d, css="#firstdealer option:nth-child(3)")  # South
    tap(d, "startgame")
    wait_for(lambda: text(d, "gameno") == "game 2, to 11", what="a new game")
    assert totals(d) == ("0", "0") and "Undo brings the old game back" in text(d, "scoremsg")
    tap(d, "undo")
    wait_for(lambda: totals(d) == ("11", "1"), what="the new game undone")
    assert text(d, "gameno") == "game 1, to 10"
    assert d.find_element("id", "target").get_attribute("value") == "10"  # the game's own
    Select(d.find_element("id", "target")).select_by_value("11")
    tap(d, "startgame")
    wait_for(lambda: text(d, "gameno") == "game 2, to 11", what="the new game again")
    wait_for(lambda: text(d, "dealer") == "South", what="the new first dealer")
    audit(d, "new game")


@pytest.mark.parametrize("dark", [False, True])
def test_a_jam_is_shown_with_its_steps_and_cleared_from_the_page(tmp_path, dark):
    svc, port = page_service(tmp_path, "jam", faults=("jam:13",))
    try:
        with phone_browser(dark=dark) as d:
            open_page(d, f"http://127.0.0.1:{port}/")
            tap(d, "deal")
            wait_for(lambda: attr(d, "banner", "data-phase") == "fault", what="the jam")
            assert text(d, "prompt") == "Jam at card 13 of 24: 12 cards dealt"
            assert "Put every card back in the tray" in text(d, "steps")
            assert shown(d, "clear") and text(d, "phaseword") == "stopped"
            # the motor is already stopped: no Stop; the bar where the jam stopped the pass
            assert not visible(d, "stop") and not visible(d, "deal")
            assert (attr(d, "progress", "aria-valuenow"), attr(d, "progress", "aria-valuemax")
                    ) == ("12", "24")
            assert text(d, "cardline") == "12 of 24 cards dealt before it stopped"
            width = d.execute_script("return document.querySelector('#progress > div')"
                                     ".getBoundingClientRect().width / document."
                                     "getElementById('progress').getBoundingClientRect().width")
            assert abs(width - 0.5) < 0.01, width
            assert not shown(d, "handbox")  # the jammed hand is not over: it goes on
            audit(d, "jam", dark)
            shot(d, "jam-dark" if dark else "jam")
            tap(d, "clear")
            wait_for(lambda: attr(d, "banner", "data-phase") == "ready", what="the jam cleared")
            assert not shown(d, "clear")
    finally:
        svc.stop()


@pytest.mark.parametrize("volts, state", [(7.0, "low"), (6.4, "critical")])
def test_a_low_battery_is_shown_before_any_touch_as_the_led_shows_it(tmp_path, volts, state):
    svc, port = page_service(tmp_path, state, faults=(f"battery:{volts}",))
    try:
        with phone_browser() as d:
            open_page(d, f"http://127.0.0.1:{port}/")
            wait_for(lambda: attr(d, "banner", "data-battery") == state, what=state)
            # said once above the headline: by the phase when the battery refuses the touch
            wait_for(lambda: attr(d, "banner", "data-phase") == "low_battery", what="refused")
            assert text(d, "phaseword") == f"battery {state}" and not shown(d, "battbadge")
            style = d.execute_script(  # the colour read with the blink held still
                "const b = document.getElementById('banner'), s = getComputedStyle(b);"
                "const blink = [s.animationName, s.animationDuration];"
                "b.style.animation = 'none'; const colour = getComputedStyle(b).borderTopColor;"
                "b.style.animation = ''; return [...blink, colour];")
            # the LED's slow blink (1 s on, 1 s off) in amber, not a jam's red
            assert style[:2] == ["slowblink", "2s"] and style[2] == "rgb(255, 176, 0)", style
            # the headline says the battery refuses before anyone touches
            wait_for(lambda: text(d, "prompt").startswith("Battery "), what="the refusal")
            assert "touch to start" not in text(d, "prompt")
            assert text(d, "prompt").startswith(
                "Battery critical" if state == "critical" else "Battery low: about ")
            audit(d, f"battery {state}")
            shot(d, f"battery-{state}")
            # Start pass is refused at once, in the machine's words (the touch's answer is
            # its refusal: issue 48): never a false ok
            tap(d, "deal")
            wait_for(lambda: text(d, "dealmsg").startswith("Not done:"), timeout=4,
                     what="the refusal")
            assert "Pass started" not in text(d, "dealmsg")
            refusal = text(d, "dealmsg")
            assert refusal.startswith("Not done: Battery ") and "9 V battery" in refusal, refusal
    finally:
        svc.stop()


def test_a_page_whose_stream_is_gone_says_not_live_until_a_fresh_panel(tmp_path):
    svc, port = page_service(tmp_path, "stale")
    try:
        with phone_browser() as d:
            open_page(d, f"http://127.0.0.1:{port}/")
            assert not shown(d, "livebadge")
            svc.stop()
            wait_for(lambda: attr(d, "banner", "data-live") == "false", what="not live")
            assert shown(d, "livebadge") and text(d, "livebadge") == "not live"
            assert not d.find_element("id", "deal").is_enabled()
            audit(d, "stale stream")
            shot(d, "not-live")
            svc.start()  # the page comes back by itself, with back-off
            wait_for(lambda: attr(d, "banner", "data-live") == "true", timeout=60,
                     what="live again")
            assert not shown(d, "livebadge")
    finally:
        svc.stop()


def test_a_stream_that_goes_quiet_without_an_error_is_not_live(tmp_path):
    import signal

    svc, port = page_service(tmp_path, "quiet")
    try:
        with phone_browser() as d:
            open_page(d, f"http://127.0.0.1:{port}/")
            d.execute_script(
                "window.quietMs = 1500; window.probeMs = 1500; window.lives = [];"
                "new MutationObserver(() => window.lives.push(document.getElementById("
                "'banner').dataset.live)).observe(document.getElementById('banner'),"
                "{attributes: true, attributeFilter: ['data-live']});")
            time.sleep(5)  # an idle machine: the page asks again, and stays live
            assert "false" not in d.execute_script("return window.lives")
            svc.proc.send_signal(signal.SIGSTOP)  # the connection stays open, nothing comes
            try:
                wait_for(lambda: attr(d, "banner", "data-live") == "false", timeout=20,
                         what="not live on a silent stream")
                assert shown(d, "livebadge")
            finally:
                svc.proc.send_signal(signal.SIGCONT)
            wait_for(lambda: attr(d, "banner", "data-live") == "true", timeout=60,
                     what="live again")
    finally:
        svc.stop()


def test_pairing_from_the_lan_is_asked_next_to_what_was_tapped(tmp_path):
    import socket

    from shuffler.faces.pairing import Pairing

    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # the address this machine would use towards the LAN (nothing is sent)
        probe.connect(("198.51.100.1", 9))
        lan = probe.getsockname()[0]
    except OSError:
        pytest.skip("no LAN address on this machine to reach the page from")
    finally:
        probe.close()
    svc, port = page_service(tmp_path, "lan", web='lan = true\n')
    try:
        with phone_browser() as d:
            open_page(d, f"http://{lan}:{port}/")
            enter(d, 0, (5, 0))  # a score from the LAN needs a paired phone
            wait_for(lambda: shown(d, "pairbox"), what="the pairing box")
            assert d.execute_script(  # right under the score's message, not at the bottom
                "return document.getElementById('scoremsg').nextElementSibling.id") == "pairbox"
            assert text(d, "scoremsg").startswith("Not done:")
            audit(d, "pairing")
            shot(d, "pairing")
            tap(d, "touchpair")  # asks the table: the page waits for a touch on the sensor
            wait_for(lambda: text(d, "pairmsg").startswith(
                "Touch the sensor on the machine to pair"), what="touch the sensor")
            audit(d, "pairing by touch")
            shot(d, "pairing-touch")
            code = Pairing(svc.state).current_or_new().code
            wrong = "000000" if code != "000000" else "111111"
            field = d.find_element("id", "code")
            for _ in range(4):  # a mistyped code, again and again: the phone must wait
                field.clear()
                field.send_keys(wrong)
                tap(d, "savecode")
                time.sleep(0.3)
            wait_for(lambda: text(d, "pairmsg").startswith("too many wrong codes"),
                     what="the wait")
            time.sleep(5.5)  # its wait over
            field.clear()
            field.send_keys(code)
            tap(d, "savecode")
            wait_for(lambda: not shown(d, "pairbox"), what="paired")
            assert text(d, "scoremsg") == "Paired: tap again."
            assert text(d, "pairmsg") == ""  # the stale "too many wrong codes" line is gone
            enter(d, 0, (5, 0))
            wait_for(lambda: totals(d) == ("2", "0"), what="a score from the paired phone")
    finally:
        svc.stop()


def test_two_phones_entering_the_same_hand_score_it_once(tmp_path):
    svc, port = page_service(tmp_path, "two")
    try:
        with phone_browser() as one, phone_browser(dark=True) as two:
            for d in (one, two):
                open_page(d, f"http://127.0.0.1:{port}/")
            two.execute_script("stream.close()")  # the second phone is a moment behind
            enter(one, 0, (5, 0))
            wait_for(lambda: totals(one) == ("2", "0"), what="phone one's hand")
            enter(two, 0, (5, 0))
            wait_for(lambda: text(two, "scoremsg").startswith("Not done:"), what="refused")
            assert "the score changed" in text(two, "scoremsg")
            audit(two, "two phones: a stale entry", dark=True)
            two.execute_script("connect()")
            wait_for(lambda: totals(two) == ("2", "0"), what="phone two catching up")
            # two Undos of the same version undo one change
            two.execute_script("stream.close()")
            tap(one, "undo")
            wait_for(lambda: totals(one) == ("0", "0"), what="undo")
            tap(two, "undo")
            wait_for(lambda: text(two, "scoremsg").startswith("Not done:"), what="refused")
        client = svc.client()
        score = client.request("score")["score"]
        assert score["totals"] == [0, 0] and score["redo"].startswith("hand 1")
        client.close()
    finally:
        svc.stop()


def test_the_target_size_check_finds_a_control_too_small_to_tap(tmp_path):
    from .browser import small_targets

    svc, port = page_service(tmp_path, "targets")
    try:
        with phone_browser() as d:
            open_page(d, f"http://127.0.0.1:{port}/")
            assert small_targets(d) == []
            d.execute_script(  # what the page had before: a small radio button, a narrow list
                "const f = document.getElementById('entry');"
                "f.insertAdjacentHTML('beforeend', '<input type=radio id=tiny style=\"min-height:0;"
                "min-width:0;width:16px;height:16px\">"
                "<select id=narrow style=\"min-height:0;height:30px\"><option>1</option>"
                "</select><button id=hid class=invisible>x</button>');")
            found = small_targets(d)
            assert [f.split(" ")[0] for f in found] == ["input#tiny", "select#narrow"], found
    finally:
        svc.stop()


def test_the_other_pile_lifted_first_is_said_on_the_page(tmp_path):
    """A dealer who lifts the other pile first and tries to keep it (the simulator's deaf
    dealer): the page says so in the machine's words, in its own phase, while the machine
    waits, and says why the hold that tried to keep the stack was refused."""
    port = free_port()
    svc = Service(tmp_path, f"[web]\nenabled = true\nport = {port}\n[hand]\npasses = 2\n",
                  speed=3.0, name="wrong")
    svc.args += ["--sim-dealer", "other", "--sim-ignores"]
    svc.start()
    try:
        with phone_browser() as d:
            open_page(d, f"http://127.0.0.1:{port}/")
            d.execute_script(WATCH + """
window.phases = [];
new MutationObserver(() => window.phases.push(
    [document.getElementById('banner').dataset.phase,
     document.getElementById('phaseword').textContent,
     getComputedStyle(document.getElementById('banner')).borderTopStyle]))
  .observe(document.getElementById('banner'), {attributes: true,
                                               attributeFilter: ['data-phase']});""")
            tap(d, "deal")
            wait_for(lambda: attr(d, "banner", "data-phase") == "shuffled", timeout=60,
                     what="the hand done")
            said = d.execute_script("return window.seen")
            assert any(t.startswith("The other pile first: put it back and lift the LEFT "
                                    "pile first") for t in said), said
            phases = d.execute_script("return window.phases")
            assert ["wrong_pile", "the other pile first", "double"] in phases, phases
            # the hold it refused meanwhile (no stack off the light is kept), said next to
            # Start pass
            assert any(a.startswith("hold ignored: a stack off the light cannot be kept")
                       for a in d.execute_script("return window.answers")), \
                d.execute_script("return window.answers")
    finally:
        svc.stop()
