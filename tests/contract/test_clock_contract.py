"""One clock story (#33), the device's part: ``ShufflerDevice.now()`` (device time: the
clock the touch stamps, the restack lock-out, jams and misfeeds are measured on) never
goes back, on every backend, through everything a machine does in an evening: idle
turns, passes (read from inside them, card by card), a jam, its clear, a stop, a touch
and the lights. docs/architecture.md "One clock story" names every rule's clock."""

from __future__ import annotations

import random
from itertools import pairwise

from shuffler.core.planning import coin_plan
from shuffler.device.contract import Signal, Status

RNG = random.Random(33)


def test_device_time_never_goes_back(harness):
    dev = harness.make(24, ["jam:9"])
    readings: list[float] = []

    def read(*_: object) -> None:
        readings.append(dev.now())

    read()
    for _ in range(3):
        dev.idle(0.01)
        read()
    dev.show(Status(Signal.READY))
    read()
    dev.run_pass(coin_plan(24, RNG), on_card=read)  # jams at card 9
    read()
    harness.settle(dev)
    dev.clear_fault()
    read()
    dev.health()
    dev.drain_events()
    read()
    dev.run_pass(coin_plan(24, RNG), on_card=read)
    dev.stop()
    read()
    dev.idle(0.01)
    read()
    assert len(readings) > 20
    backwards = [(a, b) for a, b in pairwise(readings) if b < a]
    assert not backwards, backwards
    assert readings[-1] > readings[0]  # and it moves: passes took time
