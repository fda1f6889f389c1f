"""The CLI without a service has no dispatcher of its own (issue 48): every command it
runs in-process, the quick looks (status, battery) and the score's too, is the declared
handler run by ``Machine.run``, as the socket runs it. A handler swapped in the
declaration is what the CLI then answers with; a look opens no session."""

from __future__ import annotations

import dataclasses
import json

import pytest

from shuffler.service.machine import COMMANDS
from tests.cli import invoke


@pytest.fixture
def declared():
    """Wraps a command's declared handler (the test names it) to record each run."""
    saved = dict(COMMANDS)
    runs: list[tuple[str, dict]] = []

    def wrap(name: str, change=lambda answer: answer):
        command = COMMANDS[name]

        def handler(m, req, emit):
            runs.append((name, req))
            return change(command.handler(m, req, emit))

        COMMANDS[name] = dataclasses.replace(command, handler=handler)
        return runs

    yield wrap
    COMMANDS.clear()
    COMMANDS.update(saved)


@pytest.mark.parametrize("args, cmd, code", [
    (("status",), "status", 0), (("battery", "--cards", "32"), "battery", 0),
    (("score",), "score", 0), (("score", "undo"), "undo", 2), (("clear",), "clear", 0)])
def test_each_in_process_command_is_the_declared_handler(declared, tmp_path, args, cmd,
                                                         code):
    runs = declared(cmd)
    result = invoke(tmp_path, "--json", *args)
    assert result.exit_code == code, result.output  # undo: nothing to undo yet
    assert [name for name, _ in runs] == [cmd]
    if cmd == "battery":  # the request as checked, with the card count asked for
        assert runs[0][1]["cards"] == 32 and json.loads(result.stdout)["cards"] == 32


def test_a_look_answers_what_its_declaration_answers_and_opens_no_session(
        declared, tmp_path, monkeypatch):
    from shuffler_cli.app import App

    def no_session(self, cards):
        raise AssertionError("a quick look built a whole session")

    monkeypatch.setattr(App, "session", no_session)
    declared("status", lambda answer: dataclasses.replace(answer, dealer="the toy's"))
    said = json.loads(invoke(tmp_path, "--json", "status").stdout)
    assert said["dealer"] == "the toy's" and said["counters"]["passes"] == 0
    assert invoke(tmp_path, "--json", "battery").exit_code == 0


def test_a_hand_left_unfinished_opens_the_device_with_its_own_load(tmp_path):
    """The hand's terms resolved by the one rule (hand_terms): a pending hand of 32 cards
    is finished on a 32-card load even when the command asks for 20."""
    from shuffler.store.state import StateStore

    store = StateStore(tmp_path / "state")
    state = store.load()
    state.hand = {"number": 1, "passes": 2, "cards": 32, "mode": "planned", "done": 1}
    store.save(state)
    result = invoke(tmp_path, "--json", "hand", "--cards", "20")
    hand = json.loads(result.stdout)["hand"]
    assert result.exit_code == 0, result.output
    assert hand["completed"] and hand["passes"] == 2
    assert [p["expected"] for p in hand["pass_reports"]] == [32]  # the one pass left


def test_the_cli_resolves_a_hands_terms_once_and_the_hand_runs_on_them(tmp_path, monkeypatch):
    """The CLI resolves the terms to open the device; the machine's hand runs on those
    (Session.do_hand takes them), never resolving them a second time in the process."""
    from shuffler.control import hand, session

    resolved = []
    real = hand.hand_terms

    def counted(*args, **kwargs):
        resolved.append(real(*args, **kwargs))
        return resolved[-1]

    monkeypatch.setattr(hand, "hand_terms", counted)
    monkeypatch.setattr(session, "hand_terms", counted)
    result = invoke(tmp_path, "--json", "hand", "--passes", "2", "--cards", "20")
    assert result.exit_code == 0, result.output
    assert [(t.passes, t.cards) for t in resolved] == [(2, 20)]
    hand_json = json.loads(result.stdout)["hand"]
    assert [p["expected"] for p in hand_json["pass_reports"]] == [20, 20]


def test_a_hand_left_pending_after_the_cli_resolved_its_terms_is_resumed(tmp_path,
                                                                        monkeypatch):
    """The CLI resolves the terms before it takes the machine; a command that leaves a hand
    pending in between (its lock let go just then) is seen, and its hand resumed, not
    written over by a fresh one."""
    from shuffler.control import hand
    from shuffler.store.state import StateStore

    real = hand.hand_terms

    def then_another_command(state, *args, **kwargs):
        terms = real(state, *args, **kwargs)
        other = StateStore(tmp_path / "state")  # another process's store
        left = other.load()
        left.hand = {"number": 1, "passes": 3, "cards": 24, "mode": "planned", "done": 1}
        other.save(left)
        return terms

    monkeypatch.setattr(hand, "hand_terms", then_another_command)
    result = invoke(tmp_path, "--json", "hand", "--passes", "2")
    assert result.exit_code == 0, result.output
    resumed = json.loads(result.stdout)["hand"]
    assert (resumed["passes"], resumed["resumed_at"]) == (3, 2)  # its hand, at its pass 2
    assert [p["number"] for p in resumed["pass_reports"]] == [2, 3]


def test_a_socket_request_cannot_smuggle_in_the_terms():
    """The resolved terms ride in the CLI's own request only: a request from a client
    naming ``terms`` is refused by name before any handler runs."""
    from shuffler.service.request import RequestError, check

    with pytest.raises(RequestError, match=r"^terms: not a field of a request"):
        check({"cmd": "hand", "terms": {"passes": 30, "cards": 104, "mode": "coin"}})
