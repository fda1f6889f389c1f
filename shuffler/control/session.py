"""The user-facing commands on one device, their results frozen records.

The CLI runs a :class:`Session` in-process when no service answers; the service
runs one for all its clients. Either way the results (:mod:`shuffler.control.reports`)
and the progress events (:mod:`shuffler.control.events`) are the same records, so the
output is the same.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

from shuffler.config import Config
from shuffler.constants import EXIT_FAULT, EXIT_OK
from shuffler.control.controller import PassController
from shuffler.control.events import CardCounted, Emit, PassStarted, quiet
from shuffler.control.hand import HandTerms, hand_terms, play_hand
from shuffler.control.reports import (
    Cleared,
    HandAnswer,
    LastHand,
    PassAnswer,
    PassResult,
    exit_code,
)
from shuffler.control.scorebook import ScoreBook
from shuffler.control.signals import ENDINGS, ending
from shuffler.core.planning import Mode, PackTracker, RandomSource, make_planner
from shuffler.device.contract import ShufflerDevice, Signal, Status

Tick = Callable[[], None]


@contextlib.contextmanager
def motor_off_on_exit(device: ShufflerDevice) -> Iterator[None]:
    """While the machine may move: an ending signal that nothing else handles unwinds the
    pass (SystemExit 128+N; KeyboardInterrupt for SIGINT), whose ``finally`` stops the
    motor, instead of killing the process where it stands; leaving the interpreter stops
    it too. The handler itself touches no pin: it runs in the middle of whatever the main
    thread was doing, perhaps holding a pin's lock. A handler already installed (the
    service's, the CLI's) is left alone; signals are only handled in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    taken = {}
    for sig in ENDINGS:
        current = signal.getsignal(sig)
        if current in (signal.SIG_DFL, signal.default_int_handler):
            taken[sig] = current
            signal.signal(sig, ending)
    atexit.register(device.stop)
    try:
        yield
    finally:
        atexit.unregister(device.stop)
        for sig, handler in taken.items():
            signal.signal(sig, handler)


class Session:
    def __init__(self, controller: PassController, config: Config, rng: RandomSource) -> None:
        self.controller = controller
        self.config = config
        self.rng = rng

    @property
    def device(self) -> ShufflerDevice:
        return self.controller.device

    def do_pass(self, cards: int | None = None, mode: str | None = None,
                on_event: Emit = quiet, on_tick: Tick | None = None) -> PassAnswer:
        cards = cards or self.config.hand.cards
        planner = make_planner(Mode(mode) if mode else self.config.hand.mode, 1, self.rng)
        on_event(PassStarted(1, 1))
        plan = planner.plan(0, cards, PackTracker(cards, self.device.info.feed))
        with motor_off_on_exit(self.device):
            report = self.controller.run_pass(
                plan, lambda c, e: on_event(CardCounted(c, e)),
                context={"mode": planner.mode.value}, on_tick=on_tick)
        if report.fault is None:  # done: the light goes back to ready, not left white
            self.controller.show(Status(Signal.READY))
        return PassAnswer(self.device.info, PassResult.of(report), exit_code(report.fault))

    def terms(self, passes: int | None = None, cards: int | None = None,
              mode: str | None = None) -> HandTerms:
        """The hand's terms, as :func:`~shuffler.control.hand.hand_terms` resolves them."""
        return hand_terms(self.controller.store.load(), self.config, passes, cards, mode)

    def do_hand(self, terms: HandTerms, on_event: Emit = quiet,
                on_tick: Tick | None = None) -> HandAnswer:
        """A hand on ``terms`` (:meth:`terms`); ``on_tick()`` is called while it runs,
        also while it waits for a touch."""
        with motor_off_on_exit(self.device):
            hand = play_hand(self.controller, self.config, terms, rng=self.rng,
                             emit=on_event, on_tick=on_tick)
        self.controller.update(lambda s: setattr(s, "last_hand", LastHand.of(hand).to_json()))
        # a hand that finished is done, even with a degraded (double-fed) pass in it: its
        # report names the pass and the distance that still holds (README, exit codes)
        return HandAnswer(self.device.info, hand,
                          EXIT_OK if hand.completed else exit_code(hand.fault))

    def do_clear(self) -> Cleared:
        had = self.controller.latched_fault()
        cleared = self.controller.clear()
        still = None if cleared else self.device.health().fault
        return Cleared(cleared, had, still, EXIT_OK if cleared else EXIT_FAULT)

    # -- the score (no device needed) -----------------------------------------------
    @property
    def scores(self) -> ScoreBook:
        return ScoreBook(self.controller.store, self.config)
