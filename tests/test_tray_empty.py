"""An empty tray is refused before the motor, on every backend (it used to run the pass
and blame a double feed: ``Counted 0 of 24``)."""

from __future__ import annotations

import random

import pytest

from shuffler.control.controller import PassController
from shuffler.core.planning import coin_plan
from shuffler.errors import ERROR_KINDS, TrayEmptyError, error_kind
from shuffler.store.state import StateStore


def test_a_pass_on_an_empty_tray_is_refused_before_the_motor(harness, tmp_path):
    dev = harness.make(24)
    controller = PassController(dev, StateStore(tmp_path))
    first = controller.run_pass(coin_plan(24, random.Random(1)))
    assert first.ok and harness.pack(dev) == []  # dealt; nobody put the piles back
    before = controller.store.load()
    with pytest.raises(TrayEmptyError) as refused:
        controller.run_pass(coin_plan(24, random.Random(2)))
    assert "tray is empty" in str(refused.value) and refused.value.exit_code == 3
    assert error_kind(refused.value) == "tray_empty" and "tray_empty" in ERROR_KINDS
    after = controller.store.load()
    # nothing began: no pass id taken, no interrupted latch, the audit log as it was
    assert (after.next_pass_id, after.passes, after.fault, after.in_flight) == (
        before.next_pass_id, before.passes, None, None)
    assert len((tmp_path / "audit.jsonl").read_text().splitlines()) == 1
    assert not dev.health().motor_on
    left, right = harness.piles(dev)
    assert len(left) + len(right) == 24  # not a card moved
