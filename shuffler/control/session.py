"""The user-facing commands on one device, as dicts in and dicts out.

The CLI runs a :class:`Session` in-process when no service answers; the service
runs one for all its clients. Either way the results and the progress events are
the same dicts, so the output is the same.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from shuffler.config import Config
from shuffler.constants import EXIT_FAULT, EXIT_OK
from shuffler.control.controller import PassController
from shuffler.control.hand import HandTerms, hand_terms, play_hand
from shuffler.control.prompts import stack_prompt, wrong_pile_prompt
from shuffler.control.reports import (
    battery_dict,
    exit_code,
    hand_dict,
    last_hand,
    pass_dict,
    record_dict,
    status_dict,
)
from shuffler.control.scorebook import ScoreBook
from shuffler.control.signals import ENDINGS, ending
from shuffler.core.planning import Mode, PackTracker, RandomSource, make_planner
from shuffler.core.score import Game
from shuffler.device.contract import PassReport, ShufflerDevice, Signal, Status

Event = Callable[[dict[str, Any]], None]
Tick = Callable[[], None]


def _quiet(event: dict[str, Any]) -> None:
    pass




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


def stack_event(status: Status, report: PassReport | None = None,
                number: int | None = None) -> dict[str, Any]:
    """Between passes: which pile goes on top, in the words the page uses too, and the
    pass just dealt (before the restack: its stacking not yet known), so its report can
    be said before the prompt; with ``warning``, the other pile was lifted first."""
    last = status.next_pass is None
    event: dict[str, Any] = {
        "event": "stack",
        "on_top": status.on_top.name.lower() if status.on_top is not None else None,
        "next_pass": status.next_pass, "of": status.of,
        "prompt": stack_prompt(status.on_top, last)}
    if report is not None and number is not None:
        event["pass"] = pass_dict(report, number)
    if status.warn:
        event.update(warning=True, prompt=wrong_pile_prompt(status.on_top))
    return event


class Session:
    def __init__(self, controller: PassController, config: Config, rng: RandomSource) -> None:
        self.controller = controller
        self.config = config
        self.rng = rng

    @property
    def device(self) -> ShufflerDevice:
        return self.controller.device

    def do_pass(self, cards: int | None = None, mode: str | None = None,
                on_event: Event = _quiet, on_tick: Tick | None = None) -> dict[str, Any]:
        cards = cards or self.config.hand.cards
        planner = make_planner(Mode(mode) if mode else self.config.hand.mode, 1, self.rng)
        on_event({"event": "pass_start", "number": 1, "of": 1})
        plan = planner.plan(0, cards, PackTracker(cards, self.device.info.feed))
        with motor_off_on_exit(self.device):
            report = self.controller.run_pass(
                plan, lambda c, e: on_event({"event": "card", "counted": c, "expected": e}),
                context={"mode": planner.mode.value}, on_tick=on_tick)
        if report.fault is None:  # done: the light goes back to ready, not left white
            self.controller.show(Status(Signal.READY))
        result = pass_dict(report)
        return {"device": self.device.info.to_dict(), "pass": result,
                "exit": exit_code(result["fault"])}

    def do_hand(self, passes: int | None = None, cards: int | None = None,
                mode: str | None = None, on_event: Event = _quiet,
                on_tick: Tick | None = None) -> dict[str, Any]:
        """A hand; ``on_tick()`` is called while it runs, also while it waits for a touch."""
        terms = hand_terms(self.controller.store.load(), self.config, passes, cards, mode)
        if pending := terms.pending:
            on_event({"event": "resume", "number": pending["number"],
                      "at_pass": pending["done"] + 1, "of": terms.passes})
        with motor_off_on_exit(self.device):
            hand = self._hand(terms, on_event, on_tick)
        result = hand_dict(hand)
        self.controller.update(lambda s: setattr(s, "last_hand", last_hand(result)))
        # a hand that finished is done, even with a degraded (double-fed) pass in it: its
        # report names the pass and the distance that still holds (README, exit codes)
        return {"device": self.device.info.to_dict(), "hand": result,
                "exit": EXIT_OK if result["completed"] else exit_code(result["fault"])}

    def _hand(self, terms: HandTerms, on_event: Event, on_tick: Tick | None):
        of = terms.passes
        return play_hand(
            self.controller, self.config, terms, rng=self.rng,
            on_pass_start=lambda n, of: on_event({"event": "pass_start", "number": n, "of": of}),
            on_card=lambda c, e: on_event({"event": "card", "counted": c, "expected": e}),
            on_stack=lambda st, report: on_event(stack_event(
                st, report, (st.next_pass - 1) if st.next_pass else st.of)),
            on_pass_done=lambda r: on_event({"event": "pass", "pass": record_dict(r),
                                             "of": of}),
            on_tick=on_tick,
            on_ignored=lambda why: on_event({"event": "touch_ignored", "why": why}))

    def do_clear(self) -> dict[str, Any]:
        had = self.controller.latched_fault()
        cleared = self.controller.clear()
        still = None if cleared else self.device.health().fault
        return {"cleared": cleared, "cleared_fault": had.to_dict() if had else None,
                **({"still": still.to_dict()} if still is not None else {}),
                "exit": EXIT_OK if cleared else EXIT_FAULT}

    # -- the score (no device needed) -----------------------------------------------
    @property
    def scores(self) -> ScoreBook:
        return ScoreBook(self.controller.store, self.config)

    def game(self) -> Game:
        return self.scores.game()

    def score(self) -> dict[str, Any]:
        return self.scores.show()

    def status(self) -> dict[str, Any]:
        return status_dict(self.controller, self.config)

    def battery(self, cards: int | None = None) -> dict[str, Any]:
        return battery_dict(self.controller, self.config, cards or self.config.hand.cards)
