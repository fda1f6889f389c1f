"""Shared fixtures: every device backend behind one harness interface."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from hardware_sim import DealerHabit, SimDevice, parse_fault_specs
from shuffler.clock import VirtualClock
from shuffler.device import ShufflerDevice


@dataclass
class SimHarness:
    """Builds simulated devices on a virtual clock and reads the real card order."""

    name = "sim"

    def make(self, cards: int = 24, faults: Iterable[str] = (), habit: str = "instructed",
             seed: int = 7) -> ShufflerDevice:
        return SimDevice.for_cards(cards, faults=parse_fault_specs(faults),
                                   rng=random.Random(seed), habit=DealerHabit(habit),
                                   clock=VirtualClock())

    def pack(self, device: ShufflerDevice) -> list:
        """The cards in the tray, top first: what the machine really holds."""
        return list(device.mechanism.tray)

    def piles(self, device: ShufflerDevice) -> tuple[list, list]:
        return device.mechanism.piles


BACKENDS = {"sim": SimHarness}


@pytest.fixture(params=sorted(BACKENDS))
def harness(request):
    """One harness per backend; the contract tests run against each."""
    return BACKENDS[request.param]()


@pytest.fixture
def sim() -> SimHarness:
    return SimHarness()
