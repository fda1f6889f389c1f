"""The euchre score keeper: the points, the game, undo, a new game, and a restart."""

from __future__ import annotations

import time

import pytest

from shuffler.config import Config, load_config_text
from shuffler.control.controller import PassController
from shuffler.control.reports import StatusReport
from shuffler.control.session import Session
from shuffler.core.score import Game, Result, ScoreError, new_game, teams_for
from shuffler.device.registry import open_device, plan_source
from shuffler.store.state import StateStore


@pytest.mark.parametrize("tricks, alone, expected", [
    (3, False, (0, 1)), (4, False, (0, 1)), (4, True, (0, 1)), (5, False, (0, 2)),
    (5, True, (0, 4)), (2, False, (1, 2)), (0, True, (1, 2)),
])
def test_points(tricks, alone, expected):
    assert Result(0, tricks, alone).points == expected


@pytest.mark.parametrize("bad", [dict(makers=2, tricks=3), dict(makers=0, tricks=6),
                                 dict(makers=0, tricks=-1), dict(makers=0, tricks=3, alone=1)])
def test_bad_entries_are_refused(bad):
    with pytest.raises(ScoreError):
        Result(**bad)


def test_a_game_is_won_at_the_target_and_then_takes_no_more():
    game = new_game(("North", "East", "South", "West"), target=10)
    assert game.teams == (("North", "South"), ("East", "West"))
    for _ in range(2):
        game.add(Result(1, 5, alone=True))
    assert game.totals == (0, 8) and game.winner is None
    game.add(Result(0, 1))  # North & South euchred: 2 to East & West
    assert game.totals == (0, 10) and game.winner == 1
    with pytest.raises(ScoreError, match="East & West won"):
        game.add(Result(0, 3))
    game.undo()
    assert game.winner is None
    assert Game.from_dict(game.to_dict()).to_dict() == game.to_dict()


def test_a_damaged_stored_score_is_a_clear_error():
    with pytest.raises(ScoreError, match="damaged"):
        Game.from_dict({"teams": [], "hands": "x"})


def session(tmp_path, config: Config | None = None) -> Session:
    config = config or Config()
    device = open_device("sim", config, cards=24)
    return Session(PassController(device, StateStore(tmp_path)), config,
                   plan_source(device, 1))


def test_the_score_and_the_dealer_survive_a_restart(tmp_path):
    s = session(tmp_path)
    s.scores.record(0, 5, True)
    s.scores.record(1, 3)
    assert s.scores.show().score.totals == (4, 1)
    s.device.close()
    s = session(tmp_path)  # a new process on the same state folder
    assert s.scores.show().score.totals == (4, 1)
    assert s.scores.undo().score.totals == (4, 0)
    result = s.scores.new_game("West").score
    assert result.number == 2 and result.totals == (0, 0)
    assert StatusReport.of(s.controller, s.config).dealer == "West"
    undone = s.scores.undo()  # a new game can be taken back: game 1 as it stood
    assert undone.score.number == 1 and undone.score.totals == (4, 0)
    assert undone.done == "undid the new game (game 1 stood 4 to 0)"
    with pytest.raises(ScoreError, match="first_dealer"):
        s.scores.new_game("Nobody")
    s.device.close()


def test_the_game_length_comes_from_the_config(tmp_path):
    config = load_config_text("[table]\ngame_to = 5\n")
    s = session(tmp_path, config)
    s.scores.record(0, 5, True)
    s.scores.record(0, 3)
    assert s.scores.show().score.winner == 0
    assert teams_for(("A", "B")) == (("A",), ("B",))
    s.device.close()


def test_a_hand_stopped_by_a_jam_counts_the_same_everywhere(tmp_path):
    import random

    from hardware_sim import SimDevice, parse_fault_specs
    from shuffler.device.clock import VirtualClock

    config = Config()
    device = SimDevice.for_cards(24, faults=parse_fault_specs(["jam:13"]),
                                 rng=random.Random(3), clock=VirtualClock())
    s = Session(PassController(device, StateStore(tmp_path)), config, plan_source(device, 1))
    hand = s.do_hand(s.terms(3)).hand
    status = StatusReport.of(s.controller, s.config)
    assert hand.passes_done == 0 and not hand.completed
    assert status.last_hand.passes_done == status.hand_in_progress.passes_done == 0
    assert status.last_hand.fault.kind.value == "jam"
    device.close()


# -- the keeper: versions, history, edits, renege, target, names -------------------------

class Book:
    """A scorebook whose answers are read as the socket sends them: their JSON."""

    def __init__(self, tmp_path, text=""):
        from shuffler.control.scorebook import ScoreBook

        self.book = ScoreBook(StateStore(tmp_path), load_config_text(text))

    def __getattr__(self, name):
        return lambda *args, **kwargs: getattr(self.book, name)(*args, **kwargs).to_json()


book = Book


def test_two_phones_entering_the_same_hand_score_it_once(tmp_path):
    from shuffler.core.score import StaleScoreError

    b = book(tmp_path)
    seen = b.show()["score"]["version"]  # both phones drew this version
    first = b.record(0, 5, version=seen)
    assert first["score"]["totals"] == [2, 0] and first["done"].startswith("hand 1 ")
    with pytest.raises(StaleScoreError, match="the last change: hand 1") as e:
        b.record(0, 5, version=seen)  # the second phone, or a double tap
    assert e.value.kind == "stale_score"
    assert b.show()["score"]["totals"] == [2, 0] and len(b.show()["score"]["hands"]) == 1


def test_two_undos_of_the_same_version_undo_one_change_and_redo_brings_it_back(tmp_path):
    from shuffler.core.score import StaleScoreError

    b = book(tmp_path)
    v = b.record(0, 3)["score"]["version"]
    v = b.record(1, 5, alone=True, version=v)["score"]["version"]
    assert b.show()["score"]["undo"] == "hand 2 (East & West loner march: 4 to East & West)"
    undone = b.undo(version=v)
    assert undone["done"] == "undid hand 2 (East & West loner march: 4 to East & West)"
    assert undone["score"]["totals"] == [1, 0]
    with pytest.raises(StaleScoreError):
        b.undo(version=v)  # the other phone's Undo of the same version
    assert b.show()["score"]["totals"] == [1, 0]
    redone = b.redo(version=undone["score"]["version"])
    assert redone["score"]["totals"] == [1, 4] and redone["done"].startswith("redid hand 2")
    assert redone["score"]["redo"] is None
    with pytest.raises(ScoreError, match="nothing to redo"):
        b.redo()
    b.record(0, 3)  # a new change forgets what could be redone
    b.undo()
    b.record(0, 4)
    assert b.show()["score"]["redo"] is None


def test_a_hand_is_edited_or_deleted_by_its_number_and_that_too_can_be_undone(tmp_path):
    b = book(tmp_path)
    for makers, tricks in ((0, 5), (1, 2), (1, 3)):
        b.record(makers, tricks)
    assert b.show()["score"]["totals"] == [4, 1]
    edited = b.record(1, 5, hand=2)  # hand 2 was mis-entered: East & West marched
    assert edited["score"]["totals"] == [2, 3]
    assert edited["done"] == "the edit of hand 2 (East & West march: 2 to East & West)"
    deleted = b.delete(1)
    assert deleted["score"]["totals"] == [0, 3] and len(deleted["score"]["hands"]) == 2
    assert b.undo()["score"]["totals"] == [2, 3]
    with pytest.raises(ScoreError, match=r"hands 1 to 3\), got 9"):
        b.delete(9)
    with pytest.raises(ScoreError, match="hands 1 to 3"):
        b.record(0, 3, hand=4)


def test_a_renege_scores_two_to_the_other_side_whatever_the_tricks():
    assert Result(0, 5, alone=True, renege=0).points == (1, 2)
    assert Result(0, 1, renege=1).points == (0, 2)
    assert Result(0, 5, renege=1).to_dict()["euchre"] is False
    with pytest.raises(ScoreError, match="renege"):
        Result(0, 3, renege=2)


def test_the_target_and_names_are_chosen_on_screen_and_kept_with_the_game(tmp_path):
    b = book(tmp_path, "[table]\ngame_to = 10\n")
    b.settings(target=11, names=["Us", "Them"])
    for _ in range(5):
        b.record(0, 5)
    g = b.show()["score"]
    assert g["team_names"] == ["Us", "Them"] and g["totals"] == [10, 0] and g["winner"] is None
    g = b.record(0, 3)["score"]
    assert g["winner"] == 0
    fresh = b.new_game()["score"]  # the next game keeps the chosen target and names
    assert (fresh["target"], fresh["team_names"], fresh["number"]) == (11, ["Us", "Them"], 2)
    assert b.new_game(target=21, names=["Reds", "Blacks"])["score"]["target"] == 21
    with pytest.raises(ScoreError, match="different names"):
        b.settings(names=["Us", "Us"])
    with pytest.raises(ScoreError, match="target"):
        b.settings(target=0)


def test_a_remote_new_game_does_not_replace_a_game_in_progress(tmp_path):
    b = book(tmp_path)
    b.record(0, 3)
    with pytest.raises(ScoreError, match="a game is in progress"):
        b.new_game(replace_in_progress=False)
    assert b.show()["score"]["totals"] == [1, 0]
    v = b.show()["score"]["version"]
    assert b.new_game(version=v)["score"]["number"] == 2  # naming the version replaces it


def test_the_history_is_bounded_and_survives_the_state_files_checks(tmp_path):
    from shuffler.control.scorebook import HISTORY

    b = book(tmp_path)
    for _ in range(HISTORY + 5):
        b.record(1, 3)
        b.undo()
        b.redo()
        b.delete(1)
    stored = StateStore(tmp_path).load().score  # loads: the state file's checks pass
    assert len(stored["undo"]) <= HISTORY
    assert b.show()["score"]["version"] == 4 * (HISTORY + 5)
    assert b.undo()["done"] == ("undid the deletion of hand 1 (East & West made it: 1 to "
                                "East & West)")


def test_a_remote_new_game_names_the_version_to_replace_a_game(tmp_path):
    from types import SimpleNamespace

    from shuffler.faces.router import Faces
    from shuffler.faces.telemetry import parse_command

    sent = []
    faces = SimpleNamespace(service=SimpleNamespace(
        submit=lambda r, face: sent.append(r) or r if face == "mqtt" else None,
        touch_waiting=False))
    for payload in (b'{"cmd": "new_game"}', b'{"cmd": "new_game", "version": 4}'):
        Faces.remote_command(faces, parse_command(payload))  # type: ignore[arg-type]
    assert [(r["replace"], r["version"]) for r in sent] == [(False, None), (True, 4)]
    with pytest.raises(ValueError, match="version"):
        parse_command(b'{"cmd": "new_game", "version": "4"}')


def test_a_score_change_from_the_page_must_name_the_version():
    from types import SimpleNamespace

    from shuffler.faces.router import Faces

    sent = []
    faces = SimpleNamespace(service=SimpleNamespace(  # the service's answer: done
        submit=lambda r, face: sent.append(r) or {"ok": True, "result": r}
        if face == "page" else None))
    for action in ("score", "undo", "redo", "new_game"):
        reply = Faces.act(faces, action, {"makers": 0, "tricks": 3})  # type: ignore[arg-type]
        assert not reply["ok"] and "version" in reply["error"]["message"]
    assert sent == []
    Faces.act(faces, "undo", {"version": 3})  # type: ignore[arg-type]
    assert sent == [{"cmd": "undo", "version": 3}]


@pytest.mark.parametrize("served", [False, True])
def test_the_cli_enters_a_renege_edits_deletes_and_sets_the_next_target(tmp_path, served):
    import json

    from click.testing import CliRunner

    from shuffler_cli.main import cli

    from .served import Service

    svc = Service(tmp_path, speed=1e6).start() if served else None
    env = {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_CONFIG": "",
           **({"SHUFFLER_SOCKET": str(svc.socket)} if svc else {"SHUFFLER_NO_SERVICE": "1"}),
           "SHUFFLER_CHECK_SCHEMAS": "1"}

    def run(*args):
        result = CliRunner().invoke(cli, ["--json", "score", *args], env=env,
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    try:
        run("add", "North", "5")
        got = run("add", "East", "3", "--renege", "south")  # North & South reneged
        assert got["score"]["totals"] == [2, 2] and got["score"]["hands"][1]["renege"] == 0
        assert run("add", "East", "5", "--hand", "1")["score"]["totals"] == [0, 4]
        assert run("delete", "2")["done"].startswith("the deletion of hand 2")
        fresh = run("new", "--target", "15")["score"]
        assert (fresh["number"], fresh["target"]) == (2, 15)
        assert run("undo")["score"]["totals"] == [0, 2]
        if svc:  # it was the service's score the CLI changed, not a local one
            client = svc.client()
            assert client.request("score")["score"]["totals"] == [0, 2]
            client.close()
            assert not (tmp_path / "state").exists()
    finally:
        if svc:
            svc.stop()


def test_a_game_stored_before_versions_and_reneges_still_loads(tmp_path):
    from shuffler.store.state import State

    store = StateStore(tmp_path)
    state = store.load()
    state.score = {"number": 3, "target": 11, "teams": [["North", "South"], ["East", "West"]],
                   "hands": [{"makers": 1, "tricks": 5, "alone": True}]}
    store.save(state)
    b = book(tmp_path)
    g = b.show()["score"]
    assert (g["version"], g["target"], g["totals"], g["undo"]) == (0, 11, [0, 4], None)
    assert b.record(0, 3, version=0)["score"]["version"] == 1
    assert isinstance(store.load(), State)


def test_games_are_numbered_as_played_a_replaced_unplayed_game_keeps_its_number(tmp_path):
    b = book(tmp_path)
    assert b.new_game("East")["score"]["number"] == 1  # game 1 replaced before a hand: 1
    assert b.new_game("South", names=["Us", "Them"])["score"]["number"] == 1
    b.record(0, 5)
    second = b.new_game()["score"]
    assert second["number"] == 2  # game 1 had a hand: the next is 2
    assert b.new_game()["score"]["number"] == 2  # and an unplayed game 2 stays 2
    assert [g["number"] for g in b.show()["score"]["played"]] == [1]


def test_the_played_games_are_kept_for_the_results_sheet_and_follow_undo(tmp_path):
    b = book(tmp_path)
    b.settings(names=["Us", "Them"])
    for _ in range(5):
        b.record(0, 5)  # 10 to 0: Us win
    b.new_game()
    b.record(1, 3)  # game 2 given up at 0 to 1
    b.new_game()
    played = b.show()["score"]["played"]
    assert played == [
        {"number": 1, "target": 10, "names": ["Us", "Them"], "team_names": ["Us", "Them"],
         "totals": [10, 0], "winner": 0, "hands": 5},
        {"number": 2, "target": 10, "names": ["Us", "Them"], "team_names": ["Us", "Them"],
         "totals": [0, 1], "winner": None, "hands": 1}]
    undone = b.undo()["score"]  # the new game undone: game 2 is being played again
    assert undone["number"] == 2 and [g["number"] for g in undone["played"]] == [1]
    assert b.redo()["score"]["played"] == played
    # a restart reads them back, checked
    again = book(tmp_path)
    assert again.show()["score"]["played"] == played


def test_a_damaged_played_game_is_a_clear_error():
    stored = new_game(("N", "E", "S", "W")).to_dict()
    stored["played"] = [{"number": 1, "target": 10, "team_names": ["a"], "totals": [1, 2],
                         "winner": 0, "hands": 3}]
    with pytest.raises(ScoreError, match="the stored score is damaged"):
        Game.from_dict(stored)


def test_raising_the_target_after_a_win_says_the_game_goes_on(tmp_path):
    b = book(tmp_path)
    b.settings(names=["Us", "Them"])
    for _ in range(5):
        b.record(0, 5)
    assert b.show()["score"]["winner"] == 0
    done = b.settings(target=15)
    assert done["score"]["winner"] is None
    assert done["done"] == "the target (15); Us had won at 10, so the game goes on"
    assert b.settings(target=10)["done"] == "the target (10)"  # won again: nothing reopened


def test_the_losing_phone_of_two_scoring_at_once_is_told_the_score_changed(tmp_path):
    """Two phones enter the same hand: the second's request comes while the first's
    holds the machine. It waits for it and is judged against its version: the score
    changed (and the page shows the new one), never "busy: a pass is running"."""
    import random
    import threading

    from hardware_sim import SimDevice
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.session import Session
    from shuffler.faces.router import Faces
    from shuffler.service.loop import Service
    from shuffler.store.state import StateStore

    from .test_watchdog import run

    device = SimDevice.for_cards(24)
    service = Service(Session(PassController(device, StateStore(tmp_path)), Config(),
                              random.Random(1)), tmp_path / "s.sock", faces=Faces)
    stop = threading.Event()
    loop = threading.Thread(target=lambda: [service.step(0.02) for _ in iter(
        stop.is_set, True)], daemon=True)
    try:
        version = service.score()["score"]["version"]
        hand = {"makers": 0, "tricks": 3, "version": version}
        service.claim.acquire()  # the first phone's score change holds the machine
        second: list = []
        late = threading.Thread(target=lambda: second.append(
            service.faces.act("score", dict(hand))))
        late.start()
        time.sleep(0.5)
        assert second == []  # it waits for the first, not told a pass is running
        assert run(service, "score", **hand)["ok"]  # the first phone's hand, entered
        service.claim.release()
        loop.start()
        late.join(10)
        [reply] = second
        assert not reply["ok"] and reply["error"]["kind"] == "stale_score", reply
        assert "the score changed" in reply["error"]["message"]
        assert service.faces.board.snapshot()[1]["score"]["version"] > version  # shown
    finally:
        stop.set()
        if loop.is_alive():
            loop.join(5)
        device.close()
