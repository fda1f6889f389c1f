"""Runs one pass on any device: checks first, then the pass, then the count.

The controller owns what the host decides: refusing to start with a latched
fault or a flat battery, checking the count, recording faults in the state.
The device owns what must happen at once (stopping the motor).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from shuffler import __version__
from shuffler.config import BatteryConfig
from shuffler.control.touch import TouchPolicy
from shuffler.core import battery as batt
from shuffler.core import words
from shuffler.device.contract import (
    CardCallback,
    Fault,
    FaultKind,
    PassReport,
    ShufflerDevice,
    Signal,
    Status,
)
from shuffler.errors import (
    BatteryMonitorError,
    FaultLatchedError,
    FileAccessError,
    LowBatteryError,
    OverVoltageError,
    TrayEmptyError,
    UnsavedFaultError,
)
from shuffler.limits import over_voltage
from shuffler.logs import get_logger
from shuffler.store.audit import AuditLog
from shuffler.store.lock import LockLostError
from shuffler.store.state import FAULT, Invalid, State, StateStore

if TYPE_CHECKING:
    from shuffler.core.planning import PassPlan

log = get_logger("shuffler.controller")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def count_fault(report: PassReport) -> Fault | None:
    """A pass that counted fewer than it planned, the tray empty, is degraded (a double
    feed: not latched). One that reached its count with cards still in the tray (or
    counted more than it planned) counted wrong: a latched ``miscount``."""
    if report.fault is not None:
        return report.fault
    counted, expected = report.counted, report.expected
    if counted > expected or (counted == expected and not report.tray_empty):
        return Fault(  # the beam counted more cards than went through it
            FaultKind.MISCOUNT,
            f"The beam counted {counted} of {expected} cards but the tray still holds "
            "cards: it saw a card as two (a drop-out inside a card: a dirty or misaligned "
            "beam, a bent or holed card), or the tray holds more cards than the pass was "
            f"for. The count cannot be trusted. Clean and check the beam, put every card "
            f"back in the tray (exactly {expected}), then run `shuffler clear` and start "
            "again.",
        )
    if counted < expected:
        return Fault(
            FaultKind.COUNT_MISMATCH,
            f"Counted {counted} of {expected} cards: two cards went "
            "through as one (double feed) or cards are missing. The pass is done but "
            f"degraded; check that the pack holds {expected} cards.",
        )
    return None


def interrupted_fault(flight: dict[str, Any]) -> Fault:
    """The latch a pass holds while it runs, left by anything that stops it unfinished."""
    where = ""
    if flight.get("hand") is not None:
        where = f" (pass {flight.get('pass', '?')} of hand {flight['hand']})"
    return Fault(FaultKind.INTERRUPTED,
                 f"A pass{where} did not finish (a crash, a kill, the power or a failed "
                 "write): cards may be in the machine. Put every card back in the tray, "
                 "then run `shuffler clear` and start again.")


class PassController:
    """One pass at a time on ``device``, with the state kept in ``store``."""

    #: battery history kept in the state file, per pass
    HISTORY = 200
    #: the wall clock of the audit's ``started`` and ``time`` (for a person to read; the
    #: log's ``seq`` is the order), a method so a test can step it back
    wall: Callable[[], str] = staticmethod(_now)

    def __init__(self, device: ShufflerDevice, store: StateStore,
                 battery: BatteryConfig | None = None, passes_per_hand: int = 4) -> None:
        self.device = device
        self.store = store
        self.audit = AuditLog(store.folder / "audit.jsonl", store.reserve)
        #: called before every pass: raises if this process no longer owns the machine
        #: (the CLI and the service give their lock's ``verify``)
        self.guard: Callable[[], None] = lambda: None
        #: told every status shown to the dealer through :meth:`show`, before the device
        #: shows it (the service gives its own, which publishes it to its faces)
        self.on_show: Callable[[Status], None] = lambda status: None
        self.battery_config = battery or BatteryConfig()
        self.passes_per_hand = passes_per_hand
        self._job_lock = threading.Lock()
        self._job_active = False  # a pass or hand was accepted and has not ended
        self._job_stopped = False
        #: what the dealer's touch means (shuffler/control/touch.py), between hands and
        #: between passes alike: one lock-out, kept here beside the job it follows
        self.touch = TouchPolicy()
        #: a hand paused with its plan (shuffler.control.hand.Paused): in this process's
        #: memory only, never written, so a restart loses it
        self.paused: Any = None

    def show(self, status: Status) -> None:
        """Show ``status`` to the dealer (:meth:`ShufflerDevice.show`): the one way
        everything above the device does, so ``on_show`` hears each one. It hears it
        first: a simulated dealer acts inside the device's show, and what it does follows
        the light."""
        self.on_show(status)
        self.device.show(status)

    # -- stop is a state of the job, not a pin write -------------------------------------
    def begin_job(self) -> None:
        """A pass or a hand was accepted: from now until :meth:`end_job` a stop is kept
        and honoured at every point (before the motor starts, during a pass, between the
        passes of a hand)."""
        with self._job_lock:
            self._job_active, self._job_stopped = True, False

    def end_job(self) -> None:
        with self._job_lock:
            self._job_active = False

    def request_stop(self) -> bool:
        """Motor off now, from any thread; the job (if any) is stopped for good. True
        when there was a job to stop, False when the stop found nothing to stop."""
        with self._job_lock:
            active = self._job_active
            if active:
                self._job_stopped = True
            self.device.stop()  # armed or running: the device keeps the stop too
        return active

    @property
    def stop_requested(self) -> bool:
        """The job in hand was stopped: start nothing more for it."""
        return self._job_active and self._job_stopped

    def latched_fault(self) -> Fault | None:
        state = self.store.load()
        if state.fault is not None:  # the schema allows only None or a whole fault
            return Fault.from_dict(state.fault)
        return self.device.health().fault

    def battery_estimate(self, cards: int) -> batt.Estimate:
        """Charge, passes and hands left for loads of ``cards``, from the reading now and
        the charge each recorded pass used."""
        cfg = self.battery_config
        reading = self.device.battery()
        if not reading.measured:
            return batt.NOT_MEASURED
        if reading.monitor is not None and reading.monitor.blocks:
            return batt.monitor_failed(reading.monitor)  # the history is left as it was
        history = [batt.PassRecord(int(c), q) for c, q in self.store.load().battery]
        est = batt.estimate(reading.volts, reading.under_load, history, cards=cards,
                            passes_per_hand=self.passes_per_hand, chemistry=cfg.chemistry,
                            cutoff_load_volts=cfg.cutoff_load_volts, low_volts=cfg.low_volts,
                            critical_volts=cfg.critical_volts)
        if est.swapped:  # another block: what the old one taught says nothing of this one
            log.info("battery changed: the estimate starts again", volts=reading.volts)
            self.update(lambda s: setattr(s, "battery", []))
        return replace(est, monitor=reading.monitor, reads_low_by=reading.reads_low_by)

    def check_ready(self, cards: int, passes: int = 1, *, what: str = "pass") -> None:
        """Raise if nothing may move: a latched fault, an empty tray, or a battery that
        cannot finish ``passes`` passes of ``cards`` cards. ``what`` is refused: the
        ``pass`` or the ``hand`` the refusal names."""
        fault = self.latched_fault()
        if fault is not None:
            article = "An" if fault.kind.value[0] in "aeiou" else "A"
            raise FaultLatchedError(f"{article} {fault.kind.value} fault is latched: "
                                    f"{fault.message}")
        if not self.device.health().tray_loaded:
            raise TrayEmptyError(f"The tray is empty: put the {cards} cards in the tray, "
                                 "then start again. Nothing was started.")
        est = self.battery_estimate(cards)
        if est.monitor is not None and est.monitor.blocks:
            # nothing is known of the battery: not "low battery", and not the battery's fix
            self.show(Status(Signal.FAULT))
            raise BatteryMonitorError(f"{est.monitor.message} This {what} was not started.")
        over = over_voltage(est.volts, est.reads_low_by)
        if over is not None:  # the driver's limit, whatever the charge says
            self.show(Status(Signal.FAULT))
            raise OverVoltageError(f"{over} This {what} was not started.")
        why = batt.refusal(est, passes)
        if why is None:
            return
        where = "under load" if est.under_load else "at rest"
        block = " (a different block from the last pass's)" if est.swapped else ""
        left = (f"about {words.passes(est.passes_left)}" if est.passes_left
                else "not one pass")
        figures = (f"Battery {est.volts:.2f} V {where}{block}, {est.percent:.0f}% "
                   f"({self.battery_config.chemistry}): {left} of "
                   f"{words.plural(cards, 'card')} left, {passes} asked.")
        self.show(Status(Signal.LOW_BATTERY))
        raise LowBatteryError(f"{figures} {why} This {what} was not started.")

    def run_pass(self, plan: PassPlan, on_card: CardCallback | None = None,
                 passes_after: int = 0, context: dict[str, Any] | None = None, *,
                 on_tick: Callable[[], None] | None = None) -> PassReport:
        """Run ``plan``; ``passes_after`` more passes must also fit in the battery.

        Before the motor starts the state records, durably, the pass in flight and a
        latched ``interrupted`` fault ("cards may be in the machine"); a pass that ends
        replaces that latch with its own result, in the audit log (with ``context``:
        hand, pass, mode) and the counters. A crash, a kill or a write that fails at
        any point leaves the latch, so the next pass is refused until the dealer has
        put the cards back and cleared it; nothing is counted twice. When the audit
        log or the state cannot be written the motor never starts. ``on_tick`` goes to
        a device that takes it (called while the pass runs).
        """
        if self.stop_requested:
            return self._never_started(plan)
        self.guard()
        self.check_ready(plan.cards, 1 + passes_after)
        self.audit.check_writable()
        with self._job_lock:
            if self._job_active and self._job_stopped:
                return self._never_started(plan)
            self.device.arm()  # a stop from now on keeps the motor off, even before it starts
        entry = self._begin(plan.cards, context or {})
        self.show(Status(Signal.RUNNING))
        try:
            report = self.device.run_pass(plan, on_card, on_tick=on_tick)
        except BaseException:  # a bug, a signal: the latch stays; record the pass cut off
            self.device.stop()
            self._settle_cut_off(entry)
            raise
        self.device.stop()
        report = replace(report, fault=count_fault(report))
        problems = []
        try:
            other = self.audit.append(self._audit_entry(entry, report))
        except FileAccessError as e:
            problems.append(str(e))
        else:
            if other is not None:  # another process settled it: its record and latch stand
                raise LockLostError(self._recorded_elsewhere(other, report))
        try:
            self._record(report)
        except FileAccessError as e:
            problems.append(str(e))
        if problems:
            raise self._unsaved(report, problems)
        log.info(  # as reports.pass_log says it (the CLI logs a service's passes so)
            "pass", expected=report.expected, counted=report.counted,
            piles=list(report.piles), seconds=round(report.seconds, 3),
            fault=report.fault.kind.value if report.fault else None, retries=report.retries,
            min_volts=None if report.min_volts is None else round(report.min_volts, 2))
        if report.fault is not None:
            self.show(Status(Signal.FAULT if report.fault.kind.latches else Signal.READY))
            log.info("pass fault", kind=report.fault.kind.value, message=report.fault.message)
        return report

    def _never_started(self, plan: PassPlan) -> PassReport:
        """The report of a pass stopped before it started: nothing moved, nothing counted."""
        from shuffler.device.engine import HALT_MESSAGES  # only then: status loads no engine

        cards = plan.cards  # the count only: a plan's piles are never logged
        log.info("pass stopped before it started", expected=cards)
        stopped = Fault(FaultKind.STOPPED, HALT_MESSAGES[FaultKind.STOPPED], 1)
        return PassReport(cards, 0, (0, 0), 0.0, stopped, None, False)

    def _unsaved(self, report: PassReport, problems: list[str]) -> Exception:
        """The error for a pass whose end could not be written: a latching fault is
        still shown with its exit code (3) and kept in memory; either way the state file
        keeps the pass's ``interrupted`` latch, so nothing runs until ``clear``."""
        ran = (f"The pass ran ({report.counted} of {report.expected} cards"
               + (f", {report.fault.kind.value}" if report.fault else "") + ")")
        tail = (f"{ran}, but {'; '.join(problems)}. This process keeps the result in "
                "memory; the state file still holds a latched `interrupted` fault, so no "
                "pass runs until the cards are back in the tray and `shuffler clear` has "
                "run.")
        if report.fault is not None and report.fault.kind.latches:
            return UnsavedFaultError(f"{report.fault.message} {tail}")
        return FileAccessError(tail)

    def _recorded_elsewhere(self, other: dict[str, Any], report: PassReport) -> str:
        how = "interrupted" if other.get("interrupted") else "ended"
        return (f"The pass ran ({report.counted} of {report.expected} cards), but another "
                f"process already recorded pass {other.get('id')} as {how} in "
                f"{self.audit.path}: was the machine's lock file removed while this one "
                "ran? This pass's end is not recorded a second time, and that record and "
                "its latch stand: put every card back in the tray, then `shuffler status` "
                "and `shuffler clear`.")

    def _settle_cut_off(self, entry: dict[str, Any]) -> None:
        """A pass that ended by an exception: recorded as interrupted, its latch kept
        (best effort: when even this cannot be written the next start settles it)."""
        try:
            if self.audit.append(self._cut_off(entry)) is not None:
                return  # settled by another process already: its counters stand
            self.update(lambda s: self._interrupted(s, entry))
        except Exception as e:  # the original error matters more than this one
            log.warning("could not record the interrupted pass", error=str(e))

    def clear(self) -> bool:
        """The dealer's ``clear``: true when the machine reports itself clear."""
        if not self.device.clear_fault() or self.device.health().fault is not None:
            return False
        self.update(lambda s: setattr(s, "fault", None))
        self.show(Status(Signal.READY))
        return True

    def update(self, change) -> State:
        state = self.store.load()
        change(state)
        self.store.save(state)
        return state

    # -- the journal: in flight, audit, recovery ---------------------------------------
    def _begin(self, cards: int, context: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = {}

        def change(s: State) -> None:
            entry.update(id=s.next_pass_id, started=self.wall(), cards=cards,
                         device=self.device.info.kind, **context)
            s.next_pass_id += 1
            s.in_flight = dict(entry)
            s.fault = interrupted_fault(entry).to_json()  # until the pass ends well
        self.update(change)
        return entry

    def _audit_entry(self, entry: dict[str, Any], report: PassReport) -> dict[str, Any]:
        return {**entry, "time": self.wall(), "counted": report.counted,
                "expected": report.expected, "piles": list(report.piles),
                "seconds": round(report.seconds, 3),
                "volts": None if report.min_volts is None else round(report.min_volts, 3),
                "fault": report.fault.to_json() if report.fault else None,
                "version": __version__}

    def recover(self) -> dict[str, Any] | None:
        """After a crash: motor off, and a pass left in flight is settled. If the audit
        log has it, it finished (its counters are brought up to date); if not, it was
        interrupted and is recorded as such. Returns the audit entry it settled."""
        self.device.stop()
        for name in self.store.clean():
            log.info("removed a temporary file a killed write left", name=name)
        state = self.store.load()
        flight = state.in_flight
        if not flight:
            return None
        cut_off = self._cut_off(flight)
        done = self.audit.append(cut_off)  # the record there if the pass has one already
        if done is None:
            done = cut_off
            log.warning("interrupted pass recorded", id=flight["id"])

        def change(s: State) -> None:
            if done.get("interrupted"):
                self._interrupted(s, flight)
                return
            # finished, but the crash came before the counters and latch were saved
            counted = done.get("counted")
            if s.fault == interrupted_fault(flight).to_json():
                s.fault = None  # the pass ended: its own result replaces the latch
            self._count(s, counted if type(counted) is int and counted >= 0 else 0,
                        self._logged_fault(done))
            s.in_flight = None
        self.update(change)
        return done

    def _cut_off(self, entry: dict[str, Any]) -> dict[str, Any]:
        """The audit record of a pass that did not finish."""
        return {**entry, "time": self.wall(), "interrupted": True, "counted": None,
                "version": __version__}

    @staticmethod
    def _interrupted(s: State, entry: dict[str, Any]) -> None:
        """Count the pass ``entry`` as interrupted; its latch stays (or is set)."""
        s.interrupted += 1
        s.in_flight = None
        s.fault = s.fault or interrupted_fault(entry).to_json()

    @staticmethod
    def _logged_fault(entry: dict[str, Any]) -> Fault | None:
        """The fault an audit record holds; one that cannot be read still latches."""
        if entry.get("fault") is None:
            return None
        try:
            FAULT(entry["fault"], "fault")
            return Fault.from_dict(entry["fault"])
        except Invalid as e:
            return Fault(FaultKind.STATE_DAMAGED,
                         f"The audit record of pass {entry.get('id')} holds a fault that "
                         f"cannot be read ({e}). Check the machine: no card in the throat, "
                         "the pack in the tray; then run `shuffler clear`.")

    @staticmethod
    def _count(s: State, counted: int, fault: Fault | None) -> None:
        s.passes += 1
        s.cards += counted
        if fault is not None:
            s.faults += 1
            s.jams += fault.kind is FaultKind.JAM
            if fault.kind.latches:
                s.fault = fault.to_json()

    def _record(self, report: PassReport) -> None:
        curve = batt.CURVES[self.battery_config.chemistry]

        def change(s: State) -> None:
            s.in_flight = None
            s.fault = None  # the pass's interrupted latch: its result replaces it
            self._count(s, report.counted, report.fault)
            if report.min_volts is not None and report.counted:
                if s.battery and (curve.charge_at(report.min_volts, True)
                                  > curve.charge_at(s.battery[-1][1], True) + batt.NEW):
                    s.battery.clear()  # a fresh battery: start learning again
                s.battery.append([report.counted, round(report.min_volts, 4)])
                del s.battery[:-self.HISTORY]

        self.update(change)
