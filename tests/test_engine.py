"""The pass engine alone: its rules, fed by hand-made events on a made-up clock."""

from __future__ import annotations

import doctest

from shuffler.core.mechanics import Pile
from shuffler.device import engine as engine_module
from shuffler.device.contract import EngineTimings, FaultKind, FaultLimits
from shuffler.device.engine import Card, Divert, Done, Motor, PassEngine, Phase, Tick

LIMITS = FaultLimits(jam_seconds=0.5, misfeed_seconds=1.0, retries=2, reverse_seconds=0.3,
                     max_pass_seconds=90)


def test_the_docstring_example_holds():
    result = doctest.testmod(engine_module)
    assert result.attempted > 0 and result.failed == 0


def moves(commands):
    return [c for c in commands if not isinstance(c, Tick)]


def deal(eng, at, cards, interval=0.2, blocked=0.08):
    """Pass ``cards`` cards across the beam from ``at``; the commands, and the time after."""
    out = []
    for _ in range(cards):
        out += eng.beam(True, at + interval - blocked)
        out += eng.beam(False, at + interval)
        at += interval
    return out, at


def test_a_clean_pass_counts_every_card_and_sets_the_diverter_between_cards():
    eng = PassEngine((0, 1, 1, 0), LIMITS, timings=EngineTimings(soft_start_s=0.1))
    start = moves(eng.start(0.0))
    assert start[0] == Divert(Pile.LEFT) and start[1] == Motor(0.2)
    ramp = moves(eng.tick(0.1))
    assert [m.speed for m in ramp] == [0.4, 0.6, 0.8, 1.0] and eng.phase is Phase.FEED
    out, _ = deal(eng, 0.1, 4)
    out = moves(out)
    assert [c for c in out if isinstance(c, Card)] == [Card(i, 4) for i in range(1, 5)]
    assert [c.pile for c in out if isinstance(c, Divert)] == [Pile.RIGHT, Pile.RIGHT, Pile.LEFT]
    assert out[-2] == Motor(0.0) and isinstance(out[-1], Done)
    assert out[-1].report.ok and out[-1].report.piles == (2, 2) and not out[-1].latch


def test_a_jam_stops_at_once_backs_out_retries_then_latches():
    eng = PassEngine((0,) * 5, LIMITS)
    eng.start(0.0)
    out, at = deal(eng, 0.0, 2)
    eng.beam(True, at + 0.1)  # card 3 sticks in the beam
    assert moves(eng.tick(at + 0.59)) == []
    assert moves(eng.tick(at + 0.6)) == [Motor(0.0), Motor(-0.6)]
    assert moves(eng.beam(False, at + 0.7)) == []  # the card backing out is not a count
    assert moves(eng.tick(at + 0.9)) == [Motor(0.0), Motor(1.0)]
    t = at + 0.9
    for _ in range(2):
        eng.beam(True, t + 0.1)
        out = []
        while not out:  # nothing but ticks until the jam limit
            t = eng.deadline
            out = moves(eng.tick(t))
        while eng.motor != 1.0 and not eng.done:  # backing out, then the soft start
            t = eng.deadline
            eng.tick(t)
    assert isinstance(out[-1], Done) and out[-1].latch
    report = out[-1].report
    assert report.fault.kind is FaultKind.JAM and report.fault.card == 3
    assert report.counted == 2 and report.retries == 2


def test_no_card_for_the_misfeed_limit_is_a_misfeed_or_with_a_weak_battery_a_stall():
    eng = PassEngine((0,) * 3, FaultLimits(retries=0))
    eng.start(0.0)
    out = moves(eng.tick(1.0))
    assert out[-1].report.fault.kind is FaultKind.MISFEED and out[-1].latch
    weak = PassEngine((0,) * 3, FaultLimits(retries=0))
    weak.start(0.0)
    weak.volts(5.1, 0.2)
    out = moves(weak.tick(1.0))
    assert out[-1].report.fault.kind is FaultKind.LOW_BATTERY and not out[-1].latch
    assert out[-1].report.min_volts == 5.1


def test_an_empty_tray_ends_the_pass_short_without_a_fault():
    eng = PassEngine((0,) * 4, LIMITS)
    eng.start(0.0)
    deal(eng, 0.0, 2)
    eng.tray(False, 0.5)
    out = moves(eng.beam(True, 0.55) + eng.beam(False, 0.6))
    assert out[-1].report.counted == 3 and out[-1].report.fault is None
    assert out[-1].report.tray_empty


def test_stop_turns_the_motor_off_in_the_same_step_and_nothing_turns_it_on_again():
    eng = PassEngine((0,) * 10, LIMITS, timings=EngineTimings(soft_start_s=0.1))
    eng.start(0.0)
    eng.tick(0.1)
    deal(eng, 0.1, 3)
    out = eng.stop(0.75)
    assert out[0] == Motor(0.0) and isinstance(out[1], Done) and not out[1].latch
    assert out[1].report.fault.kind is FaultKind.STOPPED and out[1].report.counted == 3
    later = eng.tick(5.0) + eng.beam(True, 5.1) + eng.beam(False, 5.2) + eng.stop(6.0)
    assert later == [] and eng.motor == 0.0


def test_the_pass_time_limit_stops_the_motor():
    eng = PassEngine((0,) * 10, FaultLimits(max_pass_seconds=1.0, misfeed_seconds=5))
    eng.start(0.0)
    out = moves(eng.tick(1.0))
    assert out[0] == Motor(0.0) and out[1].report.fault.kind is FaultKind.TIMEOUT


def test_a_blip_shorter_than_the_minimum_blocked_time_is_not_a_card():
    eng = PassEngine((0,) * 3, LIMITS, timings=EngineTimings(min_blocked_s=0.005))
    eng.start(0.0)
    assert moves(eng.beam(True, 0.1) + eng.beam(False, 0.102)) == []
    assert Card(1, 3) in eng.beam(True, 0.2) + eng.beam(False, 0.21)


def test_ticks_come_at_least_every_tick_period():
    eng = PassEngine((0,) * 3, LIMITS)
    eng.start(0.0)
    ticks, t = 0, 0.0
    while t < 0.9:
        t = eng.deadline
        ticks += sum(isinstance(c, Tick) for c in eng.tick(t))
    assert ticks >= 0.9 / engine_module.TICK_SECONDS - 1


def test_a_drop_out_inside_one_card_is_the_same_card():
    eng = PassEngine((0, 1, 0), LIMITS, timings=EngineTimings(min_blocked_s=0.005, min_gap_s=0.01))
    eng.start(0.0)
    # one card, its beam dropping out for 2 ms in the middle: one count, after the gap
    seen = eng.beam(True, 0.1) + eng.beam(False, 0.14) + eng.beam(True, 0.142)
    seen += eng.beam(False, 0.18)
    assert [c for c in seen if isinstance(c, Card)] == []
    seen += eng.tick(0.189)
    assert [c for c in seen if isinstance(c, Card)] == []
    assert Card(1, 3) in eng.tick(0.19) and eng.counted == 1
    # the next card after a real gap counts on its own
    assert Card(2, 3) in eng.beam(True, 0.3) + eng.beam(False, 0.38) + eng.tick(0.39)


def test_a_flickering_beam_does_not_hold_off_the_misfeed():
    eng = PassEngine((0,) * 5, FaultLimits(retries=0, misfeed_seconds=1.0),
                     timings=EngineTimings(min_blocked_s=0.005, min_gap_s=0.01))
    eng.start(0.0)
    t, out = 0.0, []
    while not eng.done and t < 3.0:  # a 1 ms blip every 20 ms: never a card
        out += eng.beam(True, t) + eng.beam(False, t + 0.001) + eng.tick(t + 0.015)
        t += 0.02
    done = [c for c in out if isinstance(c, Done)]
    assert done and done[0].report.fault.kind is FaultKind.MISFEED
    assert done[0].report.seconds < 1.05 and eng.counted == 0


def test_drop_outs_do_not_hold_off_the_jam():
    eng = PassEngine((0,) * 5, FaultLimits(retries=0, jam_seconds=0.5),
                     timings=EngineTimings(min_gap_s=0.01))
    eng.start(0.0)
    t, out = 0.1, eng.beam(True, 0.1)
    while not eng.done and t < 2.0:  # stuck in the beam, which drops out 2 ms in every 50
        out += eng.beam(False, t + 0.048) + eng.beam(True, t + 0.05)
        t += 0.05
    done = [c for c in out if isinstance(c, Done)]
    assert done and done[0].report.fault.kind is FaultKind.JAM and eng.counted == 0
