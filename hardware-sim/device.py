"""``SimDevice``: the device contract implemented directly on the physics."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from shuffler.config import EngineConfig
from shuffler.core.cards import Card, standard_pack
from shuffler.core.mechanics import Pile
from shuffler.device.clock import Clock, ScaledClock, VirtualClock
from shuffler.device.contract import (
    BatteryReading,
    CardCallback,
    DeviceInfo,
    EngineTimings,
    EventKind,
    Fault,
    FaultKind,
    FaultLimits,
    Health,
    InputEvent,
    PassReport,
    ShufflerDevice,
    Signal,
    Status,
    TickCallback,
)
from shuffler.errors import DeviceError, FaultLatchedError

from .battery import SimBattery
from .dealer import DealerHabit, SimDealer
from .faults import FaultPlan
from .physics import Mechanism, MechanismSpec, Transit, TransitKind

#: what the machine says when a clear finds a card still in the throat (jam:CARD:stuck)
STILL_IN_THROAT = ("A card is still in the throat: the beam still sees it. Take it out, put "
                   "every card back in the tray, then run `shuffler clear` again.")

if TYPE_CHECKING:
    from shuffler.core.planning import PassPlan
    from shuffler.device.engine import Command, PassEngine

# the pass engine is imported by the first pass: ``status`` opens a device and runs none


@dataclass(frozen=True)
class SimTiming:
    """Human timings of the simulated dealer."""

    restack_pause: float = 1.0  # seconds after the LED says "stack" before the first lift


def beam_filter(engine: EngineConfig) -> EngineTimings:
    """The engine's beam filter as ``[engine]`` sets it: a card blocks the beam at least
    ``beam_min_blocked_s``; a drop-out shorter than ``beam_min_gap_s`` is the same card.
    The simulated motor has no soft start (its physics has a spin-up of its own)."""
    return replace(engine.timings(), soft_start_s=0.0)


class SimDevice(ShufflerDevice):
    """A shuffler that exists only in memory.

    It keeps a :class:`Mechanism` (the real order of the cards), a
    :class:`SimDealer` who restacks the piles when the LED says so and touches for
    the next pass, and a clock (virtual in tests, scaled for the CLI).
    """

    def __init__(
        self,
        mechanism: Mechanism,
        *,
        clock: Clock | None = None,
        dealer: SimDealer | None = None,
        limits: FaultLimits | None = None,
        timing: SimTiming | None = None,
        name: str = "simulated shuffler",
        timings: EngineTimings | None = None,
    ) -> None:
        super().__init__()
        self.mechanism = mechanism
        self.clock = clock or VirtualClock()
        self.dealer = dealer or SimDealer()
        self.limits = limits or FaultLimits()
        self.timing = timing or SimTiming()
        self._info = DeviceInfo("sim", name, mechanism.spec.feed, accepts_seed=True)
        self._fault: Fault | None = None
        self._motor_on = False
        self._closed = False
        self._halt: FaultKind | None = None
        self._run: _SimPass | None = None
        #: the beam filter of ``[engine]`` (open_sim: the config's); the virtual MCU's
        #: CONFIG sets them all
        self.timings: EngineTimings = timings or beam_filter(EngineConfig())
        self.brake_s = 0.0  # the brake interval before a reverse (the virtual MCU's 20 ms)
        self._idle_since = self.clock.now()
        self._idle = 0.0  # device time the machine stood idle beyond its clock's sleeps
        self._idle_lock = threading.Lock()
        #: what the LED showed (the newest thousand or more), for tests and the rig
        self.shown: list[Status] = []
        #: the simulated dealer holds the pile lifted first, the other one than asked
        self._held: tuple[Status, list[InputEvent]] | None = None
        #: stacked against the light, deaf to the warning: the stack lights (the warning,
        #: the touch refused) still to come before the dealer keeps the stack (0: never)
        self._corrected = False  # put the pile back and stacked as the light asks
        #: the light asks for a stack: the simulated dealer's time, none of it idle (now)
        self._restacking = False

    @classmethod
    def for_cards(
        cls,
        n: int,
        *,
        faults: FaultPlan | None = None,
        spec: MechanismSpec | None = None,
        rng: random.Random | None = None,
        battery: SimBattery | None = None,
        habit: DealerHabit = DealerHabit.INSTRUCTED,
        listens: bool = True,
        **kwargs,
    ) -> SimDevice:
        """A simulated machine with a fresh pack of ``n`` cards in the tray."""
        faults = faults or FaultPlan()
        battery = (battery or SimBattery()).starting_at(faults.battery_volts)
        mech: Mechanism[Card] = Mechanism(
            standard_pack(n), spec or MechanismSpec(), battery, faults
        )
        return cls(mech, dealer=SimDealer(habit, rng or random.Random(), listens=listens),
                   **kwargs)

    # -- the contract ----------------------------------------------------------
    @property
    def info(self) -> DeviceInfo:
        return self._info

    def now(self) -> float:
        """The physics' clock, and the time the machine has stood idle since it last
        moved: a paced simulator's clock moves only while the simulation sleeps, but a
        dealer's touch a second after a pass is a second after it at every speed
        (``ScaledClock.idle``: real time × the speed). A test's virtual clock moves only
        as the test says. The physics (the battery's rest) keeps its own time.

        Nor does it stand idle while the light asks for a stack: the restack is the
        simulated dealer's, who reacts to each light after its own delays in machine time
        (``SimDealer``: the pause, the lifts, putting a pile back, the touch), so the
        host's own work meanwhile (at a million times real time a millisecond is 1,000 s)
        never pushes the dealer's touch past the hand's wait for it, however busy the
        host is."""
        with self._idle_lock:
            if self._run is None and isinstance(self.clock, ScaledClock):
                idle = self.clock.idle()  # taken either way: a restack's time is not idle
                if not self._restacking:
                    self._idle += idle
            return self.clock.now() + self._idle

    def run_pass(self, plan: PassPlan, on_card: CardCallback | None = None, *,
                 on_tick: TickCallback | None = None) -> PassReport:
        if self._closed:
            raise DeviceError("the simulated shuffler is closed")
        if self._fault is not None:
            raise FaultLatchedError(self._fault.message)
        self._settle()
        self.now()  # the idle time up to the pass counts; none during it
        self.mechanism.start_pass()
        from shuffler.device.engine import PassEngine

        engine = PassEngine(plan.labels, self.limits, timings=self.timings,
                            brake_s=self.brake_s)
        self._run = _SimPass(self, engine, on_card, on_tick)
        self._halt = None
        if self._stop_before_start():  # stopped between "accepted" and now: never starts
            self._halt = FaultKind.STOPPED
        try:
            report = self._run.run()
        finally:
            self._run = None
            self._motor_on = False
            self._idle_since = self.clock.now()
        assert engine.report is not None
        if report.fault is not None and report.fault.kind.latches:
            self._fault = report.fault
        return report

    def _settle(self) -> None:
        """The battery recovers while the motor rests."""
        if not self._motor_on:
            now = self.clock.now()
            self.mechanism.battery.rest(now - self._idle_since)
            self._idle_since = now

    def battery(self) -> BatteryReading:
        self._settle()
        return BatteryReading(
            round(self.mechanism.battery.volts(self._motor_on), 3), under_load=self._motor_on
        )

    def health(self) -> Health:
        return Health(
            self._fault is None,
            self._motor_on,
            bool(self.mechanism.tray),
            self._fault,
            {"cards_in_machine": self.mechanism.cards},
        )

    def clear_fault(self) -> bool:
        # as every fault's message says (a latch the device or the host holds): the
        # simulated dealer frees the throat and puts every card back in the tray; after
        # jam:CARD:stuck the dealer misses the card in the throat (the clears it fails)
        faults = self.mechanism.faults
        if faults.stuck_clears > 0:
            faults.stuck_clears -= 1
            self._fault = Fault(FaultKind.JAM, STILL_IN_THROAT)
            return False
        self.mechanism.gather()
        self._fault = None
        return True

    def stop(self) -> None:
        self._note_stop()
        self.halt(FaultKind.STOPPED)

    def halt(self, kind: FaultKind) -> None:
        """Stop the motor now; a pass in progress (on another thread) ends with ``kind``."""
        if self._run is not None:
            self._halt = kind
        self._motor_on = False

    def close(self) -> None:
        self.stop()
        self._closed = True

    def show(self, status: Status) -> None:
        self.now()  # the time idle before the light counts; none while a stack is asked
        self._restacking = status.signal is Signal.STACK
        self.shown.append(status)
        if len(self.shown) > 2000:  # an evening's hands keep no unbounded history
            del self.shown[:-1000]
        if status.signal is not Signal.STACK or status.on_top is None:
            self._held, self._corrected = None, False
            if status.signal is Signal.READY:
                self._dealer_gathers()
        elif self._held is not None:  # the warning (on a serial link: the stack light again)
            self._dealer_hears_the_warning()
        elif status.warn:  # the warning again at a refusal: what the dealer does is queued
            pass
        elif self._corrected:  # the light as asked again: the stack matches now
            self._corrected = False
        else:
            self._dealer_restacks(status)

    def wait_event(self, timeout: float | None = None) -> InputEvent | None:
        # every event of the simulated dealer is queued before anyone waits for it,
        # so an empty queue means waiting out the timeout in device time
        events = self.drain_events()
        if events:
            for ev in events[1:]:
                self.events.put(ev)
            return events[0]
        if timeout:
            self.clock.sleep(timeout)
        return None

    # -- the simulated dealer ----------------------------------------------------
    def _dealer_restacks(self, status: Status) -> None:
        assert status.on_top is not None
        self.now()  # the idle time before the light counts (its stamps are device time)
        self.clock.sleep(self.timing.restack_pause)
        piles = self.mechanism.piles
        does = self.dealer.reacts(status.on_top, self.now(),
                                  self.mechanism.seen(status.next_pass is None),
                                  lambda pile: piles[pile][-1] if piles[pile] else None)
        if does.follows:
            self._stacks(does.on_top, does.lifts, status)
            return
        if does.made_to:
            self._dealer_is_made_to(status, does.lifts, does.keeps)
            return
        # the other pile first: the machine warns at once, and the dealer hears it
        for ev in does.lifts[:2 if does.at_once else 1]:
            self.events.put(ev)
        self._held = (status, does.lifts)

    def _dealer_is_made_to(self, status: Status, lifts: list[InputEvent], keeps: bool) -> None:
        """Deaf to the warning: the dealer lifts both piles as the habit goes, touches (and
        with ``keeps`` holds the sensor to keep the stack; each refused, the warning
        stays), and is made to put the piles back and stack as the light asks."""
        for ev in lifts:
            self.events.put(ev)
        self.clock.sleep(max(0.0, lifts[-1].at - self.now()) + self.dealer.settle)
        self.events.put(InputEvent(EventKind.TOUCH, self.now()))
        if keeps:
            began = self.now()
            self.clock.sleep(self.dealer.hold)
            self.events.put(InputEvent(EventKind.LONG_PRESS, began))
        # made to correct when the machine shows its warning (``show``), not before: the
        # warning stays up as long as the dealer takes to hear it, as at the table
        self._held = (status, lifts)

    def _stacks(self, on_top: Pile, lifts: list[InputEvent], status: Status) -> None:
        """The lifts after the first (already made), the pack in the tray, the touch."""
        self.clock.sleep(max(0.0, lifts[-1].at - self.now()))
        self.mechanism.restack(on_top)
        for ev in lifts:
            self.events.put(ev)
        self.events.put(InputEvent(EventKind.TRAY_LOADED, self.now()))
        if status.next_pass is not None:
            self.clock.sleep(self.dealer.settle)
            self.events.put(InputEvent(EventKind.TOUCH, self.now()))

    def _dealer_gathers(self) -> None:
        """The light back to ready with cards on the piles (a lone pass: no stack light
        follows it): the dealer puts the pack back in the tray at once, as after a hand
        (the rig's dealer too), so the next pass, hand or touch finds it there."""
        m = self.mechanism
        if not (m.piles[0] or m.piles[1]) or self._fault is not None:
            return
        m.gather()
        self.events.put(InputEvent(EventKind.TRAY_LOADED, self.now()))

    def _dealer_hears_the_warning(self) -> None:
        """Holding the pile lifted first, a dealer who listens hears the warning, puts the
        pile back and lifts the pile the light shows first, one pile at a time. (One who
        does not stacks as it was going to, and keeps it when the touch is refused.)"""
        assert self._held is not None
        status, _ = self._held
        self._held = None
        asked = status.on_top
        assert asked is not None
        lifts = self.dealer.corrects(asked, self.now())
        self.clock.sleep(max(0.0, lifts[0].at - self.now()))
        self._corrected = True
        self._stacks(asked, lifts, status)


class _SimPass:
    """One pass on the physics: the engine decides, the mechanism moves the cards.

    Time is the device's clock; the loop sleeps to whichever comes first, the
    next thing the physics does (a card's edges) or the engine's deadline.
    """

    EPS = 1e-9

    def __init__(self, dev: SimDevice, engine: PassEngine, on_card: CardCallback | None,
                 on_tick: TickCallback | None) -> None:
        self.dev, self.engine = dev, engine
        self.mech = dev.mechanism
        self.on_card, self.on_tick = on_card, on_tick
        self.pile = Pile.LEFT
        self.forward = False
        self.fresh = True  # the motor starts from rest: the first card comes after spin-up
        self.busy = False  # a transit is under way (or the roller slips on nothing)
        self.blocked = False
        self.retry_due = False
        self.pending: list[tuple[float, str, Transit]] = []

    def run(self) -> PassReport:
        clock, engine = self.dev.clock, self.engine
        if self.dev._halt is None:
            self.apply(engine.start(clock.now(), bool(self.mech.tray)))
        pending = self.pending
        while not engine.done:
            if self.dev._halt is not None:
                self.apply(engine.stop(clock.now(), self.dev._halt))
                break
            due = engine.deadline  # a property that computes: read once a round
            if pending and pending[0][0] < due:
                due = pending[0][0]
            clock.sleep(due - clock.now())
            now = max(clock.now(), due)  # asleep until ``due``, whatever rounding says
            while pending and pending[0][0] <= now + self.EPS and not engine.done:
                at, what, transit = pending.pop(0)
                self.physics(what, transit, at)
            self.apply(engine.tick(now))
        assert engine.report is not None
        return engine.report

    def physics(self, what: str, transit: Transit, at: float) -> None:
        if what in ("blocked", "dropout"):  # a drop-out: the beam clears inside the card
            self.blocked = True
            self.apply(self.engine.beam(what == "blocked", at))
            return
        self.mech.land(transit, self.pile)  # the card drops past the diverter
        self.busy = self.blocked = False
        self.apply(self.engine.tray(bool(self.mech.tray), at))
        self.apply(self.engine.beam(False, at))
        self.feed(at)

    def feed(self, at: float) -> None:
        """The roller turns forward: push the next card towards the beam."""
        if not self.forward or self.busy or self.engine.done:
            return
        transit = self.mech.next_transit(first=self.fresh)
        self.fresh, self.busy = False, True
        if transit.load_volts:
            self.apply(self.engine.volts(transit.load_volts, at))
        if transit.kind is TransitKind.CARD:
            enters = at + transit.gap
            self.pending.append((enters, "blocked", transit))
            if transit.dropout:
                self.pending += [(enters + transit.dropout_at, "dropout", transit),
                                 (enters + transit.dropout_at + transit.dropout, "blocked",
                                  transit)]
            self.pending.append((enters + transit.blocked, "land", transit))
        elif transit.kind is TransitKind.JAM and not self.blocked:
            self.pending.append((at + transit.gap, "blocked", transit))
        # a misfeed, a stall or an empty tray: nothing reaches the beam

    def apply(self, commands: list[Command]) -> None:
        if not commands:  # most ticks: nothing to do (and no import to look up)
            return
        from shuffler.device.engine import Card as Counted
        from shuffler.device.engine import Divert, Done, Motor, Tick

        now = self.dev.clock.now()
        for cmd in commands:
            if isinstance(cmd, Motor):
                self.motor(cmd.speed, now)
            elif isinstance(cmd, Divert):
                self.pile = cmd.pile
            elif isinstance(cmd, Counted) and self.on_card:
                self.on_card(cmd.counted, cmd.expected)
            elif isinstance(cmd, Tick) and self.on_tick:
                self.on_tick()
            elif isinstance(cmd, Done):
                self.pending.clear()

    def motor(self, speed: float, at: float) -> None:
        on = speed != 0 and self.dev._halt is None
        self.dev._motor_on = on
        was_forward, self.forward = self.forward, on and speed >= 1.0
        if was_forward and not self.forward:
            # the roller stops: a card short of the beam stays in the tray; one that
            # failed to feed (stuck, slipping) gets its retry when the motor moves again
            self.retry_due = self.busy and not self.pending
            self.pending.clear()
            self.busy, self.fresh = False, True
        if on and (speed < 0 or self.forward) and self.retry_due:
            self.retry_due = False
            self.mech.retry(self.engine.limits.reverse_seconds if speed < 0 else 0.0)
            if self.blocked:  # the stuck card leaves the throat
                self.blocked = False
                self.apply(self.engine.beam(False, at))
        self.feed(at)
