"""The euchre score keeper: the points, the game, undo, a new game, and a restart."""

from __future__ import annotations

import pytest

from shuffler.backends import open_device, plan_source
from shuffler.config import Config, load_config_text
from shuffler.controller import PassController
from shuffler.score import Game, Result, ScoreError, new_game, teams_for
from shuffler.session import Session
from shuffler.state import StateStore


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
    s.do_score(0, 5, True)
    s.do_score(1, 3)
    assert s.score()["score"]["totals"] == [4, 1]
    s.device.close()
    s = session(tmp_path)  # a new process on the same state folder
    assert s.score()["score"]["totals"] == [4, 1]
    assert s.do_undo()["score"]["totals"] == [4, 0]
    result = s.do_new_game("West")
    assert result["score"]["number"] == 2 and result["score"]["totals"] == [0, 0]
    assert s.status()["dealer"] == "West"
    with pytest.raises(ScoreError):
        s.do_undo()
    with pytest.raises(ScoreError, match="first_dealer"):
        s.do_new_game("Nobody")
    s.device.close()


def test_the_game_length_comes_from_the_config(tmp_path):
    config = load_config_text("[table]\ngame_to = 5\n")
    s = session(tmp_path, config)
    s.do_score(0, 5, True)
    s.do_score(0, 3)
    assert s.score()["score"]["winner"] == 0
    assert teams_for(("A", "B")) == (("A",), ("B",))
    s.device.close()


def test_a_hand_stopped_by_a_jam_counts_the_same_everywhere(tmp_path):
    import random

    from hardware_sim import SimDevice, parse_fault_specs
    from shuffler.clock import VirtualClock

    config = Config()
    device = SimDevice.for_cards(24, faults=parse_fault_specs(["jam:13"]),
                                 rng=random.Random(3), clock=VirtualClock())
    s = Session(PassController(device, StateStore(tmp_path)), config, plan_source(device, 1))
    hand = s.do_hand(passes=3)["hand"]
    status = s.status()
    assert hand["passes_done"] == 0 and not hand["completed"]
    assert status["last_hand"]["passes_done"] == status["hand_in_progress"]["done"] == 0
    assert status["last_hand"]["fault"] == "jam"
    device.close()
