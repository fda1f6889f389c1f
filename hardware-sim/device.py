"""``SimDevice``: the device contract implemented directly on the physics."""

from __future__ import annotations

import random
from dataclasses import dataclass

from shuffler.cards import Card, standard_pack
from shuffler.clock import Clock, VirtualClock
from shuffler.device import (
    BatteryReading,
    CardCallback,
    DeviceInfo,
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
    feed_fault,
    stall_fault,
)
from shuffler.errors import DeviceError, FaultLatchedError
from shuffler.mechanics import Pile
from shuffler.planning import PassPlan

from .battery import SimBattery
from .dealer import DealerHabit, SimDealer
from .faults import FaultPlan
from .physics import Mechanism, MechanismSpec, TransitKind

HALT_MESSAGES = {
    FaultKind.INTERRUPTED: "The pass was stopped on request; put every card back in the tray.",
    FaultKind.LINK_LOST: "The host went silent, so the machine stopped the motor by itself. "
                         "Check the cable, put every card back in the tray, then run "
                         "`shuffler clear`.",
    FaultKind.MCU_RESTARTED: "The machine's microcontroller restarted in the middle of the "
                             "pass. Put every card back in the tray and start the pass again.",
}


@dataclass(frozen=True)
class SimTiming:
    """Human timings of the simulated dealer."""

    restack_pause: float = 1.0  # seconds after the LED says "stack" before the first lift


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
        self._idle_since = self.clock.now()
        self.shown: list[Status] = []  # what the LED showed, for tests and the rig

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
        **kwargs,
    ) -> SimDevice:
        """A simulated machine with a fresh pack of ``n`` cards in the tray."""
        faults = faults or FaultPlan()
        battery = (battery or SimBattery()).starting_at(faults.battery_volts)
        mech: Mechanism[Card] = Mechanism(
            standard_pack(n), spec or MechanismSpec(), battery, faults
        )
        return cls(mech, dealer=SimDealer(habit, rng or random.Random()), **kwargs)

    # -- the contract ----------------------------------------------------------
    @property
    def info(self) -> DeviceInfo:
        return self._info

    def run_pass(self, plan: PassPlan, on_card: CardCallback | None = None) -> PassReport:
        if self._closed:
            raise DeviceError("the simulated shuffler is closed")
        if self._fault is not None:
            raise FaultLatchedError(self._fault.message)
        mech, clock, limits = self.mechanism, self.clock, self.limits
        self._settle()
        mech.start_pass()
        expected, labels = plan.cards, plan.labels
        piles = [0, 0]
        counted = retries = retries_here = 0
        fault: Fault | None = None
        volts: list[float] = []
        start = clock.now()
        self._halt = None
        self._motor_on = True
        try:
            while counted < expected:
                if self._halt is not None:  # stopped from outside: a STOP, a silent host
                    fault = Fault(self._halt, HALT_MESSAGES[self._halt], counted + 1)
                    break
                if clock.now() - start > limits.max_pass_seconds:
                    fault = Fault(
                        FaultKind.TIMEOUT,
                        "The pass ran longer than "
                        f"{limits.max_pass_seconds:.0f} s; the motor was stopped.",
                        counted + 1,
                    )
                    break
                transit = mech.next_transit(first=counted == 0 and retries_here == 0)
                if transit.load_volts:
                    volts.append(transit.load_volts)
                if transit.kind is TransitKind.EMPTY:
                    break
                if transit.kind is TransitKind.CARD:
                    clock.sleep(transit.gap + transit.blocked)
                    label = labels[counted]
                    mech.land(transit, Pile(label))
                    piles[label] += 1
                    counted += 1
                    retries_here = 0
                    if on_card:
                        on_card(counted, expected)
                    continue
                # a stuck card blocks the beam; no card leaves the beam dark
                limit = (
                    limits.jam_seconds
                    if transit.kind is TransitKind.JAM
                    else limits.misfeed_seconds
                )
                clock.sleep(transit.gap + limit)
                self._motor_on = False
                card = counted + 1
                if transit.kind is TransitKind.STALL or transit.load_volts < limits.stall_volts:
                    fault = stall_fault(card, counted, expected, transit.load_volts)
                    break
                kind = FaultKind.JAM if transit.kind is TransitKind.JAM else FaultKind.MISFEED
                if retries_here >= limits.retries:
                    fault = feed_fault(kind, card, counted, expected)
                    break
                retries_here += 1
                retries += 1
                mech.retry(limits.reverse_seconds)
                clock.sleep(limits.reverse_seconds)
                self._motor_on = True
        finally:
            self._motor_on = False
            self._idle_since = clock.now()
        if fault is not None and fault.kind.latches:
            self._fault = fault
        return PassReport(
            expected,
            counted,
            (piles[0], piles[1]),
            clock.now() - start,
            fault,
            min(volts) if volts else None,
            not mech.tray,
            retries,
        )

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
        if self._fault is not None:
            self.mechanism.gather()  # the simulated dealer frees the throat
        self._fault = None
        return True

    def stop(self) -> None:
        self.halt(FaultKind.INTERRUPTED)

    def halt(self, kind: FaultKind) -> None:
        """Stop the motor now; a pass in progress (on another thread) ends with ``kind``."""
        if self._motor_on:
            self._halt = kind
        self._motor_on = False

    def close(self) -> None:
        self.stop()
        self._closed = True

    def show(self, status: Status) -> None:
        self.shown.append(status)
        if status.signal is Signal.STACK and status.on_top is not None:
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
        self.clock.sleep(self.timing.restack_pause)
        on_top = self.dealer.choose(status.on_top)
        lifts = self.dealer.lift_events(on_top, self.clock.now())
        self.clock.sleep(lifts[-1].at - lifts[0].at)
        self.mechanism.restack(on_top)
        for ev in lifts:
            self.events.put(ev)
        self.events.put(InputEvent(EventKind.TRAY_LOADED, self.clock.now()))
        if status.next_pass is not None:
            self.clock.sleep(self.dealer.settle)
            self.events.put(InputEvent(EventKind.TOUCH, self.clock.now()))
