"""Pairing a phone: a touch on the machine or a short-lived single-use code, revocable
tokens, throttled guessing."""

from __future__ import annotations

import json

import pytest

from shuffler.faces.pairing import (
    CODE_MINUTES,
    GLOBAL_PER_MINUTE,
    TOUCH_WINDOW_S,
    Pairing,
    Throttle,
    TouchPairing,
)


class Now:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


DAY = 86400.0


def clocks(tmp_path, wall: float = 1_800_000_000.0):
    """A pairing with an injected wall clock and boot clock (and this boot's id)."""
    now, boot_clock, boot = Now(wall), Now(1000.0), ["boot-1"]
    return Pairing(tmp_path, now, boot_clock, lambda: boot[0]), now, boot_clock, boot


def test_a_code_pairs_one_phone_once_and_is_kept_private(tmp_path):
    now = Now()
    pairing = Pairing(tmp_path, now)
    code = pairing.current_or_new()
    assert len(code.code) == 6 and code.code.isdigit()
    assert (tmp_path / "pairing-code").stat().st_mode & 0o777 == 0o600
    assert pairing.current_or_new() == code  # asked again: the same, while it lives
    assert pairing.redeem("000000" if code.code != "000000" else "111111", "10.0.0.2", "x") \
        is None
    phone, token = pairing.redeem(code.code, "10.0.0.2", "Firefox")
    assert pairing.known(token) and not pairing.known(token + "x") and not pairing.known("")
    assert pairing.redeem(code.code, "10.0.0.3", "thief") is None  # spent
    assert pairing.code() is None
    stored = (tmp_path / "phones.json").read_text()
    assert token not in stored and code.code not in stored
    assert (tmp_path / "phones.json").stat().st_mode & 0o777 == 0o600
    assert [p.id for p in pairing.phones()] == [phone.id]


def test_a_code_expires_and_a_new_one_replaces_the_old_at_once(tmp_path):
    pairing, _, clock, _ = clocks(tmp_path)
    old = pairing.current_or_new()
    new = pairing.new_code()
    assert pairing.redeem(old.code, "a", "") is None or old.code == new.code
    clock.t += CODE_MINUTES * 60
    assert pairing.code() is None and pairing.redeem(new.code, "a", "") is None
    assert pairing.current_or_new().code  # a fresh one on request


def test_revoking_in_one_process_is_seen_by_another_at_once(tmp_path):
    cli, service = Pairing(tmp_path), Pairing(tmp_path)
    tokens = []
    for _ in range(2):
        _, token = service.redeem(cli.current_or_new().code, "10.0.0.2", "")
        tokens.append(token)
    first, second = (p.id for p in cli.phones())
    assert all(service.known(t) for t in tokens)
    assert cli.revoke(first) == [first]
    assert not service.known(tokens[0]) and service.known(tokens[1])
    assert cli.revoke("nobody") == []
    assert cli.revoke("all") == [second] and not service.known(tokens[1])


def test_damaged_files_pair_nobody(tmp_path):
    (tmp_path / "pairing-code").write_text("123456\n")  # the old plain format
    (tmp_path / "phones.json").write_text("{not json")
    pairing = Pairing(tmp_path)
    assert pairing.code() is None and pairing.redeem("123456", "a", "") is None
    assert pairing.phones() == [] and not pairing.known("anything")
    (tmp_path / "phones.json").write_text(json.dumps([{"id": 1}, "x"]))
    assert pairing.phones() == [] and not pairing.known("anything")


def test_a_guesser_waits_longer_each_time():
    throttle, t = Throttle(), 0.0
    waits = []
    for _ in range(6):
        assert throttle.wait("a", t) == 0
        waits.append(throttle.failed("a", t))
        t += waits[-1]
    assert waits == [0, 0, 5, 10, 20, 40]
    assert throttle.wait("a", t - 1) == 1
    assert throttle.wait("b", t) == 0  # another client is judged meanwhile
    throttle.succeeded("a")
    assert throttle.wait("a", t) == 0


def test_guessers_get_ten_wrong_codes_a_minute_and_never_shut_out_a_fresh_phone():
    throttle, t, judged = Throttle(), 0.0, 0
    guessers = [f"10.1.0.{i}" for i in range(40)]
    for i in range(6000):  # 40 addresses, a guess every 0.1 s between them, ten minutes
        t = i * 0.1
        who = guessers[i % 40]
        if throttle.wait(who, t) == 0:
            throttle.failed(who, t)
            judged += 1
        if i % 600 == 300:  # meanwhile the dealer's phone sends its code: judged at once
            assert throttle.wait(f"10.2.0.{i // 600}", t) == 0
    # each address's first wrong code, then at most ten a minute from all of them
    assert judged <= 40 + GLOBAL_PER_MINUTE * 11, judged
    assert throttle.wait(guessers[0], t) > 0
    assert len(throttle.clients) <= 1024  # memory stays bounded


def test_a_touch_pairs_the_one_phone_asking_within_30_s():
    asking, t = TouchPairing(), 100.0
    assert not asking.touched(t)  # nobody asks: the touch is the machine's, not pairing's
    rid = asking.ask("10.0.0.5", "phone", t)
    assert asking.answer(rid, t + 1)[0] == "asking"
    assert asking.touched(t + 29)
    state, _, asked = asking.answer(rid, t + 30)
    assert state == "confirmed" and asked is not None and asked.client == "10.0.0.5"
    assert asking.answer(rid, t + 30)[0] == "expired"  # spent: one token a request
    late = asking.ask("10.0.0.5", "phone", t + 100)
    assert not asking.touched(t + 100 + TOUCH_WINDOW_S)  # too late: not for pairing
    assert asking.answer(late, t + 100 + TOUCH_WINDOW_S)[0] == "expired"
    assert asking.answer("made-up", t)[0] == "expired"


def test_a_touch_while_two_addresses_ask_pairs_neither():
    asking, t = TouchPairing(), 0.0
    mine = asking.ask("10.0.0.5", "phone", t)
    theirs = asking.ask("10.0.0.66", "guesser", t + 2)
    assert asking.touched(t + 3)
    assert asking.answer(mine, t + 4)[0] == "both" and asking.answer(theirs, t + 4)[0] == "both"
    again = asking.ask("10.0.0.5", "phone", t + 40)  # the other one has gone: try again
    assert asking.touched(t + 41) and asking.answer(again, t + 41)[0] == "confirmed"


def test_asking_is_bounded_one_request_an_address():
    asking = TouchPairing()
    first = asking.ask("10.0.0.5", "phone", 0.0)
    second = asking.ask("10.0.0.5", "phone", 1.0)
    assert asking.answer(first, 1.0)[0] == "expired" and asking.answer(second, 1.0)[0] \
        == "asking"
    for i in range(500):
        asking.ask(f"10.0.{i // 250}.{i % 250}", "x", 2.0)
    assert len(asking.asking) <= 64


def test_a_paired_phone_is_added_beside_the_others(tmp_path):
    pairing = Pairing(tmp_path)
    phone, token = pairing.add("10.0.0.5", "phone")
    assert pairing.known(token) and [p.id for p in pairing.phones()] == [phone.id]
    assert pairing.code() is None  # no code was made or spent


# -- through the service: the sensor's touch, never the page's -----------------------------

@pytest.fixture
def table(tmp_path):
    from shuffler.faces.web import WebServer

    from .test_gestures import rigged

    rig, device, service = rigged(tmp_path)
    faces = service.faces
    web = WebServer(faces.board, faces.act, faces.tournament, "127.0.0.1", 0,
                    tmp_path / "pairing").start()
    service.on_touch(web.touched)
    try:
        yield rig, service, web
    finally:
        web.close()
        device.close()


def pair_post(web, body):
    from .test_web import request

    return request(web, "POST", "/api/pair", json.dumps(body),
                   {"Content-Type": "application/json"})


def sensor_touch(rig, service):
    rig.clock.sleep(0.6)
    rig.touch(0.08)
    rig.clock.sleep(1.0)  # released and settled
    service._idle()


def test_a_touch_on_the_sensor_pairs_the_phone_that_asked_and_starts_no_pass(table):
    rig, service, web = table
    status, asked = pair_post(web, {"touch": True})
    assert status == 202 and "touch the sensor" in asked["result"]["message"]
    rid = asked["result"]["request"]
    assert pair_post(web, {"request": rid})[0] == 202  # not yet
    rig._sensors()  # the tray holds the pack: a touch would start a pass
    sensor_touch(rig, service)
    status, reply = pair_post(web, {"request": rid})
    assert status == 200 and web.pairing.files.known(reply["result"]["token"])
    assert service.session.controller.store.load().passes == 0  # the touch started nothing
    sensor_touch(rig, service)  # nobody asks now: the next touch is the machine's again
    assert service.session.controller.store.load().passes > 0


def test_the_pages_own_touch_never_confirms_a_pairing(table):
    rig, service, web = table
    rid = pair_post(web, {"touch": True})[1]["result"]["request"]
    rig.clock.sleep(0.6)
    service.touch()  # the page's Start pass (a paired phone's, or loopback's)
    service._idle()
    status, reply = pair_post(web, {"request": rid})
    assert status == 202 and reply["result"]["state"] == "asking"


def test_no_touch_within_30_s_pairs_nobody(table):
    _, _, web = table
    now = [0.0]
    web.clock = lambda: now[0]
    rid = pair_post(web, {"touch": True})[1]["result"]["request"]
    now[0] = TOUCH_WINDOW_S
    status, reply = pair_post(web, {"request": rid})
    assert status == 410 and reply["error"]["kind"] == "pairing_expired"
    assert web.pairing.files.phones() == []


def test_run_as_root_the_files_go_to_the_state_folders_owner(tmp_path):
    import os

    if os.geteuid() != 0:
        import pytest

        pytest.skip("needs root: chown to the service's user")
    folder = tmp_path / "state"
    folder.mkdir()
    os.chown(folder, 12345, 12345)  # the service's user
    pairing = Pairing(folder)
    _, token = pairing.redeem(pairing.current_or_new().code, "10.0.0.2", "")
    for name in ("pairing.lock", "phones.json"):
        st = (folder / name).stat()
        assert (st.st_uid, st.st_gid) == (12345, 12345)
    assert pairing.known(token)


def test_a_code_made_while_the_wall_clock_was_30_days_ahead_dies_10_minutes_later(tmp_path):
    pairing, wall, clock, _ = clocks(tmp_path, wall=1_800_000_000.0 + 30 * DAY)  # before NTP
    code = pairing.current_or_new()
    assert pairing.expires(code) == wall.t + CODE_MINUTES * 60  # what a person reads
    wall.t -= 30 * DAY  # NTP sets the clock
    clock.t += CODE_MINUTES * 60 - 1
    assert pairing.code() == code and pairing.left(code) == 1
    assert pairing.expires(code) == wall.t + 1  # the person's reading follows the new clock
    clock.t += 1
    assert pairing.code() is None and pairing.redeem(code.code, "a", "") is None


def test_a_code_made_while_the_wall_clock_was_behind_lives_its_10_minutes(tmp_path):
    pairing, wall, clock, _ = clocks(tmp_path, wall=1_800_000_000.0 - 30 * DAY)
    code = pairing.current_or_new()
    wall.t += 30 * DAY
    clock.t += 60
    assert pairing.code() == code
    other = Pairing(tmp_path, wall, clock, lambda: "boot-1")  # the service, another process
    assert other.redeem(code.code, "10.0.0.2", "phone") is not None


def test_a_code_from_another_boot_or_from_the_boot_clocks_future_is_dead(tmp_path):
    pairing, _, clock, boot = clocks(tmp_path)
    code = pairing.current_or_new()
    boot[0] = "boot-2"  # rebooted: the boot clock started again
    clock.t = 5.0
    assert pairing.code() is None
    boot[0] = "boot-1"
    clock.t = code.made - 1  # a file naming a time not yet come (edited by hand)
    assert pairing.code() is None
    assert pairing.current_or_new() != code or pairing.code() is not None


def test_the_wall_clock_stepping_never_unpairs_a_phone(tmp_path):
    pairing, wall, clock, _ = clocks(tmp_path)
    _, token = pairing.redeem(pairing.current_or_new().code, "10.0.0.2", "phone")
    for step in (-365 * DAY, 3650 * DAY):
        wall.t += step
        clock.t += 3600
        assert pairing.known(token)


def test_a_code_file_of_the_wall_clock_format_is_dead(tmp_path):
    (tmp_path / "pairing-code").write_text(json.dumps({"code": "123456",
                                                       "expires": 4_000_000_000}))
    assert Pairing(tmp_path).code() is None
