"""A pass that sees its own clock jump (its process frozen: SIGSTOP on a Pi, the motor
still turning) stops the motor and latches a fault before anything else."""

from __future__ import annotations

import random

import pytest

from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
from shuffler.control.controller import PassController
from shuffler.core.planning import coin_plan
from shuffler.device.contract import FaultKind, FaultLimits
from shuffler.device.engine import Card, Done, Motor, PassEngine
from shuffler.errors import FaultLatchedError
from shuffler.store.state import StateStore

FREEZE_AT, FREEZE_FOR = 1.5, 3.0


@pytest.fixture
def rig():
    r = GpioRig.for_cards(24, rng=random.Random(3))
    dev = RiggedGpioDevice(r)
    yield r, dev
    dev.close()


def _freeze(rig: GpioRig) -> list[float]:
    """Mid-pass, the device's loop gets no turn for FREEZE_FOR seconds of its clock while
    the machine goes on (the motor turns, cards cross the beam and are queued)."""
    woke: list[float] = []

    def frozen() -> None:
        rig.clock.sleep(FREEZE_FOR)  # inside the clock's action: the loop waits meanwhile
        woke.append(rig.clock.now())
    rig.clock.at(rig.clock.now() + FREEZE_AT, frozen)
    return woke


def test_a_frozen_gpio_pass_stops_the_motor_on_waking_and_latches(rig):
    r, dev = rig
    woke = _freeze(r)
    report = dev.run_pass(coin_plan(24, random.Random(1)))
    assert report.fault is not None and report.fault.kind is FaultKind.INTERRUPTED
    assert "not watched for 3.0 s" in report.fault.message
    assert report.counted < 24 and report.seconds == pytest.approx(FREEZE_AT + FREEZE_FOR,
                                                                   abs=0.06)
    assert not r.forward() and not dev.health().motor_on
    # the motor went off the moment the loop woke, before anything it queued was looked at
    assert r.pins["motor"]._last_change == pytest.approx(woke[0], abs=1e-6)
    assert len(r.landed) > report.counted  # cards went by unobserved, uncounted
    assert dev.health().fault is not None  # latched on the device
    with pytest.raises(FaultLatchedError):
        dev.run_pass(coin_plan(24, random.Random(2)))


def test_the_controller_keeps_the_frozen_pass_latched(rig, tmp_path):
    r, dev = rig
    _freeze(r)
    controller = PassController(dev, StateStore(tmp_path))
    report = controller.run_pass(coin_plan(24, random.Random(1)))
    assert report.fault.kind is FaultKind.INTERRUPTED
    assert controller.latched_fault().kind is FaultKind.INTERRUPTED
    assert not r.forward()


def test_a_gpio_pass_that_is_never_frozen_is_not_cut_off(rig):
    r, dev = rig
    report = dev.run_pass(coin_plan(24, random.Random(1)))
    assert report.ok and r.pins["motor"]._last_change > FREEZE_AT + FREEZE_FOR


def test_the_engine_cuts_a_pass_off_only_past_its_blind_limit():
    limits = FaultLimits()
    eng = PassEngine([0, 1, 0], limits)
    eng.start(0.0)
    assert eng.blind_limit == max(limits.jam_seconds, limits.misfeed_seconds)
    assert eng.awake(0.5) == [] and not eng.done
    eng.beam(True, 0.6)  # a card in the beam
    assert eng.awake(0.5 + eng.blind_limit) == [] and not eng.done  # just within
    out = eng.awake(0.5 + 2 * eng.blind_limit + 0.01)
    assert out[0] == Motor(0.0) and isinstance(out[-1], Done) and out[-1].latch
    assert not any(isinstance(c, Card) for c in out)  # nothing counted on waking
    assert eng.beam(False, 3.0) == [] and eng.report.counted == 0  # and nothing after
