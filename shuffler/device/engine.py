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
- ``DONE``: the motor is off and the report is out. A stop (or a halt with
  another kind, such as a silent host) and the pass-time limit reach ``DONE``
  from any state; the motor goes off in the same step.

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
    Fault,
    FaultKind,
    FaultLimits,
    PassReport,
    feed_fault,
    stall_fault,
)

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


class Phase(enum.Enum):
    IDLE = "idle"
    RAMP = "ramp"
    FEED = "feed"
    REVERSE = "reverse"
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
                 soft_start_s: float = 0.0, soft_start_steps: int = 5,
                 can_reverse: bool = True, min_blocked: float = 0.0,
                 min_gap: float = 0.0, brake_s: float = 0.0) -> None:
        self.labels = tuple(labels)
        self.limits = limits
        self.soft_start_s = soft_start_s
        self.steps = max(1, soft_start_steps) if soft_start_s > 0 else 1
        self.can_reverse = can_reverse
        self.min_blocked = min_blocked
        self.min_gap = min_gap
        self.brake_s = brake_s
        self._braking = False  # in REVERSE: the motor still off for brake_s
        self.phase = Phase.IDLE
        self.counted = self.retries = self._retries_here = 0
        self.piles = [0, 0]
        self.motor = 0.0
        self.tray_loaded = True
        self.report: PassReport | None = None
        self._start = self._phase_at = self._last_card = self._last_tick = 0.0
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
        self._start = self._last_tick = at
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

    def stop(self, at: float, kind: FaultKind = FaultKind.STOPPED) -> list[Command]:
        """Motor off now; the pass ends with ``kind`` (a stop, a silent host, a reboot)."""
        if self.done:
            return []
        if self.phase is Phase.IDLE:
            self._start = at
        return self._finish(at, Fault(kind, HALT_MESSAGES[kind], self.counted + 1))

    # -- the rules -----------------------------------------------------------------------
    def _ramp(self, at: float) -> list[Command]:
        self.phase, self._phase_at, self._step = Phase.RAMP, at, 0
        return self._advance(at)

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
            if self._braking and at >= self._phase_at + self.brake_s:
                self._braking = False
                out += self._set_motor(-REVERSE_SPEED)
            if not self._braking and \
                    at >= self._phase_at + self.brake_s + self.limits.reverse_seconds:
                out += self._set_motor(0.0)
                out += self._ramp(at)
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
            self.phase, self._phase_at = Phase.REVERSE, at
            if self.brake_s > 0:
                self._braking = True  # the motor stays off for brake_s first
                return out
            return [*out, *self._set_motor(-REVERSE_SPEED)]
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
