"""What the service says to its faces: frozen event types, the one bus.

:meth:`shuffler.service.hub.Publisher.subscribe` delivers, in the order they happen:

- :class:`SignalShown`: each light and beep the dealer is shown (a
  :class:`~shuffler.device.contract.Status`), before the device shows it;
- :class:`PassStarted` (number, of) and :class:`CardCounted` (counted, expected);
- :class:`PassReported`: a pass's report (a
  :class:`~shuffler.control.reports.PassResult`), as each pass (a lone one, or each of a
  hand) ends;
- :class:`HandSummary`: the hand's summary (a :class:`~shuffler.control.reports.HandResult`)
  and what ``status`` says of it as the last hand;
- :class:`TouchIgnored`: a touch that started nothing, and why;
- :class:`ScoreChanged`: the game, after a change to the score;
- :class:`StateChanged` (the status snapshot, after every job and every 2 s idle),
  :class:`FaultChanged` (the latched fault came or went; the first snapshot tells it
  too) and :class:`BatteryChanged` (the battery's figures changed).

Every field is what a client of the socket may see: counts, piles, faults, volts,
never a plan or the card order. Nothing on the bus is JSON, and nothing on it is a dict
or a list: it carries the frozen records of :mod:`shuffler.control.reports` (the score's:
:mod:`shuffler.control.scorebook`), and the faces make JSON at their edges
(the page, MQTT: a record's ``to_json``), as the socket does. A callback runs on the
service's threads and must not block.
"""

from __future__ import annotations

from dataclasses import dataclass

# a pass's progress is the session's own records (the socket's events), re-exported for
# the faces, which import nothing below the service
from shuffler.control.events import CardCounted as CardCounted
from shuffler.control.events import PassReported as PassReported
from shuffler.control.events import PassStarted as PassStarted
from shuffler.control.events import TouchIgnored as TouchIgnored
from shuffler.control.reports import BatteryReport, HandResult, LastHand, ServiceStatus
from shuffler.control.scorebook import Score
from shuffler.device.contract import Fault, Status


@dataclass(frozen=True)
class SignalShown:
    status: Status


@dataclass(frozen=True)
class HandSummary:
    hand: HandResult
    last: LastHand  # what the state keeps of it, and status shows


@dataclass(frozen=True)
class ScoreChanged:
    score: Score


@dataclass(frozen=True)
class StateChanged:
    status: ServiceStatus


@dataclass(frozen=True)
class FaultChanged:
    fault: Fault | None  # None: cleared


@dataclass(frozen=True)
class BatteryChanged:
    battery: BatteryReport


Event = (SignalShown | PassStarted | CardCounted | PassReported | HandSummary | TouchIgnored
         | ScoreChanged | StateChanged | FaultChanged | BatteryChanged)
