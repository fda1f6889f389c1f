"""The pass engine: the one set of rules every backend follows for a pass. Pure.

A backend feeds the engine timestamped events (the beam blocked or cleared, the
tray loaded or empty, a battery reading under load, a stop, a tick) and carries
out the commands it answers with (:class:`Motor`, :class:`Divert`,
:class:`Card`, :class:`Tick`, :class:`Done`). The engine reads no clock: time
comes in with each event, and :attr:`PassEngine.deadline` says when the backend
must call :meth:`PassEngine.tick` at the latest if nothing else happens.

States (:class:`Phase`):

- ``RAMP``: the motor soft-starts in steps to full speed; at full speed the
  misfeed timer starts.
- ``FEED``: cards cross the beam. A card counts once it kept the beam blocked at
  least ``min_blocked`` seconds and the beam then stayed clear ``min_gap`` seconds
  (with ``min_gap`` 0, on its clearing edge); a drop-out shorter than ``min_gap``
  inside a card is the same card, never a second one. The diverter is then set for
  the next card. Beam blocked longer than ``jam_seconds`` is a jam (drop-outs do not
  restart that timer); no counted card for ``misfeed_seconds`` while the tray holds
  cards is a misfeed (a flickering beam does not restart it), or a stall
  (low battery) when the battery under load reads below ``stall_volts``. A jam
  or misfeed stops the motor at once and, up to ``retries`` times, backs the card
  out (``REVERSE``, if the motor can reverse) and ramps again. The tray running
  empty before the count is reached ends the pass (a double feed).
- ``REVERSE``: after ``brake_s`` with the motor off (a brake interval before the
  H-bridge reverses; 0 by default, 20 ms on the microcontroller), the roller turns
  backwards for ``reverse_seconds``; beam edges
  now are the card backing out, never a count.
- ``HOLD``: a microcontroller's host fell silent past the heartbeat rule
  (:attr:`PassEngine.quiet`, set by the backend): a retry's reverse or ramp waits
  here with the motor off, and goes on (a new brake first) once the host is heard.
  An engine on the host itself is never quiet.
- ``DONE``: the motor is off and the report is out. A stop (or a halt with
  another kind, such as a silent host) and the pass-time limit reach ``DONE``
  from any state; the motor goes off in the same step.

A backend whose pass loop runs on the host (GPIO) tells the engine each time that
loop wakes (:meth:`PassEngine.awake`), before anything else: a loop that stayed
asleep longer than :attr:`PassEngine.blind_limit` (the longer of the jam and misfeed
limits: it could have seen neither) was frozen, a process stopped or starved while
the motor turned, so the pass ends ``interrupted`` (latched) with the motor off.

    >>> from shuffler.device.contract import FaultLimits
    >>> eng = PassEngine((0, 1), FaultLimits())
    >>> eng.start(0.0)
    [Divert(pile=<Pile.LEFT: 0>), Motor(speed=1.0)]
    >>> eng.beam(True, 0.01), eng.beam(False, 0.02)
    ([], [Card(counted=1, expected=2), Divert(pile=<Pile.RIGHT: 1>)])
    >>> eng.beam(True, 0.03)
    []
    >>> eng.beam(False, 0.04)[:2]
    [Card(counted=2, expected=2), Motor(speed=0.0)]
    >>> eng.report.counted, eng.report.fault, eng.done
    (2, None, True)
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from shuffler.core.mechanics import Pile
from shuffler.device.contract import (
    EngineTimings,
    Fault,
    FaultKind,
    FaultLimits,
    PassReport,
    feed_fault,
    stall_fault,
)

#: no soft start and an ideal beam: the engine's default timings
IDEAL = EngineTimings()

#: the engine asks for a tick (and backends call ``on_tick``) at least this often
TICK_SECONDS = 0.05
REVERSE_SPEED = 0.6

HALT_MESSAGES = {
    FaultKind.STOPPED: "The pass was stopped on request; the motor is off. "
                       "Put every card back in the tray to start again.",
    FaultKind.LINK_LOST: "The host went silent, so the machine stopped the motor by itself. "
                         "Check the cable, put every card back in the tray, then run "
                         "`shuffler clear`.",
    FaultKind.MCU_RESTARTED: "The machine's microcontroller restarted in the middle of the "
                             "pass. Put every card back in the tray and start the pass again.",
}


def frozen_fault(blind: float, card: int) -> Fault:
    """The pass's own loop slept ``blind`` seconds: nobody watched the machine."""
    return Fault(FaultKind.INTERRUPTED,
                 f"The pass was not watched for {blind:.1f} s (the program was frozen: "
                 "stopped, suspended or starved of the processor) while the motor ran, so "
                 "it stopped the motor as soon as it woke: cards may be anywhere. Put "
                 "every card back in the tray, then run `shuffler clear` and start again.",
                 card)


class Phase(enum.Enum):
    IDLE = "idle"
    RAMP = "ramp"
    FEED = "feed"
    REVERSE = "reverse"
    HOLD = "hold"
    DONE = "done"


@dataclass(frozen=True)
class Motor:
    speed: float  # > 0 forward, < 0 backward, 0 off


@dataclass(frozen=True)
class Divert:
    pile: Pile


@dataclass(frozen=True)
class Card:
    """A card was counted: the backend reports progress (``on_card``)."""

    counted: int
    expected: int


@dataclass(frozen=True)
class Tick:
    """The pass is alive: the backend calls ``on_tick`` (the service pets its watchdog)."""


@dataclass(frozen=True)
class Done:
    report: PassReport
    latch: bool  # the fault latches until the dealer clears it


Command = Motor | Divert | Card | Tick | Done


class PassEngine:
    """One pass by ``labels`` (0 left, 1 right, in feed order) under ``limits``."""

    def __init__(self, labels: Sequence[int], limits: FaultLimits, *,
                 timings: EngineTimings = IDEAL, soft_start_steps: int = 5,
                 can_reverse: bool = True, brake_s: float = 0.0) -> None:
        self.labels = tuple(labels)
        self.limits = limits
        self.timings = timings
        self.soft_start_s = timings.soft_start_s
        self.steps = max(1, soft_start_steps) if timings.soft_start_s > 0 else 1
        self.can_reverse = can_reverse
        self.min_blocked = timings.min_blocked_s
        self.min_gap = timings.min_gap_s
        self.brake_s = brake_s
        self._braking = False  # in REVERSE: the motor still off for brake_s
        #: the host is silent past the heartbeat rule (a microcontroller's backend sets
        #: it): no retry drives the motor until it is heard again
        self.quiet = False
        self._held = Phase.RAMP  # in HOLD: what starts once the host is heard
        self.phase = Phase.IDLE
        self.counted = self.retries = self._retries_here = 0
        self.piles = [0, 0]
        self.motor = 0.0
        self.tray_loaded = True
        self.report: PassReport | None = None
        self._start = self._phase_at = self._last_card = self._last_tick = 0.0
        self._awake_at = 0.0  # the backend's loop last woke (awake)
        self._step = 0
        self._blocked_at: float | None = None  # the card in the beam, if it may count
        self._cleared_at: float | None = None  # that card left the beam: counts after min_gap
        self._volts: float | None = None
        self._min_volts: float | None = None

    @property
    def expected(self) -> int:
        return len(self.labels)

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    @property
    def blind_limit(self) -> float:
        """The longest a pass loop may sleep between two :meth:`awake` calls: it could
        have seen neither a jam nor a misfeed in that time."""
        return max(self.limits.jam_seconds, self.limits.misfeed_seconds)

    @property
    def deadline(self) -> float:
        """When :meth:`tick` must be called at the latest (inf when done)."""
        if self.done:
            return math.inf
        times = [self._start + self.limits.max_pass_seconds, self._last_tick + TICK_SECONDS]
        if self.phase is Phase.RAMP:
            times.append(self._phase_at + self.soft_start_s * self._step / self.steps)
        elif self.phase is Phase.REVERSE:
            times.append(self._phase_at + self.brake_s
                         + (0.0 if self._braking else self.limits.reverse_seconds))
        elif self.phase is Phase.HOLD:
            pass  # nothing is due but the tick: the backend sets quiet between ticks
        elif self._cleared_at is not None:
            times.append(self._cleared_at + self.min_gap)
        elif self._blocked_at is not None:
            times.append(self._blocked_at + self.limits.jam_seconds)
        else:
            times.append(self._last_card + self.limits.misfeed_seconds)
        return min(times)

    # -- events --------------------------------------------------------------------------
    def start(self, at: float, tray_loaded: bool = True) -> list[Command]:
        if self.phase is not Phase.IDLE:
            raise RuntimeError("a pass engine runs one pass")
        self._start = self._last_tick = self._awake_at = at
        self.tray_loaded = tray_loaded
        if not self.labels:
            return self._finish(at, None)
        return [Divert(Pile(self.labels[0])), *self._ramp(at)]

    def beam(self, blocked: bool, at: float) -> list[Command]:
        if self.done:
            return []
        if self.phase is not Phase.FEED:  # backing out, or not yet feeding: no card
            self._blocked_at = self._cleared_at = None
            return self._advance(at)
        out = self._advance(at)  # a card whose gap has held counts before this edge
        if self.done or self.phase is not Phase.FEED:
            return out
        if blocked:
            if self._cleared_at is not None:  # a drop-out inside the card: the same card
                self._cleared_at = None
            else:
                self._blocked_at = at
            return out
        if self._blocked_at is None or self._cleared_at is not None:
            return out
        self._cleared_at = at
        return [*out, *self._advance(at)]

    def _count(self, at: float) -> list[Command]:
        """The card in the beam has left it and the gap after it held: count it, or
        drop it as a glitch if it was too short."""
        blocked_at, cleared_at = self._blocked_at, self._cleared_at
        self._blocked_at = self._cleared_at = None
        if blocked_at is None or cleared_at is None or cleared_at - blocked_at < self.min_blocked:
            return []  # a glitch, or the jammed card backing out
        label = self.labels[self.counted]
        self.piles[label] += 1
        self.counted += 1
        self._retries_here = 0
        self._last_card = at  # the misfeed timer restarts on a counted card only
        out: list[Command] = [Card(self.counted, self.expected)]
        if self.counted == self.expected:
            return [*out, *self._finish(at, None)]
        out.append(Divert(Pile(self.labels[self.counted])))
        if not self.tray_loaded:  # no more cards will come: two went through as one
            return [*out, *self._finish(at, None)]
        return out

    def tray(self, loaded: bool, at: float) -> list[Command]:
        self.tray_loaded = loaded
        return self._advance(at)

    def volts(self, volts: float, at: float) -> list[Command]:
        """A battery reading under motor load."""
        self._volts = volts
        self._min_volts = volts if self._min_volts is None else min(self._min_volts, volts)
        return self._advance(at)

    def tick(self, at: float) -> list[Command]:
        return self._advance(at)

    def awake(self, at: float) -> list[Command]:
        """The backend's pass loop woke at ``at`` (host time, read on waking): call it
        first, before the inputs that came while it slept. Asleep longer than
        :attr:`blind_limit` since the last call, the loop was frozen: the motor goes off
        and the pass ends ``interrupted``, latched, before anything else is looked at.

        >>> from shuffler.device.contract import FaultLimits
        >>> eng = PassEngine((0, 1), FaultLimits())
        >>> _ = eng.start(0.0)
        >>> eng.awake(0.05), eng.awake(0.1)
        ([], [])
        >>> out = eng.awake(3.1)  # frozen for 3 s
        >>> out[0], out[1].report.fault.kind.value, out[1].latch
        (Motor(speed=0.0), 'interrupted', True)
        """
        if self.done or self.phase is Phase.IDLE:
            return []
        blind, self._awake_at = at - self._awake_at, max(self._awake_at, at)
        if blind <= self.blind_limit:
            return []
        return self._finish(at, frozen_fault(blind, self.counted + 1))

    def stop(self, at: float, kind: FaultKind = FaultKind.STOPPED) -> list[Command]:
        """Motor off now; the pass ends with ``kind`` (a stop, a silent host, a reboot)."""
        if self.done:
            return []
        if self.phase is Phase.IDLE:
            self._start = at
        return self._finish(at, Fault(kind, HALT_MESSAGES[kind], self.counted + 1))

    # -- the rules -----------------------------------------------------------------------
    def _ramp(self, at: float) -> list[Command]:
        if self.quiet:
            return self._hold(Phase.RAMP)
        self.phase, self._phase_at, self._step = Phase.RAMP, at, 0
        return self._advance(at)

    def _hold(self, then: Phase) -> list[Command]:
        """A retry's next move waits, the motor off, until the host is heard again."""
        self.phase, self._held = Phase.HOLD, then
        return self._set_motor(0.0)

    def _back_out(self, at: float) -> list[Command]:
        self.phase, self._phase_at, self._braking = Phase.REVERSE, at, True
        return self._reversing(at)

    def _reversing(self, at: float) -> list[Command]:
        out: list[Command] = []
        if self._braking and at >= self._phase_at + self.brake_s:
            if self.quiet:
                return self._hold(Phase.REVERSE)
            self._braking = False
            out += self._set_motor(-REVERSE_SPEED)
        if not self._braking and \
                at >= self._phase_at + self.brake_s + self.limits.reverse_seconds:
            out += self._set_motor(0.0)
            out += self._ramp(at)
        return out

    def _set_motor(self, speed: float) -> list[Command]:
        if speed == self.motor:
            return []
        self.motor = speed
        return [Motor(speed)]

    def _advance(self, at: float) -> list[Command]:
        """Everything that is due by ``at`` (compared as ``at >= since + limit``, the very
        sum :attr:`deadline` gives, so a tick at the deadline always fires)."""
        out: list[Command] = []
        if self.done:
            return out
        if at >= self._last_tick + TICK_SECONDS:
            self._last_tick = at
            out.append(Tick())
        if at >= self._start + self.limits.max_pass_seconds:
            fault = Fault(FaultKind.TIMEOUT, "The pass ran longer than "
                          f"{self.limits.max_pass_seconds:.0f} s; the motor was stopped.",
                          self.counted + 1)
            return [*out, *self._finish(at, fault)]
        if self.phase is Phase.RAMP:
            while self._step < self.steps and \
                    at >= self._phase_at + self.soft_start_s * self._step / self.steps:
                self._step += 1
                out += self._set_motor(self._step / self.steps)
            if self._step == self.steps:
                self.phase = Phase.FEED
                self._last_card = at  # the misfeed timer runs from full speed
        elif self.phase is Phase.REVERSE:
            out += self._reversing(at)
        elif self.phase is Phase.HOLD:
            if not self.quiet:  # heard again: the retry goes on where it waited
                out += self._ramp(at) if self._held is Phase.RAMP else self._back_out(at)
        elif self.phase is Phase.FEED:
            if self._cleared_at is not None:
                if at >= self._cleared_at + self.min_gap:
                    out += self._count(at)
            elif self._blocked_at is not None:
                if at >= self._blocked_at + self.limits.jam_seconds:
                    out += self._give_up_or_retry(at, FaultKind.JAM)
            elif at >= self._last_card + self.limits.misfeed_seconds:
                if not self.tray_loaded:
                    out += self._finish(at, None)  # the tray ran out: fewer cards than planned
                else:
                    out += self._give_up_or_retry(at, FaultKind.MISFEED)
        return out

    def _give_up_or_retry(self, at: float, kind: FaultKind) -> list[Command]:
        out = self._set_motor(0.0)  # at once
        card = self.counted + 1
        if kind is FaultKind.MISFEED and self._volts is not None \
                and self._volts < self.limits.stall_volts:
            fault = stall_fault(card, self.counted, self.expected, self._volts)
            return [*out, *self._finish(at, fault)]
        if self._retries_here >= self.limits.retries:
            return [*out, *self._finish(at, feed_fault(kind, card, self.counted, self.expected))]
        self._retries_here += 1
        self.retries += 1
        self._blocked_at = self._cleared_at = None  # the next clearing edge: backing out
        if self.can_reverse and self.limits.reverse_seconds > 0:
            return [*out, *self._back_out(at)]  # the motor stays off for brake_s first
        return [*out, *self._ramp(at)]

    def _finish(self, at: float, fault: Fault | None) -> list[Command]:
        out = self._set_motor(0.0)
        self.phase = Phase.DONE
        self.report = PassReport(self.expected, self.counted, (self.piles[0], self.piles[1]),
                                 at - self._start, fault, self._min_volts,
                                 not self.tray_loaded, self.retries)
        return [*out, Done(self.report, fault is not None and fault.kind.latches)]


class EdgeFilter:
    """A glitch filter for one input: a level counts only once it has held ``hold``
    seconds, and is then reported with the time it began. A 50 µs spike, or contact
    bounce that settles within ``hold``, never reaches the engine.

    >>> f = EdgeFilter(0.001, level=False)
    >>> f.feed(True, 1.0), f.feed(False, 1.00005)   # a 50 µs glitch
    ([], [])
    >>> f.feed(True, 2.0), f.poll(2.0005), f.poll(2.001)
    ([], [], [(True, 2.0)])
    """

    def __init__(self, hold: float, level: bool) -> None:
        self.hold, self.level = hold, level
        self._pending: tuple[bool, float] | None = None

    @property
    def deadline(self) -> float:
        """When the level now pending will have held long enough (inf: none pending)."""
        return math.inf if self._pending is None else self._pending[1] + self.hold

    @property
    def known_until(self) -> float:
        """The input's level is known up to this time: when the level now pending began
        (it may yet prove a glitch, or an edge reported with that time), inf when none
        is. An engine fed through the filter is advanced no further, or it would decide
        (a card's gap held) on a level the filter has not yet let through.

        >>> f = EdgeFilter(0.001, level=False)
        >>> f.known_until, f.feed(True, 1.0), f.known_until
        (inf, [], 1.0)
        """
        return math.inf if self._pending is None else self._pending[1]

    def feed(self, level: bool, at: float) -> list[tuple[bool, float]]:
        out = self.poll(at)
        if level == self.level:
            self._pending = None  # back where it was: what came before was a glitch
        elif self._pending is None:
            self._pending = (level, at)
        return out + self.poll(at)

    def poll(self, at: float) -> list[tuple[bool, float]]:
        if self._pending is None or at < self._pending[1] + self.hold:
            return []
        edge, self._pending = self._pending, None
        self.level = edge[0]
        return [edge]
