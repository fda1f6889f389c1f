"""Runs one pass on any device: checks first, then the pass, then the count.

The controller owns what the host decides: refusing to start with a latched
fault or a flat battery, checking the count, recording faults in the state.
The device owns what must happen at once (stopping the motor).
"""

from __future__ import annotations

from dataclasses import replace

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

    def __init__(
        self, device: ShufflerDevice, store: StateStore, battery: BatteryConfig | None = None
    ) -> None:
        self.device = device
        self.store = store
        self.battery_config = battery or BatteryConfig()

    def latched_fault(self) -> Fault | None:
        state = self.store.load()
        if state.fault:
            return Fault.from_dict(state.fault)
        return self.device.health().fault

    def check_ready(self) -> None:
        """Raise if nothing may move: a latched fault, or a battery too flat to finish."""
        fault = self.latched_fault()
        if fault is not None:
            raise FaultLatchedError(f"A {fault.kind.value} fault is latched: {fault.message}")
        reading = self.device.battery()
        critical = self.battery_config.critical_volts
        if not reading.under_load and reading.volts < critical:
            self.device.show(Status(Signal.LOW_BATTERY))
            raise LowBatteryError(
                f"Battery {reading.volts:.2f} V at rest is below the {critical:.2f} V needed to "
                "finish a pass: change the 9 V battery. Nothing was started."
            )

    def run_pass(self, plan: PassPlan, on_card: CardCallback | None = None) -> PassReport:
        self.check_ready()
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
        def change(s: State) -> None:
            s.passes += 1
            s.cards += report.counted
            if report.fault is not None:
                s.faults += 1
                s.jams += report.fault.kind is FaultKind.JAM
                if report.fault.kind.latches:
                    s.fault = report.fault.to_dict()

        self.update(change)
