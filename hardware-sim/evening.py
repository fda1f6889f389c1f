"""An evening of hands on the real controller: :class:`~shuffler.control.hand.HandRunner`
and :class:`~shuffler.control.controller.PassController` on the simulated machine, the
simulated dealer stacking by a habit and answering the warning its own way, stopping the
hand at a stack it dislikes when told to (the next hand resumes it, as the service does).

For the studies of docs/mixing.md ("The last stack"): each hand's final order (starting
positions of that hand, top first), its label, and the machine's seconds. The battery
gauge is left out, the state kept in memory and the audit log (in /dev/shm) kept to the
hand in progress: none bears on a label, and with them a hand costs about 0.4 s of the
host's time instead of about 10 ms (the log kept all evening adds about 5 ms a hand for
every 1,000 hands before it).

    >>> import random
    >>> hands = list(evening(DealerHabit.LAST_CARD, Answer(), 2, random.Random(1)))
    >>> [(sorted(h.order) == list(range(24)), h.label.exact) for h in hands]
    [(True, True), (True, True)]
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.hand import HandRunner
from shuffler.core.cards import standard_pack
from shuffler.core.labels import Label
from shuffler.core.planning import Mode, make_planner
from shuffler.device.clock import VirtualClock
from shuffler.device.contract import BatteryReading, Signal, Status
from shuffler.store.state import State, StateStore

from .battery import SimBattery
from .dealer import Answer, DealerHabit
from .device import SimDevice


class _Gaugeless(SimDevice):
    """The simulated machine without a battery gauge (no estimate before each pass), on
    a battery that never runs down (a mains supply: every pass at the same speed)."""

    def battery(self) -> BatteryReading:
        return BatteryReading(0.0, False, measured=False)


class _MemoryStore(StateStore):
    """The state in memory (the audit log still on disk, in a scratch folder)."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self._state = State()

    def load(self) -> State:
        return self._state

    def save(self, state: State) -> None:
        self._state = state


@dataclass(frozen=True)
class Hand:
    order: list[int]  # the final order, as positions at the hand's start, top first
    label: Label
    seconds: float  # the machine's time from the first touch to the last stack seen
    stops: int  # how often the dealer stopped it (each resumed on the same plan)


def evening(habit: DealerHabit, answer: Answer | None, hands: int, rng: random.Random,
            *, cards: int = 24, passes: int = 5, mode: Mode = Mode.PLANNED) -> Iterator[Hand]:
    """``hands`` hands in a row of one dealer (``answer``: what it does at a warning; with
    ``stops_high`` it stops the hand at a stack whose light's pile shows a high card, once
    a stack, and starts it again). ``rng`` seeds the dealer and the planner."""
    high = {card: 2 * i >= cards for i, card in enumerate(standard_pack(cards))}
    folder = Path(tempfile.mkdtemp(prefix="evening-", dir=_scratch()))
    device = _Gaugeless.for_cards(cards, rng=random.Random(rng.random()), clock=VirtualClock(),
                                  habit=habit, battery=SimBattery(capacity_scale=1e9))
    device.dealer.answer = answer
    device.dealer.high = lambda card: bool(high.get(card))  # type: ignore[call-overload]
    controller = PassController(device, _MemoryStore(folder))
    config = Config()
    stopped: set[tuple[int, int | None]] = set()
    hands_done: list[Hand] = []
    show = device.show

    def dislikes(status: Status) -> None:
        """The dealer walks away from a stack it dislikes: a stop, and nothing stacked."""
        piles = device.mechanism.piles
        if (answer is not None and answer.stops_high and status.signal is Signal.STACK
                and not status.warn and status.on_top is not None):
            key = (len(hands_done), status.next_pass)
            pile = piles[status.on_top]
            if key not in stopped and pile and high[pile[-1]]:
                stopped.add(key)
                controller.request_stop()
                return
        show(status)

    device.show = dislikes  # type: ignore[method-assign]
    try:
        while len(hands_done) < hands:
            _forget_hands_before(controller)
            yield _hand(controller, device, mode, passes, cards, rng, config, hands_done)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _forget_hands_before(controller: PassController) -> None:
    """The audit log down to the hand about to start. Each pass checks the log for its
    own id (never a finished hand's: ids only grow), a scan of the whole file: kept for
    an evening, the log makes the 40,000th hand cost ten times the first."""
    if controller.audit.path.exists():
        os.truncate(controller.audit.path, 0)


def _hand(controller: PassController, device: SimDevice, mode: Mode, passes: int,
          cards: int, rng: random.Random, config: Config, hands_done: list[Hand]) -> Hand:
    """One hand to the end, resumed on its plan after each stop."""
    start = list(device.mechanism.tray)
    began, stops = device.now(), 0
    while True:
        controller.begin_job()
        planner = make_planner(mode, passes, random.Random(rng.random()))
        report = HandRunner(controller, planner, config).run(passes, cards)
        controller.end_job()
        if not report.paused:
            break
        stops += 1
    assert report.completed, report
    where = {card: i for i, card in enumerate(start)}
    order = [where[card] for card in device.mechanism.tray]
    hands_done.append(Hand(order, Label(report.distance_exact, report.distance),
                           device.now() - began, stops))
    return hands_done[-1]


def _scratch() -> str | None:
    """A folder in memory for the audit log when there is one (/dev/shm)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None
