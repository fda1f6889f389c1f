"""Pairing a phone: a short-lived single-use code, revocable tokens, throttled guessing."""

from __future__ import annotations

import json

from shuffler.faces.pairing import CODE_MINUTES, GLOBAL_PER_MINUTE, Pairing, Throttle


class Now:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


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
    now = Now()
    pairing = Pairing(tmp_path, now)
    old = pairing.current_or_new()
    new = pairing.new_code()
    assert pairing.redeem(old.code, "a", "") is None or old.code == new.code
    now.t += CODE_MINUTES * 60
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


def test_a_guesser_waits_longer_each_time_and_is_logged_once_a_burst():
    throttle, t = Throttle(), 0.0
    waits = []
    for _ in range(6):
        assert throttle.wait("a", t) == 0
        waits.append(throttle.failed("a", t))
        t += waits[-1]
    assert waits == [0, 0, 5, 10, 20, 40]
    assert throttle.wait("a", t - 1) == 1
    assert throttle.first_of_burst("a") and not throttle.first_of_burst("a")
    assert throttle.wait("b", t) == 0  # another client is judged meanwhile
    throttle.succeeded("a")
    assert throttle.wait("a", t) == 0


def test_the_whole_table_judges_at_most_ten_wrong_codes_a_minute():
    throttle, t, judged = Throttle(), 0.0, 0
    for i in range(10_000):  # 10 000 clients, one guess a second each, for ten minutes
        t = i * 0.06
        if throttle.wait(f"10.1.{i // 250}.{i % 250}", t) == 0:
            throttle.failed(f"10.1.{i // 250}.{i % 250}", t)
            judged += 1
    assert judged <= GLOBAL_PER_MINUTE * 11
    assert len(throttle.clients) <= 256  # memory stays bounded


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
