"""Runs one pass on any device: checks first, then the pass, then the count.

The controller owns what the host decides: refusing to start with a latched
fault or a flat battery, checking the count, recording faults in the state.
The device owns what must happen at once (stopping the motor).
"""

from __future__ import annotations

from dataclasses import replace

from . import battery as batt
from .config import BatteryConfig
from .device import CardCallback, Fault, FaultKind, PassReport, ShufflerDevice, Signal, Status
from .errors import FaultLatchedError, LowBatteryError
from .logs import get_logger
from .planning import PassPlan
from .state import State, StateStore

log = get_logger("shuffler.controller")


def count_fault(report: PassReport) -> Fault | None:
    """A pass that counted other than it planned is degraded (not latched)."""
    if report.fault is not None:
        return report.fault
    if report.counted < report.expected:
        return Fault(
            FaultKind.COUNT_MISMATCH,
            f"Counted {report.counted} of {report.expected} cards: two cards went "
            "through as one (double feed) or cards are missing. The pass is done but "
            f"degraded; check that the pack holds {report.expected} cards.",
        )
    if not report.tray_empty:
        return Fault(
            FaultKind.COUNT_MISMATCH,
            f"Dealt {report.counted} cards but the tray still holds cards: the pack "
            f"has more than {report.expected}. Set --cards to the real count.",
        )
    return None


class PassController:
    """One pass at a time on ``device``, with the state kept in ``store``."""

    #: battery history kept in the state file, per pass
    HISTORY = 200

    def __init__(self, device: ShufflerDevice, store: StateStore,
                 battery: BatteryConfig | None = None, passes_per_hand: int = 4) -> None:
        self.device = device
        self.store = store
        self.battery_config = battery or BatteryConfig()
        self.passes_per_hand = passes_per_hand

    def latched_fault(self) -> Fault | None:
        state = self.store.load()
        if state.fault:
            return Fault.from_dict(state.fault)
        return self.device.health().fault

    def battery_estimate(self, cards: int) -> batt.Estimate:
        """Charge, passes and hands left for loads of ``cards``, from the reading now and
        the charge each recorded pass used."""
        cfg = self.battery_config
        reading = self.device.battery()
        history = [batt.PassRecord(int(c), q) for c, q in self.store.load().battery]
        return batt.estimate(reading.volts, reading.under_load, history, cards=cards,
                             passes_per_hand=self.passes_per_hand, chemistry=cfg.chemistry,
                             cutoff_load_volts=cfg.cutoff_load_volts)

    def check_ready(self, cards: int, passes: int = 1) -> None:
        """Raise if nothing may move: a latched fault, or a battery that cannot finish
        ``passes`` passes of ``cards`` cards."""
        fault = self.latched_fault()
        if fault is not None:
            raise FaultLatchedError(f"A {fault.kind.value} fault is latched: {fault.message}")
        est = self.battery_estimate(cards)
        critical = self.battery_config.critical_volts
        where = "under load" if est.under_load else "at rest"
        figures = (f"Battery {est.volts:.2f} V {where}, {est.percent:.0f}% "
                   f"({self.battery_config.chemistry}): about {est.passes_left} passes of "
                   f"{cards} cards left, {passes} asked.")
        too_low = not est.under_load and est.volts < critical
        if too_low or est.passes_left < passes:
            self.device.show(Status(Signal.LOW_BATTERY))
            why = f" It is below the {critical:.2f} V a pass needs at rest." if too_low else ""
            raise LowBatteryError(f"{figures}{why} Change the 9 V battery; nothing was started.")

    def run_pass(self, plan: PassPlan, on_card: CardCallback | None = None,
                 passes_after: int = 0) -> PassReport:
        """Run ``plan``; ``passes_after`` more passes must also fit in the battery."""
        self.check_ready(plan.cards, 1 + passes_after)
        self.device.show(Status(Signal.RUNNING))
        try:
            report = self.device.run_pass(plan, on_card)
        finally:
            self.device.stop()
        report = replace(report, fault=count_fault(report))
        self._record(report)
        log.info(
            "pass",
            expected=report.expected,
            counted=report.counted,
            piles=list(report.piles),
            seconds=round(report.seconds, 3),
            fault=report.fault.kind.value if report.fault else None,
            min_volts=report.min_volts,
        )
        if report.fault is not None:
            self.device.show(Status(Signal.FAULT if report.fault.kind.latches else Signal.READY))
            log.info("pass fault", kind=report.fault.kind.value, message=report.fault.message)
        return report

    def clear(self) -> bool:
        """The dealer's ``clear``: true when the machine reports itself clear."""
        if not self.device.clear_fault() or self.device.health().fault is not None:
            return False
        self.update(lambda s: setattr(s, "fault", None))
        self.device.show(Status(Signal.READY))
        return True

    def update(self, change) -> State:
        state = self.store.load()
        change(state)
        self.store.save(state)
        return state

    def _record(self, report: PassReport) -> None:
        curve = batt.CURVES[self.battery_config.chemistry]

        def change(s: State) -> None:
            s.passes += 1
            s.cards += report.counted
            if report.min_volts is not None and report.counted:
                if s.battery and (curve.charge_at(report.min_volts, True)
                                  > curve.charge_at(s.battery[-1][1], True) + batt.NEW):
                    s.battery.clear()  # a fresh battery: start learning again
                s.battery.append([report.counted, round(report.min_volts, 4)])
                del s.battery[:-self.HISTORY]
            if report.fault is not None:
                s.faults += 1
                s.jams += report.fault.kind is FaultKind.JAM
                if report.fault.kind.latches:
                    s.fault = report.fault.to_dict()

        self.update(change)
