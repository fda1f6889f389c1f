"""The dealer's input policy: what a touch or a long press means, decided in one place.

Pure and thread-free: no clock is read here. The caller (the service between hands,
the hand between its passes) gives the event, stamped in device time
(:meth:`~shuffler.device.contract.ShufflerDevice.now`), and what it knows of the
machine; :meth:`TouchPolicy.decide` answers

- :class:`Start`: the next pass (of the hand) starts;
- :class:`Ignore`: nothing starts; ``why`` is told (the event the page shows) and
  ``light`` shown (None: the light last shown, again with one short beep);
- :class:`Clear`: the dealer's clear (a long press with a latched fault);
- :class:`Wait`: a client's short job holds the machine; ask again.

Every time rule here is in **device time**: the restack lock-out runs from the press
edge of the touch (``InputEvent.at``) to the end of the last pass or hand
(:meth:`TouchPolicy.ended`, read from the device when it ended). How long a touch waits
for a client's job is the caller's monotonic time (``waited``), a lifetime, not
something the mechanism does.

A step between passes that refuses a touch for a reason of its own (a correction the
dealer must make first) answers with an :class:`Ignore` of its own sentence and light,
declared beside these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shuffler.device.contract import EventKind, InputEvent, Signal, Status

#: seconds of device time after a pass ends during which a touch (from its press edge)
#: is the dealer restacking, not a start
RESTACK_LOCKOUT = 0.5
#: seconds (monotonic) a touch waits for a client's short job before it is told
TOUCH_WAIT_S = 5.0


@dataclass(frozen=True)
class Start:
    """The touch starts the next pass."""


@dataclass(frozen=True)
class Ignore:
    """Nothing starts: ``why`` is told; ``light`` shown (None: the last light, one beep)."""

    why: str
    light: Status | None = None
    #: what the machine waits for the dealer (or a client) to change: the status says it
    notice: bool = False
    #: the error kind a face answers it with (docs/json.md, "Error kinds")
    kind: str = "touch_ignored"


@dataclass(frozen=True)
class Clear:
    """The dealer's clear: clear the latched fault if the machine sees itself clear."""


@dataclass(frozen=True)
class Wait:
    """A client's short job holds the machine: decide again when it has let go."""


Decision = Start | Ignore | Clear | Wait
#: what a face's touch (the page's Start pass) is answered: it started, or why not
Answer = Start | Ignore

# -- every sentence a touch not taken is told, and its light ---------------------------
RESTACKING = Ignore("touch ignored: the last pass has only just ended and the dealer is "
                    "still restacking; stack the piles, then touch again")
PASS_RUNNING = Ignore("touch ignored: a pass was running")
#: a face's touch (the page's Start pass) while a pass runs: answered at once
RUNNING_NOW = Ignore("a pass is running: wait for it to end")
#: a face's touch still undecided when the service stops
STOPPING = Ignore("touch ignored: the service is stopping; touch again once it is back",
                  kind="service_stopped")
TRAY_EMPTY = Ignore("touch ignored: the tray is empty; load the cards, then touch",
                    notice=True)
HELD = Ignore("touch ignored: a client's request held the machine; touch again", notice=True)
NOTHING_TO_CLEAR = Ignore("nothing to clear: no fault is latched", Status(Signal.READY))
BEFORE_FAULT = Ignore("that press began before the fault: hold the sensor again to clear "
                      "it", Status(Signal.FAULT))
#: between passes, the other pile was lifted first (light: the hand's warning)
WRONG_PILE = Ignore("touch ignored: the other pile first: put it back, lift the pile the "
                    "light shows first, stack and touch")
#: a long press while the warning stands: no stack off the light is ever kept (a keep
#: chosen by looking at the cards would bend the label: docs/mixing.md)
KEEP_REFUSED = Ignore("hold ignored: a stack off the light cannot be kept; put the pile "
                      "back, lift the pile the light shows first, stack and touch")
#: between passes, a touch before the sensors saw both piles lifted, one after the other
NOT_STACKED = Ignore("touch ignored: the sensors have not seen the stack; lift the pile "
                     "the light shows first, then the other, and touch")
NOTHING_TO_KEEP = Ignore("nothing to keep: the stack follows the light; touch for the next "
                         "pass")


@dataclass(frozen=True)
class Machine:
    """What the caller knows of the machine as it decides."""

    tray_loaded: bool = True
    latched: bool = False  # a fault is latched (a long press is a clear)
    busy: bool = False  # a client's short job holds the machine
    waited: float = 0.0  # seconds (monotonic) this touch has already waited for it
    restacking: bool = False  # between a hand's passes: the light asks for a stack
    #: device time the machine warned of the other pile lifted first, while the stack
    #: does not yet match the light (None: no warning stands)
    warned: float | None = None
    #: between passes: the sensors saw the stack the light asks for (both piles lifted,
    #: the light's first)
    stacked: bool = True
    #: a pass runs now (a face's touch, decided as it comes: the page answers at once)
    running: bool = False


class TouchPolicy:
    """The touch rules, with the one fact they keep: when the last pass (or job that
    moved the machine) ended, in device time."""

    def __init__(self) -> None:
        self.ended = -math.inf

    def pass_ended(self, at: float) -> None:
        """A pass or a job that moves the machine ended at ``at`` (device time): touches
        pressed before ``at`` plus :data:`RESTACK_LOCKOUT` start nothing."""
        self.ended = max(self.ended, at)

    def decide(self, event: InputEvent, machine: Machine) -> Decision:
        if event.kind is EventKind.LONG_PRESS:
            if machine.latched:
                # held since before the fault: not an answer to it
                return BEFORE_FAULT if event.at < self.ended else Clear()
            if machine.warned is not None:
                return KEEP_REFUSED
            return NOTHING_TO_KEEP if machine.restacking else NOTHING_TO_CLEAR
        if event.kind is not EventKind.TOUCH:
            raise ValueError(f"not a touch: {event.kind.value}")
        if machine.running:
            return RUNNING_NOW
        if machine.warned is not None:  # what the dealer must do first, said first
            return WRONG_PILE
        if machine.restacking and not machine.stacked:
            return NOT_STACKED
        if event.at - self.ended < RESTACK_LOCKOUT:  # during the last pass, or just after
            return RESTACKING
        if not machine.tray_loaded:
            return TRAY_EMPTY
        if machine.busy:
            return HELD if machine.waited > TOUCH_WAIT_S else Wait()
        return Start()
