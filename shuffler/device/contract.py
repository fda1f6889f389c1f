"""The device contract: what every backend (simulator, gpiozero, serial) offers.

The controller talks only to :class:`ShufflerDevice`. A backend owns its own
safety: the motor stops on every exit path, a jam stops it at once, and a fault
it detects latches until :meth:`ShufflerDevice.clear_fault`.

Inputs from the machine (touch, tray, pile sensors) arrive as
:class:`InputEvent` objects on :attr:`ShufflerDevice.events`, a
:class:`queue.Queue` that the backend's own threads may fill; one loop reads it.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import enum
import queue
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shuffler.core.battery import MonitorFault
from shuffler.core.mechanics import Feed, Pile
from shuffler.core.record import Record

if TYPE_CHECKING:
    from shuffler.core.planning import PassPlan


class FaultKind(enum.Enum):
    JAM = "jam"
    MISFEED = "misfeed"
    COUNT_MISMATCH = "count_mismatch"
    #: the count was reached with cards still in the tray: the beam saw a card as two
    MISCOUNT = "miscount"
    LOW_BATTERY = "low_battery"
    LINK_LOST = "link_lost"
    MCU_RESTARTED = "mcu_restarted"
    INTERRUPTED = "interrupted"
    TIMEOUT = "timeout"
    STATE_DAMAGED = "state_damaged"  # the state file failed its check and was set aside
    STOPPED = "stopped"  # stop() during a pass: the motor went off at once; nothing latches

    @property
    def latches(self) -> bool:
        """Faults that keep the motor locked until the dealer clears them."""
        return self in (FaultKind.JAM, FaultKind.MISFEED, FaultKind.MISCOUNT,
                        FaultKind.LINK_LOST, FaultKind.STATE_DAMAGED, FaultKind.INTERRUPTED)


@dataclass(frozen=True)
class Fault(Record):
    """A fault with the card count at the moment it happened and what to do; its JSON
    (``defs.json#/$defs/fault``) is the one the state file, the socket and ``--json`` keep."""

    kind: FaultKind
    message: str
    card: int | None = None  # the card (1-based) the machine was feeding

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fault:
        return cls(FaultKind(data["kind"]), str(data["message"]), data.get("card"))


@dataclass(frozen=True)
class PassReport:
    """What a pass did, as the machine measured it."""

    expected: int
    counted: int
    piles: tuple[int, int]
    seconds: float
    fault: Fault | None = None
    min_volts: float | None = None  # lowest battery voltage seen under motor load
    tray_empty: bool = True
    retries: int = 0

    @property
    def ok(self) -> bool:
        return self.fault is None and self.counted == self.expected


@dataclass(frozen=True)
class BatteryReading:
    volts: float
    under_load: bool
    measured: bool = True  # False: no battery monitor fitted (volts means nothing)
    #: the monitor gives readings no block could give (shuffler.core.battery.MonitorFault):
    #: one that ``blocks`` leaves ``volts`` meaningless
    monitor: MonitorFault | None = None
    #: how far below the block ``volts`` may be (an uncalibrated Nano's bandgap,
    #: shuffler.limits.UNCALIBRATED_READS_LOW_BY): the over-voltage check takes the worst case
    reads_low_by: float = 1.0


@dataclass(frozen=True)
class DeviceInfo(Record):
    """The machine a result came from (``defs.json#/$defs/device``)."""

    kind: str  # "sim", "gpio", "serial", ...
    name: str
    feed: Feed
    max_cards: int = 104
    firmware: str | None = None
    accepts_seed: bool = False  # only the simulator accepts a random seed


@dataclass(frozen=True)
class Health:
    ok: bool
    motor_on: bool
    tray_loaded: bool
    fault: Fault | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class EventKind(enum.Enum):
    TOUCH = "touch"
    LONG_PRESS = "long_press"  # the sensor held ([hand] long_press_s): the dealer's clear
    TRAY_LOADED = "tray_loaded"
    TRAY_EMPTY = "tray_empty"
    PILE_LIFTED = "pile_lifted"


@dataclass(frozen=True)
class InputEvent:
    kind: EventKind
    at: float  # device clock, seconds
    pile: Pile | None = None


class Signal(enum.Enum):
    """What the status LED (and buzzer) tells the dealer."""

    READY = "ready"
    RUNNING = "running"
    STACK = "stack"  # stack the piles as shown, then touch for the next pass
    LOW_BATTERY = "low_battery"
    FAULT = "fault"
    OFF = "off"


@dataclass(frozen=True)
class Status:
    signal: Signal
    on_top: Pile | None = None  # for STACK: the pile to put on top
    next_pass: int | None = None
    of: int | None = None
    #: the same light again with one short beep: a touch the machine did not take
    told: bool = False
    #: for STACK: the other pile was lifted first; put it back and lift ``on_top`` first
    #: (its own light and beeps: shuffler.control.hand, docs/guide.md)
    warn: bool = False


@dataclass(frozen=True)
class FaultLimits:
    """When the machine gives up on a card; every backend applies the same limits."""

    jam_seconds: float = 0.5  # beam blocked longer than this: a jam
    misfeed_seconds: float = 1.0  # no card edge for this long while the tray holds cards
    retries: int = 2  # reverse-and-refeed attempts before the fault latches
    reverse_seconds: float = 0.3
    stall_volts: float = 5.6  # a stop with the battery below this under load is low battery
    max_pass_seconds: float = 90.0  # the motor never runs longer than this in one pass


@dataclass(frozen=True)
class EngineTimings:
    """The mechanism's timings every backend runs a pass with, declared once: the
    config's ``[engine]`` keys (``EngineConfig.timings``) give the machine's values,
    and the GPIO backend, the simulator and a microcontroller's CONFIG all take this one
    type when they are opened. Zero everywhere (the default) is an ideal beam and a motor
    at full speed at once."""

    soft_start_s: float = 0.0  # the motor ramps to full duty over this
    glitch_s: float = 0.0  # a beam level counts once it has held this long (a pin's filter)
    min_blocked_s: float = 0.0  # blocked for less than this is not a card
    min_gap_s: float = 0.0  # a card counts once the beam then stayed clear this long

    def quickened(self, factor: float) -> EngineTimings:
        """For a machine whose cards come ``1 / factor`` times faster: a quicker card
        blocks the beam, and leaves it, for less. The motor's soft start stays."""
        return EngineTimings(self.soft_start_s, self.glitch_s * factor,
                             self.min_blocked_s * factor, self.min_gap_s * factor)


def feed_fault(kind: FaultKind, card: int, counted: int, expected: int) -> Fault:
    """The fault for a jam or a misfeed, telling the dealer exactly what to do."""
    what = "Jam" if kind is FaultKind.JAM else "Misfeed (no card reached the gate)"
    return Fault(
        kind,
        f"{what} at card {card} of {expected}: {counted} cards dealt. "
        "Free the throat, put every card back in the tray, "
        "then run `shuffler clear` and start the pass again.",
        card,
    )


def stall_fault(card: int, counted: int, expected: int, volts: float) -> Fault:
    return Fault(
        FaultKind.LOW_BATTERY,
        f"The motor stalled at card {card} of {expected} "
        f"({counted} cards dealt): the battery gives only {volts:.2f} V under load. "
        "Change the 9 V battery, put every card back in the tray and start again.",
        card,
    )


#: progress callback: (cards counted so far, cards expected)
CardCallback = Callable[[int, int], None]
#: called at least every 0.1 s of device time while a pass runs (the service pets
#: systemd's watchdog from it); a pass loop that hangs stops calling it
TickCallback = Callable[[], None]


_OPEN: weakref.WeakSet[ShufflerDevice] = weakref.WeakSet()


def open_devices() -> list[ShufflerDevice]:
    """Every device this process made (and has not let go of): SIGTSTP stops them all."""
    return list(_OPEN)


#: set while a device opens for a bench with nobody confirmed at it (``selftest``)
_OPEN_STILL: contextvars.ContextVar[bool] = contextvars.ContextVar("open_still", default=False)


@contextlib.contextmanager
def opening_still() -> Iterator[None]:
    """Devices opened inside this block drive no output that moves anything: the motor
    off, the diverter's servo made with no pulses (no parking). The flap is first driven
    by the first pass, or by a bench step the builder confirmed (``shuffler selftest``)."""
    token = _OPEN_STILL.set(True)
    try:
        yield
    finally:
        _OPEN_STILL.reset(token)


def open_still() -> bool:
    """Whether a device opening now must keep its moving outputs still."""
    return _OPEN_STILL.get()


class ShufflerDevice(abc.ABC):
    """The one contract every backend implements."""

    def __init__(self) -> None:
        self.events: queue.Queue[InputEvent] = queue.Queue()
        _OPEN.add(self)
        self._stop_guard = threading.Lock()
        self._armed = False  # a pass is about to start: a stop now must prevent it
        self._stop_asked = False

    def arm(self) -> None:
        """The next pass is about to start (the job owner has checked it may): forget
        earlier stops, and from now on a :meth:`stop` holds until that pass ends, so a
        stop that comes before the pass is marked running still keeps the motor off
        (the pass then ends ``stopped`` with nothing counted). A backend records its
        stops with :meth:`_note_stop` and asks :meth:`_stop_before_start` once its
        pass is marked running."""
        with self._stop_guard:
            self._armed, self._stop_asked = True, False

    def _note_stop(self) -> None:
        """Called by :meth:`stop`: remember it while armed (a running pass is the
        backend's to stop, as it always was)."""
        with self._stop_guard:
            if self._armed:
                self._stop_asked = True

    def _stop_before_start(self) -> bool:
        """Called by ``run_pass`` once stops reach the running pass: whether one came
        since :meth:`arm`. The arming is used up either way."""
        with self._stop_guard:
            asked, self._armed, self._stop_asked = self._stop_asked, False, False
            return asked

    @property
    @abc.abstractmethod
    def info(self) -> DeviceInfo: ...

    @abc.abstractmethod
    def run_pass(self, plan: PassPlan, on_card: CardCallback | None = None, *,
                 on_tick: TickCallback | None = None) -> PassReport:
        """Deal one pass by ``plan``; return what was measured.

        ``on_card(counted, expected)`` follows the count; ``on_tick()`` is called at
        least every 0.1 s of device time while the pass runs. :meth:`stop` from any
        thread ends the pass with the motor off and a ``stopped`` fault (not latched).

        Mechanical faults come back in the report (and latch when they should);
        a latched fault makes this raise :class:`~shuffler.errors.FaultLatchedError`
        before anything moves. The motor is off when this returns or raises.
        """

    @abc.abstractmethod
    def now(self) -> float:
        """The device's time, in seconds: the clock its :class:`InputEvent` stamps are in
        and every rule about what the mechanism does is measured on (the restack lock-out,
        a press that began before a fault). It never goes back while the machine runs.
        A simulator's moves while the machine is idle, too; a microcontroller's is read
        from its stamps (shuffler's host cannot read its clock between them)."""

    def idle(self, wait: float) -> float:
        """The service has ``wait`` seconds (real time) with nothing to do: a device whose
        simulated machine lives only while someone waits on its clock waits there now;
        returns what is left of ``wait`` to wait for a job. Default: all of it."""
        return wait

    @abc.abstractmethod
    def battery(self) -> BatteryReading: ...

    @abc.abstractmethod
    def health(self) -> Health: ...

    @abc.abstractmethod
    def clear_fault(self) -> bool:
        """Clear a latched fault if the machine reports itself clear; return whether it did."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Motor off, diverter parked. Safe to call at any time, from any thread."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop and release the hardware. Idempotent."""

    def show(self, status: Status) -> None:  # noqa: B027 - optional for a backend
        """Tell the dealer something (status LED, buzzer). Default: nothing to show."""

    def wait_event(self, timeout: float | None = None) -> InputEvent | None:
        """The next input event, or None after ``timeout`` seconds of device time."""
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def drain_events(self) -> list[InputEvent]:
        out: list[InputEvent] = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out

    def __enter__(self) -> ShufflerDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stacking_from_lifts(lifts: Iterable[InputEvent], both_window: float) -> Pile | None:
    """Which pile the dealer put on top, read from the two pile sensors.

    The pile lifted first is the one placed on the other. Both lifted within
    ``both_window`` seconds (or only one seen) means the sensors cannot tell.
    """
    seen: dict[Pile, float] = {}
    for ev in lifts:
        if ev.kind is EventKind.PILE_LIFTED and ev.pile is not None and ev.pile not in seen:
            seen[ev.pile] = ev.at
    if len(seen) != 2:
        return None
    left, right = seen[Pile.LEFT], seen[Pile.RIGHT]
    if abs(left - right) < both_window:
        return None
    return Pile.LEFT if left < right else Pile.RIGHT
