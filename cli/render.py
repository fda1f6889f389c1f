"""Rendering: JSON objects for ``--json`` (stdout), text and progress for people."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from shuffler.device import PassReport
from shuffler.hand import HandReport, PassRecord


def pass_dict(report: PassReport, number: int = 1, stacking=None) -> dict[str, Any]:
    return {
        "number": number,
        "counted": report.counted,
        "expected": report.expected,
        "piles": list(report.piles),
        "seconds": round(report.seconds, 3),
        "fault": report.fault.to_dict() if report.fault else None,
        "min_volts": None if report.min_volts is None else round(report.min_volts, 3),
        "retries": report.retries,
        "stacking": stacking.name.lower() if stacking is not None else None,
    }


def record_dict(record: PassRecord) -> dict[str, Any]:
    return pass_dict(record.report, record.number, record.stacking)


def hand_dict(hand: HandReport) -> dict[str, Any]:
    return {
        "number": hand.number,
        "dealer": hand.dealer,
        "next_dealer": hand.next_dealer,
        "mode": hand.mode.value,
        "passes_planned": hand.passes_planned,
        "completed": hand.completed,
        "tracking": hand.tracking,
        "distance": None if hand.distance is None else float(hand.distance),
        "resumed_at": hand.resumed_at,
        "passes": [record_dict(r) for r in hand.records],
    }


def pass_line(report: PassReport, number: int | None = None, of: int | None = None) -> str:
    head = f"pass {number}/{of}" if number and of else "pass"
    line = (
        f"{head}: {report.counted}/{report.expected} cards counted, "
        f"piles {report.piles[0]} + {report.piles[1]}, {report.seconds:.1f} s"
    )
    if report.min_volts is not None:
        line += f", battery {report.min_volts:.2f} V under load"
    return line


def hand_summary(hand: HandReport) -> str:
    done = len(hand.records)
    mode = "coin flips" if hand.mode.value == "coin" else "planned"
    if hand.completed:
        return (
            f"hand {hand.number}: dealt by {hand.dealer}; {done} of {hand.passes_planned} "
            f"passes done ({mode}, {distance_text(hand.distance)}); "
            f"{hand.next_dealer} deals next"
        )
    return (
        f"hand {hand.number}: stopped after {done} of {hand.passes_planned} passes; "
        f"{hand.dealer} still deals"
    )


def distance_text(distance) -> str:
    if distance is None:
        return "distance from random unknown: a double feed on the last pass"
    if distance == 0:
        return "exactly random"
    return f"distance from random {float(distance):.2g}"


class Progress:
    """A one-line progress bar on stderr, drawn only on a terminal."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.label = "pass"

    def start(self, number: int, of: int) -> None:
        self.label = f"pass {number}/{of}"

    def card(self, counted: int, expected: int) -> None:
        if not self.enabled:
            return
        filled = self.width * counted // max(expected, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {counted}/{expected}")
        self.stream.flush()

    def end(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
