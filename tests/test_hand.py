import random

import pytest

from shuffler.config import Config, load_config_text
from shuffler.control.controller import PassController
from shuffler.control.hand import HandRunner
from shuffler.core.mechanics import Pile, Stacked
from shuffler.core.planning import CoinPlanner, PlannedPlanner
from shuffler.device.contract import FaultKind
from shuffler.errors import DeviceTimeoutError
from shuffler.store.state import StateStore


def run_hand(sim, tmp_path, *, cards=24, passes=4, faults=(), habit="instructed",
             config: Config | None = None, device=None, planned=False):
    dev = device or sim.make(cards, faults, habit)
    start = sim.pack(dev)
    planner = PlannedPlanner(passes, random.Random(5)) if planned else CoinPlanner(random.Random(5))
    runner = HandRunner(PassController(dev, StateStore(tmp_path)), planner, config or Config())
    return runner.run(passes, cards), runner, dev, start


@pytest.mark.parametrize("cards", [24, 32, 104])
def test_a_hand_counts_every_card_on_every_pass(sim, tmp_path, cards):
    hand, _, _, _ = run_hand(sim, tmp_path, cards=cards)
    assert hand.completed and len(hand.pass_reports) == 4
    for rec in hand.pass_reports:
        assert rec.counted == cards and sum(rec.piles) == cards


def test_the_deal_moves_left_and_hands_are_numbered(sim, tmp_path):
    cfg = load_config_text('[table]\nseats = ["N", "E", "S", "W"]\nfirst_dealer = "S"')
    seen = []
    for _ in range(5):
        hand, *_ = run_hand(sim, tmp_path, passes=1, config=cfg)
        seen.append((hand.number, hand.dealer, hand.next_dealer))
    assert seen == [(1, "S", "W"), (2, "W", "N"), (3, "N", "E"), (4, "E", "S"), (5, "S", "W")]


@pytest.mark.parametrize("planned", [False, True])
@pytest.mark.parametrize(("habit", "stacking"), [("instructed", Pile.LEFT),
                                                 ("other", Pile.LEFT),
                                                 ("other:ignores", Pile.LEFT)])
def test_the_hand_reads_the_stacking_and_tracks_every_card(sim, tmp_path, habit, stacking,
                                                           planned):
    hand, runner, dev, start = run_hand(sim, tmp_path, habit=habit, planned=planned)
    assert [r.stacking for r in hand.pass_reports] == [stacking.name.lower()] * 4
    assert hand.tracking
    assert [start[i] for i in runner.tracker.order] == sim.pack(dev)


def test_both_piles_lifted_at_once_is_warned_and_lifted_again_so_the_track_holds(sim, tmp_path):
    """Both at once (the sensors cannot tell) is warned of like the other pile first; the
    dealer who ignores it is refused until it lifts the piles one at a time (issue 47)."""
    hand, runner, dev, start = run_hand(sim, tmp_path, habit="both:ignores")
    assert hand.completed and [r.stacking for r in hand.pass_reports] == ["left"] * 4
    assert [r.stacked for r in hand.pass_reports] == [Stacked.CORRECTED.value] * 4
    assert hand.tracking and [start[i] for i in runner.tracker.order] == sim.pack(dev)


def test_a_jam_stops_the_hand_and_the_deal_stays(sim, tmp_path):
    hand, *_ = run_hand(sim, tmp_path, faults=["jam:13"])
    assert not hand.completed and len(hand.pass_reports) == 1
    assert hand.fault.kind is FaultKind.JAM
    state = StateStore(tmp_path).load()
    assert state.hands_completed == 0 and state.fault["kind"] == "jam" and state.jams == 1


def test_a_double_feed_degrades_the_pass_and_the_hand_goes_on(sim, tmp_path):
    hand, *_ = run_hand(sim, tmp_path, faults=["double:3"])
    assert hand.completed and len(hand.pass_reports) == 4
    assert hand.pass_reports[0].fault.kind is FaultKind.COUNT_MISMATCH
    assert "Counted 23 of 24" in hand.pass_reports[0].fault.message
    assert not hand.tracking


def test_no_touch_between_passes_times_out(sim, tmp_path):
    dev = sim.make(24)
    dev.show = lambda status: None  # a dealer who walked away
    with pytest.raises(DeviceTimeoutError, match="No touch within 300 s after pass 1 of 4"):
        run_hand(sim, tmp_path, device=dev)


def test_a_hand_stopped_by_a_jam_resumes_where_it_stopped(sim, tmp_path):
    dev = sim.make(24, ["jam:13"])
    controller = PassController(dev, StateStore(tmp_path))
    first = HandRunner(controller, CoinPlanner(random.Random(1)), Config()).run(4, 24)
    assert not first.completed and StateStore(tmp_path).load().hand["done"] == 0
    assert controller.clear()
    again = HandRunner(controller, CoinPlanner(random.Random(2)), Config()).run(4, 24)
    assert again.completed and again.number == first.number and len(again.pass_reports) == 4
    state = StateStore(tmp_path).load()
    assert state.hand is None and state.hands_completed == 1


def test_every_pass_is_audited_once_and_a_crash_in_flight_is_settled(sim, tmp_path):
    dev = sim.make(24)
    controller = PassController(dev, StateStore(tmp_path))
    HandRunner(controller, CoinPlanner(random.Random(1)), Config()).run(3, 24)
    lines = list(controller.audit.read())
    assert [(e["hand"], e["pass"]) for e in lines] == [(1, 1), (1, 2), (1, 3)]
    assert len({e["id"] for e in lines}) == 3 and all(e["counted"] == 24 for e in lines)
    # a pass marked in flight that never reached the audit log: a crash mid-pass
    controller.update(lambda s: setattr(s, "in_flight", {"id": 99, "hand": 2, "pass": 1})
                      or setattr(s, "next_pass_id", 101))
    settled = controller.recover()
    assert settled["interrupted"] and StateStore(tmp_path).load().interrupted == 1
    assert controller.recover() is None  # settled once
    # one that reached the audit log but not the counters: counted, not interrupted
    controller.audit.append({"id": 100, "counted": 24})
    controller.update(lambda s: setattr(s, "in_flight", {"id": 100}))
    passes = StateStore(tmp_path).load().passes
    assert not controller.recover().get("interrupted")
    assert StateStore(tmp_path).load().passes == passes + 1


def test_with_two_decks_the_hands_shuffle_them_in_turn(sim, tmp_path):
    cfg = load_config_text("[table]\ndecks = 2\n")
    decks = [run_hand(sim, tmp_path, passes=1, config=cfg)[0].deck for _ in range(3)]
    assert decks == ["A", "B", "A"]
    assert run_hand(sim, tmp_path / "one", passes=1)[0].deck is None


def test_a_hand_left_waiting_for_a_touch_resumes_after_the_passes_done(sim, tmp_path):
    dev = sim.make(24)
    shown = dev.show
    dev.show = lambda status: None  # the dealer walks away after pass 1
    with pytest.raises(DeviceTimeoutError):
        run_hand(sim, tmp_path, device=dev)
    assert StateStore(tmp_path).load().hand["done"] == 1
    dev.show = shown
    dev.mechanism.restack(Pile.LEFT)
    hand, *_ = run_hand(sim, tmp_path, device=dev)
    assert hand.completed and hand.resumed_at == 2 and len(hand.pass_reports) == 3


@pytest.mark.parametrize("passes", [4, 5])
def test_a_dealer_who_always_stacks_the_other_way_is_made_to_follow_the_light(
        sim, tmp_path, passes):
    """The dealer who ignores the warning, touches and holds the sensor to keep its stack
    is refused every time, the last stack included: it corrects, and the hand is the
    plan's (issue 47: a kept stack was a departure the dealer could choose by the cards)."""
    from shuffler.core.mixing import tv_planned

    hand, *_ = run_hand(sim, tmp_path, habit="other:ignores", planned=True, passes=passes)
    assert hand.completed and [r.stacking for r in hand.pass_reports] == ["left"] * passes
    assert [r.stacked for r in hand.pass_reports] == [Stacked.CORRECTED.value] * passes
    assert hand.distance == tv_planned(24, passes) and hand.distance_exact is True
    assert hand.departures == () and hand.distance_note is None


def test_a_dealer_who_puts_the_taller_pile_on_top_follows_the_light(sim, tmp_path):
    # the planner shows the taller pile (or either, when equal): the habit costs nothing
    hand, *_ = run_hand(sim, tmp_path, habit="taller", planned=True, passes=5)
    assert hand.completed and hand.departures == ()
    assert hand.distance == 0 and hand.distance_exact is True


def test_a_hand_resumed_at_its_first_pass_says_so(sim, tmp_path):
    from shuffler.core.mixing import tv_any

    # the case: a jam in pass 1, a resume: it said distance_exact true, resumed_at null
    dev = sim.make(24, ["jam:3"])
    controller = PassController(dev, StateStore(tmp_path))
    first = HandRunner(controller, PlannedPlanner(5, random.Random(1)), Config()).run(5, 24)
    assert not first.completed and StateStore(tmp_path).load().hand["done"] == 0
    assert controller.clear()
    again = HandRunner(controller, PlannedPlanner(5, random.Random(2)), Config()).run(5, 24)
    assert again.completed and again.resumed_at == 1 and len(again.pass_reports) == 5
    # cut off in a pass, its plan lost: the bound that holds against any dealer
    assert again.distance == tv_any(24) and again.distance_exact is False
    assert "resumed at pass 1 on a new plan" in again.distance_note
    # notes that name only what happened: the jam is no departure and no unseen stacking,
    # the resume no wrong count
    said = first.to_json()
    assert first.departures == () and said["departures"] == []
    assert "pile sensors" not in (said["distance_note"] or "")
    assert "pass 1 stopped (jam)" in said["distance_note"]
    assert "count came out wrong" not in again.distance_note


def test_coin_mode_after_a_double_feed_reports_a_bound(sim, tmp_path):
    from shuffler.core.mixing import tv_coin

    hand, *_ = run_hand(sim, tmp_path, faults=["double:3"])  # in the first of 4 passes
    assert hand.distance == tv_coin(24, 3) and hand.distance_exact is False
    clean, *_ = run_hand(sim, tmp_path)
    assert clean.distance == tv_coin(24, 4) and clean.distance_exact is True
