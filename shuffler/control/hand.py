"""A euchre hand: N passes, the dealer restacking between them, then the deal moves left.

Between passes the status LED asks the dealer to put one pile on the other
and touch for the next pass. The two pile sensors tell which pile went on top
(the one lifted first). Every stack is held to the light, the last one included: no
pass starts, and the hand is not finished (not labelled, the deal does not move),
until the sensors have seen the light's pile lifted first and the other after it. A
stop or a missing touch pauses the hand: its plan stays in this process's memory
(never on disk, never in a log) and the next ``hand`` resumes it where it stood; a
hand whose plan was lost (the process ended) is re-planned and carries the bound that
holds against any dealer (docs/mixing.md, "The last stack").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.events import (
    CardCounted,
    Emit,
    PassReported,
    PassStarted,
    Resumed,
    StackAsked,
    TouchIgnored,
    quiet,
)
from shuffler.control.prompts import stack_prompt, wrong_pile_prompt
from shuffler.control.reports import HandResult, PassResult, distance_note, stops, turn
from shuffler.control.touch import PASS_RUNNING, Ignore, Machine, Start
from shuffler.core.labels import Label, hand_label
from shuffler.core.mechanics import Pile, Stacked
from shuffler.core.planning import (
    Mode,
    PackTracker,
    PassPlan,
    Planner,
    RandomSource,
    make_planner,
)
from shuffler.device.contract import (
    EventKind,
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
    from shuffler.device.contract import Fault

log = get_logger("shuffler.hand")

#: seconds of device time between ``on_tick`` calls while the hand waits for the dealer
TICK = 0.1

class Lifts:
    """The pile lifts after a pass, as the sensors see them, against the light's ask.

    An *attempt* is the lifts since the light asked, or since the last warning. When an
    attempt's first lift is the other pile than the light shows, or the other pile
    follows the first within ``both_window`` (both at once: the sensors cannot tell), the
    machine warns at once (:meth:`lift` answers ``"warn"``) and a new attempt begins: the
    dealer puts the piles back and lifts the one the light shows. The warning stands
    until an attempt lifts the pile the light shows first and the other one at least
    ``both_window`` seconds later (``"right"``): the stack then matches the light. Pure.
    """

    def __init__(self, ask: Status, both_window: float) -> None:
        assert ask.on_top is not None
        self.ask, self.asked, self.both_window = ask, ask.on_top, both_window
        self.seen: list[InputEvent] = []  # every lift since the light asked
        self.attempt: list[InputEvent] = []
        #: device time of the wrong first lift the stack has not yet answered (None: none)
        self.warned: float | None = None
        self.ever_warned = False

    def lift(self, ev: InputEvent) -> str | None:
        """``"warn"``: the other pile lifted first, say so now; ``"right"``: the stack now
        matches the light after a warning; None: nothing to say."""
        self.seen.append(ev)
        first = self.attempt[0] if self.attempt else None
        together = (first is not None and len(self.attempt) == 1 and ev.pile is not first.pile
                    and ev.at - first.at < self.both_window)
        if (first is None and ev.pile is not self.asked) or together:
            self.warned, self.ever_warned, self.attempt = ev.at, True, []
            return "warn"
        self.attempt.append(ev)
        if self.warned is not None and \
                stacking_from_lifts(self.attempt, self.both_window) is self.asked:
            self.warned = None
            return "right"
        return None

    @property
    def light(self) -> Status:
        """What the light shows now: the ask, or its warning."""
        return replace(self.ask, warn=True) if self.warned is not None else self.ask

    @property
    def settled(self) -> bool:
        """No warning stands and both piles have been lifted."""
        return self.warned is None and len({e.pile for e in self.seen}) == 2

    @property
    def stacking(self) -> Pile | None:
        """The pile that went on top: the light's after a correction, else as the
        sensors saw every lift (the first lift of each pile)."""
        if self.ever_warned and self.warned is None:
            return self.asked
        return stacking_from_lifts(self.seen, self.both_window)

    @property
    def stacked(self) -> Stacked:
        """The pass's record: how the stacking the sensors saw came about."""
        if self.stacking is None:
            return Stacked.UNKNOWN
        if self.stacking is self.asked:
            return Stacked.CORRECTED if self.ever_warned else Stacked.FOLLOWED
        return Stacked.IGNORED


def stack_event(status: Status, report: PassReport | None = None) -> StackAsked:
    """Between passes: which pile goes on top, in the words the page uses too, and the
    pass just dealt (``report``); with ``warning``, the other pile was lifted first."""
    prompt = (wrong_pile_prompt(status.on_top) if status.warn
              else stack_prompt(status.on_top, status.next_pass is None))
    number = status.next_pass - 1 if status.next_pass else status.of
    dealt = None if report is None or number is None else PassResult.of(report, number)
    return StackAsked(status.on_top.name.lower() if status.on_top is not None else None,
                      status.next_pass, status.of, prompt, dealt, True if status.warn else None)


@dataclass
class Paused:
    """A hand stopped (or left waiting for the dealer) with its plan intact, in memory
    only (:attr:`PassController.paused`): the next ``hand`` resumes it with the same
    plan, so a stop is no way to trade a hand for another. ``restack``: the pass whose
    stack the sensors had not yet seen (its index, plan and count), asked for again."""

    number: int
    passes: int
    cards: int
    planner: Planner
    tracker: PackTracker
    restack: tuple[int, PassPlan, int] | None = None
    plan_lost: bool = False  # its plan was itself drawn after a plan was lost

    def __repr__(self) -> str:  # never show a plan
        return f"Paused(hand={self.number}, passes={self.passes}, cards={self.cards})"


@dataclass(frozen=True)
class HandTerms:
    """A hand's passes, cards and mode, resolved once (:func:`hand_terms`)."""

    passes: int
    cards: int
    mode: Mode
    #: the hand a crash, a fault or a missing touch left unfinished (finished first)
    pending: dict | None = None


def hand_terms(state: State, config: Config, passes: int | None = None,
               cards: int | None = None, mode: Mode | str | None = None) -> HandTerms:
    """A pending hand's own terms (they win over the ones asked for), else the ones
    asked for, else the config's: ``[hand] cards``, its passes for them, its mode."""
    if pending := state.hand:
        return HandTerms(pending["passes"], pending["cards"], Mode(pending["mode"]), pending)
    cards = cards or config.hand.cards
    return HandTerms(passes or config.hand.passes_for(cards), cards,
                     Mode(mode) if mode else config.hand.mode)


class HandRunner:
    def __init__(self, controller: PassController, planner: Planner, config: Config) -> None:
        self.controller = controller
        self.device = controller.device
        self.planner = planner
        self.config = config
        self.tracker: PackTracker | None = None  # in memory only: it is as secret as a plan
        self.emit: Emit = quiet
        self.on_tick: Callable[[], None] | None = None
        #: a pass dealt whose stack the sensors have not yet seen (see :class:`Paused`)
        self._unstacked: tuple[int, PassPlan, int] | None = None

    def run(self, passes: int, cards: int, emit: Emit = quiet,
            on_tick: Callable[[], None] | None = None) -> HandResult:
        """``emit`` hears the hand's progress: each pass's start, cards and report, and
        each :class:`StackAsked` before the dealer sees the light (the first after a pass
        with the pass just dealt: its report with the stacking follows the restack), and
        every touch the machine did not take (the dealer is told too). ``on_tick()`` is
        called while a pass runs (by a device that does so) and at least every
        :data:`TICK` seconds while the hand waits for the dealer."""
        self.emit, self.on_tick = emit, on_tick
        first = self._begin(passes, cards)
        try:
            if self._unstacked is not None:  # resumed: the stack it stopped at, first
                # what the dealer did while the machine was paused was not watched: the
                # stack is asked for again, and lifts and touches from before count for
                # nothing; the pass was reported when it ran
                self.device.drain_events()
                self._stacked(self._unstacked[0], passes, None)
            for index in range(first, passes):
                if self._unstacked is not None and not self.controller.stop_requested:
                    break  # (a stack not seen is left only by a stop)
                # after a stop, the next pass is refused and reported ``stopped``
                done = self._pass(index, passes, cards)
                self._reported(done, passes)
                if stops(done.fault):
                    break
        except DeviceTimeoutError:
            self._pause(passes, cards)
            raise
        return self._finish(first, passes, cards)

    def _reported(self, done: PassResult, passes: int) -> None:
        self.reports.append(done)
        self.emit(PassReported(done, passes))

    def _pause(self, passes: int, cards: int) -> None:
        """Keep the plan in memory for the next ``hand`` when the cards are where the
        controller knows them (a stop between passes, a missing touch; not a pass cut
        off, whose cards lie who knows where)."""
        assert self.tracker is not None
        if not self.tracker.known:
            return
        self.paused = True
        self.controller.paused = Paused(self.number, passes, cards, self.planner,
                                        self.tracker, self._unstacked, self.plan_lost)

    def _begin(self, passes: int, cards: int) -> int:
        """The pass the hand starts at (a pending hand resumes)."""
        state = self.controller.store.load()
        self.number = state.hands_completed + 1
        self.turn = turn(state, self.config)  # whose deal: it moves on when the hand is done
        self.reports: list[PassResult] = []  # the passes run so far
        #: resumed without its plan (a pass cut off, or the process that held it ended):
        #: re-planned, and bound by what holds against any dealer
        self.plan_lost = False
        #: stopped or left waiting with its plan held in memory: the next hand resumes it
        self.paused = False
        tracker = self.tracker = PackTracker(cards, self.device.info.feed)
        pending = state.hand
        first, resuming = 0, False
        paused, self.controller.paused = self.controller.paused, None  # taken once
        if pending and (pending["passes"], pending["cards"]) == (passes, cards):
            resuming = True
            first = pending["done"]  # resume: the passes done are done, the rest follow
            if isinstance(paused, Paused) and (paused.number, paused.passes, paused.cards) == (
                    pending["number"], passes, cards) and paused.planner.mode is self.planner.mode:
                # the same plan, held in memory: as if the hand had never stopped
                self.planner, self.tracker, self._unstacked = (
                    paused.planner, paused.tracker, paused.restack)
                self.plan_lost = paused.plan_lost
            else:  # the plan is lost: re-planned from an order nobody tracked
                self.plan_lost = True
                tracker.order, tracker.from_start = None, False
        if self._unstacked is None:  # a resume at a stack moves nothing first
            self.controller.check_ready(cards, passes - first, what="hand")
        self.controller.update(lambda s: setattr(s, "hand", {
            "number": self.number, "passes": passes, "cards": cards,
            "mode": self.planner.mode.value, "done": first}))
        # a hand left pending resumes, even at its first pass (a jam in pass 1): the
        # field says so whenever "resuming hand N at pass P" was said
        self.resumed_at: int | None = first + 1 if resuming else None
        return first

    def _pass(self, index: int, passes: int, cards: int) -> PassResult:
        """One pass and the restack after it (none after a fault that stops the hand)."""
        assert self.tracker is not None
        number = index + 1
        self.emit(PassStarted(number, passes))
        plan = self.planner.plan(index, cards, self.tracker)
        context = {"hand": self.number, "pass": number, "mode": self.planner.mode.value}
        result = self.controller.run_pass(plan, lambda c, e: self.emit(CardCounted(c, e)),
                                          passes_after=passes - number, context=context,
                                          on_tick=self.on_tick)
        self._ignore_touches(PASS_RUNNING)
        if stops(result.fault):  # cut off: no restack follows, the cards lie unknown
            if result.counted or result.seconds:  # (not stopped before it started)
                self.tracker.after_pass(plan, result.counted, None)
                self.planner.observe(index, plan, result.counted, None)
            return PassResult.of(result, number)
        # done, whatever happens while the dealer restacks
        self.controller.update(lambda s, n=number: s.hand and s.hand.update(done=n))
        self._unstacked = (index, plan, result.counted)
        try:
            lifts = self._stacked(index, passes, result)
        except DeviceTimeoutError:  # no touch: the pass that ran is still reported
            self._reported(PassResult.of(result, number), passes)
            raise
        if lifts is None:  # stopped before the stack was seen: paused at it
            return PassResult.of(result, number)
        return PassResult.of(result, number, lifts.stacking, lifts.stacked)

    def _stacked(self, index: int, passes: int, result: PassReport | None) -> Lifts | None:
        """Ask for pass ``index``'s stack and follow it to the light (None: a stop came
        first); a stack seen is told to the tracker and the planner."""
        assert self._unstacked is not None and self.tracker is not None
        _, plan, counted = self._unstacked
        number = index + 1
        ask = Status(Signal.STACK, plan.on_top, None if number == passes else number + 1,
                     passes)
        lifts = self._restack(ask, result, number, passes)
        if not lifts.settled:
            return None
        self._unstacked = None
        self.tracker.after_pass(plan, counted, lifts.stacking)
        self.planner.observe(index, plan, counted, lifts.stacking)
        return lifts

    def _finish(self, first: int, passes: int, cards: int) -> HandResult:
        """The hand's result; a completed hand moves the deal on and shows ready."""
        assert self.tracker is not None
        seats = self.config.table.seats
        dealer, dealt_by, next_dealer, deck = self.turn
        reports = tuple(self.reports)
        fault: Fault | None = next((r.fault for r in reversed(reports) if r.fault), None)
        done = first + len(reports)
        completed = done == passes and self._unstacked is None and not stops(fault)
        if not completed:
            self._pause(passes, cards)
        # exact only for a hand finished on its own plan, every stack seen to match the
        # light; a hand not finished has no label (its distance unknown)
        label = hand_label(self.planner.exact, self.planner.distance(cards, done),
                           cards if self.plan_lost else None) if completed else Label(False, None)
        # a pass a fault stopped was never restacked: no departure (a jam is a jam)
        unfinished = {r.number for r in reports if r.stacked is None}
        departures = tuple(d for d in self.planner.departures if d not in unfinished)
        if completed:

            def advance(s: State) -> None:
                s.hands_completed += 1
                s.dealer = (dealer + 1) % len(seats)
                s.hand = None
                if self.config.table.decks == 2:
                    s.deck = (s.deck + 1) % 2  # the other deck is shuffled next

            self.controller.update(advance)
            self.controller.show(Status(Signal.READY))
        log.info("hand", number=self.number, dealer=dealt_by, passes=len(reports),
                 completed=completed)
        # passes done: those that ran to the end (a degraded pass did; a jammed one did
        # not), counting those before a resume: the one count the summary, ``status``
        # and the page all show
        return HandResult(
            self.number, dealt_by, next_dealer, self.planner.mode, passes,
            (self.resumed_at or 1) - 1 + sum(not stops(r.fault) for r in reports),
            completed, self.tracker.known and self.tracker.from_start, label.distance,
            label.exact, self.resumed_at, departures, self.paused,
            distance_note(reports, departures, label.distance, self.resumed_at,
                          self.plan_lost), deck, fault, reports)

    def _now(self) -> float:
        return self.device.now()

    # -- between passes: the restack ------------------------------------------------
    def _restack(self, ask: Status, result: PassReport | None, done: int, of: int) -> Lifts:
        """Ask for the stack and follow the dealer's lifts; between passes also wait for
        the touch that starts the next, as the touch policy decides
        (:mod:`shuffler.control.touch`: not within the restack lock-out of the pass's
        end, nor with the tray empty, nor while a warning stands unless kept)."""
        # the lock-out runs from the light that asks for the restack (device time): on a
        # simulator many times faster than real, the host's own work after the pass is
        # seconds of the machine's time
        self.controller.touch.pass_ended(self._now())
        self._ask(ask, result)
        lifts = Lifts(ask, self.config.mechanism.both_window_s)
        self._await_stack(lifts, done, of)
        if ask.next_pass is not None:
            self._ignore_touches()
        log.debug("restacked", after_pass=done,
                  on_top=lifts.stacking.name if lifts.stacking is not None else None,
                  stacked=lifts.stacked.value)
        return lifts

    def _ask(self, ask: Status, result: PassReport | None = None) -> None:
        self.emit(stack_event(ask, result))
        self.controller.show(ask)

    def _lifted(self, lifts: Lifts, ev: InputEvent) -> None:
        """A pile lifted: the wrong one first is warned of at once (the light, its beeps,
        the page and the prompt); a stack that now matches the light asks again as before."""
        said = lifts.lift(ev)
        if said == "warn":
            log.info("the other pile lifted first", asked=lifts.asked.name.lower())
            self._ask(lifts.light)
        elif said == "right":
            log.info("the stack now matches the light", asked=lifts.asked.name.lower())
            self._ask(lifts.ask)

    def _await_stack(self, lifts: Lifts, done: int, of: int) -> None:
        """Follow the lifts until the stack matches the light and, between passes, a
        touch starts the next pass; after the last pass, until the stack matches (no
        touch follows: the hand is finished when the sensors have seen it). A stop
        returns at once (the hand pauses there); no touch within the timeout raises."""
        timeout = self.config.hand.touch_timeout_s
        last = lifts.ask.next_pass is None
        # a deadline, not timeout - (now - since): at a large simulated time that rounds
        # to a sliver the clock cannot move by, and the wait never ended
        deadline = self._now() + timeout
        while not self.controller.stop_requested:  # a stop: the next pass never starts
            if last and lifts.settled:
                return
            left = deadline - self._now()
            if left <= 0:
                what = "the stack the light asks for" if last else "no touch"
                raise DeviceTimeoutError(
                    f"{what.capitalize()} within {timeout:.0f} s after pass {done} of {of}: "
                    "the hand waits here. Run the hand again when ready.")
            ev = self.device.wait_event(min(TICK, left))
            if self.on_tick is not None:
                self.on_tick()
            if ev is None:
                continue
            if ev.kind is EventKind.PILE_LIFTED:
                self._lifted(lifts, ev)
            elif ev.kind in (EventKind.TOUCH, EventKind.LONG_PRESS):
                decision = self.controller.touch.decide(ev, Machine(
                    tray_loaded=self.device.health().tray_loaded, restacking=True,
                    warned=lifts.warned, stacked=lifts.settled))
                if isinstance(decision, Start) and not last:
                    return
                if isinstance(decision, Ignore):
                    self._told(decision, lifts.light)

    # -- touches not taken ----------------------------------------------------------
    def _told(self, ignored: Ignore, ask: Status | None = None) -> None:
        """A touch the machine did not take is told, never dropped in silence: the event
        (the page shows it) and, between passes, the prompt again (one short beep and
        the pile's colour: touch again; or the warning, while it stands), or the
        refusal's own light."""
        log.info("touch ignored", why=ignored.why)
        self.emit(TouchIgnored(ignored.why))
        light = ignored.light or ask
        if light is not None:
            self.controller.show(light)

    def _ignore_touches(self, ignored: Ignore | None = None) -> None:
        """Drop the events queued so far: a touch never starts a pass (``ignored``: each
        is told so)."""
        for ev in self.device.drain_events():
            if ev.kind is not EventKind.TOUCH:
                continue
            if ignored is not None:
                self._told(ignored)
            else:
                log.debug("touch ignored", why="a touch for a pass already decided")


def play_hand(controller: PassController, config: Config, terms: HandTerms, *,
              rng: RandomSource, emit: Emit = quiet,
              on_tick: Callable[[], None] | None = None) -> HandResult:
    """Run a hand on ``terms`` (:func:`hand_terms`): the one a crash, a fault or a missing
    touch left pending is finished (and :class:`Resumed` emitted)."""
    if pending := terms.pending:
        log.info("resuming hand", number=pending["number"], at_pass=pending["done"] + 1)
        emit(Resumed(pending["number"], pending["done"] + 1, terms.passes))
    runner = HandRunner(controller, make_planner(terms.mode, terms.passes, rng), config)
    return runner.run(terms.passes, terms.cards, emit, on_tick)
