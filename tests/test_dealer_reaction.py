"""One simulated dealer (issue 48): what the dealer does at the light is decided once,
in hardware_sim.dealer (:meth:`SimDealer.reacts`, :meth:`SimDealer.corrects`); the
simulator plays it as events and the pins' rig as sensor levels, and neither decides it
again."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from hardware_sim.dealer import CAREFUL_GAP, Answer, DealerHabit, SimDealer
from shuffler.core.mechanics import Pile
from shuffler.device.contract import EventKind

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("asked", list(Pile))
def test_a_dealer_who_follows_the_light_stacks_at_once(asked):
    does = SimDealer().reacts(asked, 5.0)
    assert does.follows and not (does.at_once or does.made_to or does.keeps)
    assert [(ev.kind, ev.pile, ev.at) for ev in does.lifts] == [
        (EventKind.PILE_LIFTED, asked, 5.0), (EventKind.PILE_LIFTED, asked.other, 5.6)]


@pytest.mark.parametrize(("listens", "made_to"), [(True, False), (False, True)])
def test_the_other_pile_first_is_held_for_the_warning(listens, made_to):
    does = SimDealer(DealerHabit.OTHER, listens=listens).reacts(Pile.LEFT, 0.0)
    assert not does.follows and does.on_top is Pile.RIGHT
    assert (does.made_to, does.keeps) == (made_to, made_to)  # deaf: goes on, then keeps


def test_both_at_once_never_follows_even_on_the_pile_asked():
    dealer = SimDealer(DealerHabit.BOTH, random.Random(1))
    reactions = [dealer.reacts(Pile.LEFT, 0.0) for _ in range(20)]
    assert {r.on_top for r in reactions} == set(Pile)  # either may end on top, unseen
    assert all(r.at_once and not r.follows for r in reactions)
    assert all(r.lifts[1].at - r.lifts[0].at == dealer.both_gap for r in reactions)


def test_the_card_shown_decides_a_keep():
    dealer = SimDealer(DealerHabit.OTHER, answer=Answer(corrects=1, keeps_high=True),
                       high=lambda card: card == "A")
    shown = {Pile.LEFT: "2", Pile.RIGHT: "A"}
    assert dealer.reacts(Pile.LEFT, 0.0, shown=shown.get).keeps  # lifted the right first
    assert not dealer.reacts(Pile.RIGHT, 0.0, shown=shown.get).keeps


def test_warned_the_dealer_lifts_one_pile_at_a_time():
    dealer = SimDealer(lift_gap=0.1)
    first, second = dealer.corrects(Pile.RIGHT, 10.0)
    assert (first.pile, first.at) == (Pile.RIGHT, 10.0 + dealer.put_back)
    assert second.pile is Pile.LEFT and second.at - first.at == pytest.approx(CAREFUL_GAP)


@pytest.mark.parametrize("backend", ["device.py", "gpio_rig.py"])
def test_no_backend_decides_the_reaction_again(backend):
    """The habit, the warning's answer and the careful lifts are the dealer's: a backend
    that reads them itself has written the reaction a second time."""
    tree = ast.parse((ROOT / "hardware-sim" / backend).read_text(encoding="utf-8"))
    read = sorted({f"{node.attr}:{node.lineno}" for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute)
                   and node.attr in {"habit", "listens", "careful_gap", "made_to", "choose",
                                     "answer", "both_gap", "lift_gap"}
                   and isinstance(node.value, ast.Attribute) and node.value.attr == "dealer"})
    assert read == []


# -- the dealer's time is the machine's, however busy the host -----------------------------

@pytest.mark.parametrize("listens", [True, False], ids=["listens", "deaf"])
def test_a_busy_host_never_ages_the_dealers_restack(listens):
    """At a million times real time, a host that spends 2 ms over each event (2,000 s of
    the machine's time: the hand waits 300 s for a touch) still finds the dealer's touch,
    and the machine's clock, within the dealer's own seconds of the light that asked for
    the stack: the simulator's dealer reacts in machine time, not in the host's. Once the
    light is back to ready, the idle machine's clock moves with real time again."""
    import time

    from hardware_sim import SimDevice
    from shuffler.core.planning import PassPlan
    from shuffler.device.clock import ScaledClock
    from shuffler.device.contract import Signal, Status

    device = SimDevice.for_cards(12, clock=ScaledClock(1_000_000), habit=DealerHabit.OTHER,
                                 listens=listens)
    try:
        assert device.run_pass(PassPlan((0, 1) * 6)).fault is None
        device.show(Status(Signal.STACK, Pile.LEFT, 2, 2))  # the dealer lifts (and, deaf,
        asked, seen, warned = device.now(), [], False  # stacks by its habit and touches)
        while [ev.kind for ev in seen[-2:]] != [EventKind.TRAY_LOADED, EventKind.TOUCH]:
            time.sleep(0.002)  # the host's own work
            ev = device.wait_event(1.0)
            assert ev is not None, seen
            seen.append(ev)
            if ev.kind is EventKind.PILE_LIFTED and ev.pile is Pile.RIGHT and not warned:
                warned = True  # the other pile first: the machine warns at once
                device.show(Status(Signal.STACK, Pile.LEFT, 2, 2, warn=True))
        took = device.now() - asked
        assert 0 < seen[-1].at - asked <= took < 10, (took, seen)
        assert [ev.pile for ev in seen if ev.kind is EventKind.PILE_LIFTED][-2:] == [
            Pile.LEFT, Pile.RIGHT]  # corrected: the pile the light shows lifted first
        device.show(Status(Signal.READY))
        before = device.now()
        time.sleep(0.001)  # a thousand seconds at this speed, a look moves at most 60
        assert device.now() - before >= ScaledClock.IDLE_STEP
    finally:
        device.close()
