"""Typed events from the service's deciding loop, for faces that want objects, not dicts.

:meth:`shuffler.service.loop.Service.subscribe_events` delivers, in the order they happen:

- :class:`PassStarted` (number, of) and :class:`CardCounted` (counted, expected);
- :class:`PassReported`: the pass's report as ``shuffler pass --json`` gives it;
- :class:`HandSummary`: the hand's summary as ``shuffler hand --json`` gives it;
- :class:`StateChanged` (the status snapshot, after every job and every 2 s idle),
  :class:`FaultChanged` (the latched fault came or went) and :class:`BatteryChanged`.

Every field is what a client of the socket may see: counts, piles, faults, volts,
never a plan or the card order. A callback runs on the service's threads and must
not block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PassStarted:
    number: int
    of: int


@dataclass(frozen=True)
class CardCounted:
    counted: int
    expected: int


@dataclass(frozen=True)
class PassReported:
    report: dict[str, Any]


@dataclass(frozen=True)
class HandSummary:
    hand: dict[str, Any]


@dataclass(frozen=True)
class StateChanged:
    status: dict[str, Any]


@dataclass(frozen=True)
class FaultChanged:
    fault: dict[str, Any] | None  # None: cleared


@dataclass(frozen=True)
class BatteryChanged:
    battery: dict[str, Any]


Event = (PassStarted | CardCounted | PassReported | HandSummary | StateChanged
         | FaultChanged | BatteryChanged)


class Translator:
    """Turns what the service publishes (kind, body) into typed events; remembers the
    last fault and battery so that only changes are told."""

    def __init__(self) -> None:
        self._fault: Any = ()
        self._battery: Any = ()

    def __call__(self, kind: str, body: Any) -> list[Event]:
        if kind == "event":
            return self._progress(body)
        if kind == "result" and "hand" in body:
            return [HandSummary(body["hand"])]
        if kind == "result" and "pass" in body:
            return [PassReported(body["pass"])]
        if kind == "status":
            out: list[Event] = [StateChanged(body)]
            if body.get("fault") != self._fault:
                self._fault = body.get("fault")
                out.append(FaultChanged(self._fault))
            return out
        if kind == "battery" and body != self._battery:
            self._battery = body
            return [BatteryChanged(body)]
        return []

    @staticmethod
    def _progress(msg: dict[str, Any]) -> list[Event]:
        kind = msg.get("event")
        if kind == "pass_start":
            return [PassStarted(msg["number"], msg["of"])]
        if kind == "card":
            return [CardCounted(msg["counted"], msg["expected"])]
        if kind == "pass":  # a pass of a hand, as it ends
            return [PassReported(msg["pass"])]
        return []
