"""A euchre hand: N passes, the dealer restacking between them, then the deal moves left.

Between passes the status LED asks the dealer to put one pile on the other
and touch for the next pass. The two pile sensors tell which pile went on top
(the one lifted first), or that they could not tell.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.core.mechanics import Pile
from shuffler.core.planning import Mode, PackTracker, Planner, RandomSource, make_planner
from shuffler.device.contract import (
    EventKind,
    FaultKind,
    InputEvent,
    PassReport,
    Signal,
    Status,
    stacking_from_lifts,
)
from shuffler.errors import DeviceTimeoutError
from shuffler.logs import get_logger
from shuffler.store.state import State

if TYPE_CHECKING:
    from fractions import Fraction

log = get_logger("shuffler.hand")

#: seconds of device time between ``on_tick`` calls while the hand waits for the dealer
TICK = 0.1
#: seconds of device time a hand's last pass waits for the dealer to lift the first pile
LAST_LIFT = 3.0
#: seconds after a pass ends during which a touch is the dealer restacking, not a start
RESTACK_LOCKOUT = 0.5

#: faults after which the hand goes on (the pass finished, only degraded)
CONTINUABLE = frozenset({FaultKind.COUNT_MISMATCH})


@dataclass(frozen=True)
class PassRecord:
    number: int  # 1-based within the hand
    report: PassReport
    stacking: Pile | None  # which pile the sensors saw go on top afterwards


@dataclass
class HandReport:
    number: int
    dealer: str
    next_dealer: str
    passes_planned: int
    mode: Mode
    records: list[PassRecord] = field(default_factory=list)
    completed: bool = False
    tracking: bool = True  # the controller still knows where every card is
    distance: Fraction | None = None  # total variation from uniform that holds
    distance_exact: bool = True  # False: ``distance`` is only an upper bound
    resumed_at: int | None = None  # the pass an interrupted hand resumed at
    departures: list[int] = field(default_factory=list)  # passes stacked off the light
    deck: str | None = None  # with two decks in turn: "A" or "B", the one shuffled

    @property
    def fault(self):
        return next((r.report.fault for r in reversed(self.records) if r.report.fault), None)


def pending_hand(state: State) -> dict | None:
    """The hand a crash, a fault or a missing touch left unfinished, if any."""
    return state.hand


def dealer_index(state: State, config: Config) -> int:
    """Whose deal it is: the stored seat, or the configured first dealer."""
    seats = config.table.seats
    if state.dealer is None:
        return seats.index(config.table.first_dealer)
    return state.dealer % len(seats)


class HandRunner:
    def __init__(self, controller: PassController, planner: Planner, config: Config) -> None:
        self.controller = controller
        self.device = controller.device
        self.planner = planner
        self.config = config
        self.tracker: PackTracker | None = None  # in memory only: it is as secret as a plan

    def run(
        self,
        passes: int,
        cards: int,
        *,
        on_pass_start: Callable[[int, int], None] | None = None,
        on_card: Callable[[int, int], None] | None = None,
        on_pass_done: Callable[[PassRecord], None] | None = None,
        on_stack: Callable[[Status], None] | None = None,
        on_tick: Callable[[], None] | None = None,
        on_ignored: Callable[[str], None] | None = None,
    ) -> HandReport:
        """``on_stack`` hears what the status LED is about to ask the dealer (which pile
        on top), before the dealer does it. ``on_tick()`` is called while a pass runs (by
        a device that does so) and at least every :data:`TICK` seconds while the hand
        waits for the dealer. ``on_ignored(why)`` hears of every touch the machine did not
        take (while a pass ran, or inside the restack lock-out): the dealer is told too."""
        self._on_ignored = on_ignored
        seats = self.config.table.seats
        state = self.controller.store.load()
        dealer = dealer_index(state, self.config)
        report = HandReport(
            state.hands_completed + 1,
            seats[dealer],
            seats[(dealer + 1) % len(seats)],
            passes,
            self.planner.mode,
        )
        if self.config.table.decks == 2:
            report.deck = "AB"[state.deck % 2]
        tracker = self.tracker = PackTracker(cards, self.device.info.feed)
        pending = state.hand
        first, resuming = 0, False
        if pending and (pending["passes"], pending["cards"]) == (passes, cards):
            resuming = True
            first = pending["done"]  # resume: the passes done are done, the rest follow
            tracker.order, tracker.from_start = None, False  # where the cards are is unknown
        self.controller.check_ready(cards, passes - first)
        self.controller.update(lambda s: setattr(s, "hand", {
            "number": report.number, "passes": passes, "cards": cards,
            "mode": self.planner.mode.value, "done": first}))
        # a hand left pending resumes, even at its first pass (a jam in pass 1): the
        # field says so whenever "resuming hand N at pass P" was said
        report.resumed_at = first + 1 if resuming else None
        for index in range(first, passes):
            number = index + 1
            if on_pass_start:
                on_pass_start(number, passes)
            plan = self.planner.plan(index, cards, tracker)
            context = {"hand": report.number, "pass": number, "mode": self.planner.mode.value}
            result = self.controller.run_pass(plan, on_card, passes_after=passes - number,
                                              context=context, on_tick=on_tick)
            ended = self._now()
            self._ignore_touches("a pass was running", tell=True)
            stop = result.fault is not None and result.fault.kind not in CONTINUABLE
            last = number == passes
            stacking = None
            if not stop:  # done, whatever happens while the dealer restacks
                self.controller.update(lambda s, n=number: s.hand and s.hand.update(done=n))
                ask = Status(Signal.STACK, plan.on_top, None if last else number + 1, passes)
                if on_stack:
                    on_stack(ask)
                self.controller.show(ask)
                try:
                    stacking = self._await_restack(number, passes, not last, ended, on_tick,
                                                   ask)
                except DeviceTimeoutError:  # no touch: the pass that ran is still reported
                    record = PassRecord(number, result, None)
                    report.records.append(record)
                    if on_pass_done:
                        on_pass_done(record)
                    raise
            tracker.after_pass(plan, result.counted, stacking)
            self.planner.observe(index, plan, result.counted, stacking)
            record = PassRecord(number, result, stacking)
            report.records.append(record)
            if on_pass_done:
                on_pass_done(record)
            if stop:
                break
        report.tracking = tracker.known and tracker.from_start
        report.distance = self.planner.distance(cards, first + len(report.records))
        report.distance_exact = self.planner.exact and report.resumed_at is None
        report.departures = list(self.planner.departures)
        report.completed = first + len(report.records) == passes and not (
            report.fault and report.fault.kind not in CONTINUABLE
        )
        if report.completed:

            def advance(s: State) -> None:
                s.hands_completed += 1
                s.dealer = (dealer + 1) % len(seats)
                s.hand = None
                if self.config.table.decks == 2:
                    s.deck = (s.deck + 1) % 2  # the other deck is shuffled next

            self.controller.update(advance)
            self.controller.show(Status(Signal.READY))
        log.info(
            "hand",
            number=report.number,
            dealer=report.dealer,
            passes=len(report.records),
            completed=report.completed,
        )
        return report

    def _now(self) -> float:
        return device_now(self.device)

    _on_ignored: Callable[[str], None] | None = None

    def _told(self, why: str, ask: Status | None = None) -> None:
        """A touch the machine did not take is told, never dropped in silence: the event
        (the page shows it) and, between passes, the prompt again (one short beep and
        the pile's colour: touch again)."""
        log.info("touch ignored", why=why)
        if self._on_ignored is not None:
            self._on_ignored(why)
        if ask is not None:
            self.controller.show(ask)

    def _ignore_touches(self, why: str, tell: bool = False) -> list[InputEvent]:
        """Drop the touches queued so far (they never start a pass); keep the rest."""
        kept = []
        for ev in self.device.drain_events():
            if ev.kind is not EventKind.TOUCH:
                kept.append(ev)
            elif tell:
                self._told(why)
            else:
                log.debug("touch ignored", why=why)
        return kept

    def _await_last_lifts(self, queued: list[InputEvent],
                          on_tick: Callable[[], None] | None) -> list[InputEvent]:
        """After the last pass no touch follows: wait (up to :data:`LAST_LIFT` seconds of
        device time) for the dealer to lift both piles, so a backend whose dealer acts a
        moment after the light (gpio, serial) sees the same stacking as one whose dealer
        acts at once (sim). Only one pile lifted by then: the sensors cannot tell."""
        lifts: list[InputEvent] = []
        start = self._now()
        while len({e.pile for e in [*queued, *lifts]}) < 2:
            left = LAST_LIFT - (self._now() - start)
            if left <= 0:
                break
            ev = self.device.wait_event(min(TICK, left))
            if on_tick is not None:
                on_tick()
            if ev is not None and ev.kind is EventKind.PILE_LIFTED:
                lifts.append(ev)
        return lifts

    def _await_restack(self, done: int, of: int, wait_touch: bool, ended: float,
                       on_tick: Callable[[], None] | None = None,
                       ask: Status | None = None) -> Pile | None:
        """Collect pile lifts; between passes also wait for the touch that starts the next.
        A touch within :data:`RESTACK_LOCKOUT` seconds of the pass's end (the dealer is
        still restacking) or with the tray empty starts nothing."""
        lifts = [e for e in self._ignore_touches("the dealer is restacking")
                 if e.kind is EventKind.PILE_LIFTED] if not wait_touch else []
        if not wait_touch:
            lifts += self._await_last_lifts(lifts, on_tick)
        timeout = self.config.hand.touch_timeout_s
        since = self._now()
        while wait_touch:
            if self.controller.stop_requested:  # the next pass never starts: the hand ends
                break
            left = timeout - (self._now() - since)
            if left <= 1e-9:  # never a wait too short for the clock to move
                raise DeviceTimeoutError(
                    f"No touch within {timeout:.0f} s after pass {done} of {of}: the hand "
                    "stops here. Run the hand again when ready."
                )
            ev = self.device.wait_event(min(TICK, left))
            if on_tick is not None:
                on_tick()
            if ev is None:
                continue
            if ev.kind is EventKind.PILE_LIFTED:
                lifts.append(ev)
            elif ev.kind is EventKind.TOUCH:
                if too_soon(self.device, ev, ended, lifts):
                    self._told("too soon after the pass: the dealer is still restacking", ask)
                elif not self.device.health().tray_loaded:
                    log.warning("touch ignored: the tray is empty; put the pack in the tray, "
                                "then touch", after_pass=done)
                else:
                    break
        if wait_touch:
            self._ignore_touches("a second touch for the same pass")
        stacking = stacking_from_lifts(lifts, self.config.mechanism.both_window_s)
        log.debug("restacked", after_pass=done, on_top=stacking.name if stacking else None)
        return stacking


def too_soon(device: object, touch: InputEvent, ended: float,
             lifts: list[InputEvent]) -> bool:
    """A touch within :data:`RESTACK_LOCKOUT` of the pass's end (``ended``,
    :func:`device_now`), measured on the device's clock. A serial MCU stamps its inputs
    in its own time but has no clock the host can read, so there the first pile lifted
    since the pass is the mark: a touch that far after it on the MCU's clock is
    certainly past the lock-out (however fast a simulated MCU runs); else host time."""
    if getattr(device, "clock", None) is None and lifts and \
            touch.at - lifts[0].at >= RESTACK_LOCKOUT:
        return False
    return device_now(device) - ended < RESTACK_LOCKOUT


def device_now(device: object) -> float:
    """Device time when the device keeps a clock (its events are stamped in it), so the
    restack lock-out is the same however fast a simulated machine runs; else the host's."""
    clock = getattr(device, "clock", None)
    return clock.now() if clock is not None else time.monotonic()


def play_hand(controller: PassController, config: Config, *, passes: int, cards: int,
              mode: Mode, rng: RandomSource, **callbacks) -> HandReport:
    """Run a hand, or finish the one a crash, a fault or a missing touch left pending
    (its passes, cards and mode win over the ones asked for)."""
    pending = pending_hand(controller.store.load())
    if pending:
        passes, cards, mode = pending["passes"], pending["cards"], Mode(pending["mode"])
        log.info("resuming hand", number=pending["number"], at_pass=pending["done"] + 1)
    runner = HandRunner(controller, make_planner(mode, passes, rng), config)
    return runner.run(passes, cards, **callbacks)
