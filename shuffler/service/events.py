"""What the service says to its faces: frozen event types, the one bus.

:meth:`shuffler.service.hub.Publisher.subscribe` delivers, in the order they happen:

- :class:`SignalShown`: each light and beep the dealer is shown (a
  :class:`~shuffler.device.contract.Status`), before the device shows it;
- :class:`PassStarted` (number, of) and :class:`CardCounted` (counted, expected);
- :class:`PassReported`: a pass's report as ``shuffler pass --json`` gives it, as each
  pass (a lone one, or each of a hand) ends;
- :class:`HandSummary`: the hand's summary as ``shuffler hand --json`` gives it, and what
  ``status`` says of it as the last hand;
- :class:`TouchIgnored`: a touch that started nothing, and why;
- :class:`ScoreChanged`: the game, after a change to the score;
- :class:`StateChanged` (the status snapshot, after every job and every 2 s idle),
  :class:`FaultChanged` (the latched fault came or went; the first snapshot tells it
  too) and :class:`BatteryChanged` (the battery's figures changed).

Every field is what a client of the socket may see: counts, piles, faults, volts,
never a plan or the card order. Nothing on the bus is JSON, and nothing on it is a dict
or a list: the objects it carries are frozen (:func:`shuffler.service.results.freeze`),
and the faces make JSON at their edges (the page, MQTT; :func:`~shuffler.service.results.thaw`),
as the socket does. A callback runs on the service's threads and
must not block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shuffler.device.contract import Status
from shuffler.service.results import Frozen, freeze


@dataclass(frozen=True)
class SignalShown:
    status: Status


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
    report: Frozen


@dataclass(frozen=True)
class HandSummary:
    hand: Frozen
    last: Frozen  # what the state keeps of it (control.reports.last_hand)


@dataclass(frozen=True)
class TouchIgnored:
    why: str


@dataclass(frozen=True)
class ScoreChanged:
    score: Frozen | None  # the game; None: no game yet


@dataclass(frozen=True)
class StateChanged:
    status: Frozen


@dataclass(frozen=True)
class FaultChanged:
    fault: Frozen | None  # None: cleared


@dataclass(frozen=True)
class BatteryChanged:
    battery: Frozen


Event = (SignalShown | PassStarted | CardCounted | PassReported | HandSummary | TouchIgnored
         | ScoreChanged | StateChanged | FaultChanged | BatteryChanged)


def progress(message: dict[str, Any]) -> Event | None:
    """A socket client's progress event (``shuffler/schemas/event.json``) as the faces hear
    it, or None for one they do not (a pile to stack is its :class:`SignalShown`; a
    resumed hand is told only to the client that asked)."""
    match message.get("event"):
        case "pass_start":
            return PassStarted(message["number"], message["of"])
        case "card":
            return CardCounted(message["counted"], message["expected"])
        case "pass":  # a pass of a hand, as it ends
            return PassReported(freeze(message["pass"]))
        case "touch_ignored":
            return TouchIgnored(message["why"])
    return None

