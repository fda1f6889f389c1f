"""What the dealer sees on the page: :class:`Panel` is pure; the faces feed it what the
service publishes (the status LED's signal, pass progress, reports, the status snapshot,
the score) and it keeps the panel the page draws, with a version that goes up on every
change. The words the terminal says too are shuffler.control.prompts' (through the hub).
"""

from __future__ import annotations

import threading
from typing import Any

from shuffler.constants import SCHEMA
from shuffler.service.hub import Signal, Status, stack_prompt, wrong_pile_prompt


def ready_prompt(number: int, of: int) -> str:
    return f"Load the pack and touch to start pass {number} of {of}"


#: a pass refused for the battery, when the panel has no figures to say more
LOW_BATTERY_PROMPT = "Battery low: change the 9 V battery before the next pass"

#: the phases of a hand being dealt: a pass runs, or its pile waits to be stacked
DEALING = ("dealing", "stack")

#: after a hand's last pass, until the next pass starts: the pack is ready to deal
SHUFFLED_PROMPT = "Shuffled: deal"


CLEAR_STEPS = (
    "Open the throat and take out the stuck card.",
    "Put every card back in the tray.",
    "Hold the touch sensor for two seconds, or press Clear.",
)


def clear_steps(kind: str) -> list[str]:
    """What the dealer does for a latched fault of ``kind``."""
    if kind == "misfeed":
        return ["Square the pack and seat it in the tray.", *CLEAR_STEPS[1:]]
    if kind == "link_lost":
        return ["Check the cable to the machine's board.",
                "Hold the touch sensor for two seconds, or press Clear."]
    return list(CLEAR_STEPS)


def battery_headline(battery: dict[str, Any] | None, passes: int) -> str | None:
    """What the headline says when the battery would refuse the next touch, which needs
    ``passes`` more passes (None: it would not). The same rule as the refusal
    (shuffler.core.battery.refusal): critical, or fewer passes left than needed."""
    if not battery or battery.get("measured") is False or "passes_left" not in battery:
        return None
    left = battery["passes_left"]
    if battery.get("state") == "critical":
        return "Battery critical: change the 9 V battery, no pass can start"
    if isinstance(left, int) and left < passes:
        return (f"Battery low: about {left} pass{'es' if left != 1 else ''} left, {passes} "
                "needed: change the 9 V battery")
    return None


def fault_headline(message: str) -> str:
    """The first sentence of a fault's message: the steps below it say what to do."""
    return message.split(". ")[0].rstrip(".")


class Panel:
    """The dealer's panel; thread-safe: the service writes, page streams read."""

    def __init__(self, passes_per_hand: int) -> None:
        self.passes_per_hand = passes_per_hand
        #: the hand a fault or a stop left unfinished (the status's ``hand_in_progress``):
        #: a touch goes on with it, else starts a new hand
        self._pending: dict[str, Any] | None = None
        self._cond = threading.Condition()
        self.version = 0
        self.data: dict[str, Any] = {
            "schema": SCHEMA, "phase": "ready", "prompt": ready_prompt(1, passes_per_hand),
            "pass": {"number": 1, "of": passes_per_hand, "counted": 0, "expected": None},
            "fault": None, "clear_steps": [], "hand": None, "battery": None,
            "dealer": None, "next_dealer": None, "deck": None, "score": None,
            "counters": None, "notice": None, "ignored": 0}

    # -- the service's side ---------------------------------------------------------
    def _change(self, **values: Any) -> None:
        with self._cond:
            self.data = {**self.data, **values}
            self.version += 1
            self._cond.notify_all()

    def signal(self, status: Status) -> None:
        """The status LED's signal, as the hand shows it."""
        p = dict(self.data["pass"])
        if status.next_pass is not None:
            p["number"] = status.next_pass
        if status.of is not None:
            p["of"] = status.of
        if status.signal is Signal.STACK and status.warn:
            self._change(phase="wrong_pile", prompt=wrong_pile_prompt(status.on_top),
                         **{"pass": p})
        elif status.signal is Signal.STACK:
            last = status.next_pass is None
            self._change(phase="stack", prompt=stack_prompt(status.on_top, last), **{"pass": p})
        elif status.signal is Signal.RUNNING:
            self._change(phase="dealing", prompt=f"Dealing pass {p['number']} of {p['of']}",
                         **{"pass": p})
        elif status.signal is Signal.LOW_BATTERY:  # a pass refused: the figures if known
            need = p["of"] - p["number"] + 1 if self.data["phase"] != "shuffled" else p["of"]
            self._change(phase="low_battery", prompt=battery_headline(
                self.data["battery"], need) or LOW_BATTERY_PROMPT)
        elif status.signal is Signal.READY and self.data["phase"] not in ("fault", "shuffled"):
            p = self._next_touch(p)
            self._change(**self._ready(p, self.data["battery"]), **{"pass": p})

    def _next_touch(self, p: dict[str, Any]) -> dict[str, Any]:
        """The pass a touch (or the page's Start pass) starts now: the unfinished hand's
        next, else the first of a new hand (after a lone pass too: a touch starts a hand,
        never another lone pass)."""
        pending = self._pending
        number, of = ((pending["passes_done"] + 1, pending["passes"]) if pending
                      else (1, self.passes_per_hand))
        return {**p, "number": number, "of": of, "counted": 0, "expected": None}

    def _ready(self, p: dict[str, Any], battery: dict[str, Any] | None,
               shuffled: bool = False) -> dict[str, Any]:
        """The phase and headline before a touch: ready (or shuffled), or what the battery
        would refuse the touch for."""
        need = p["of"] if shuffled else p["of"] - p["number"] + 1
        if (why := battery_headline(battery, need)) is not None:
            return {"phase": "low_battery", "prompt": why}
        if shuffled:
            return {"phase": "shuffled", "prompt": SHUFFLED_PROMPT}
        return {"phase": "ready", "prompt": ready_prompt(p["number"], p["of"])}

    def pass_started(self, number: int, of: int) -> None:
        p = {**self.data["pass"], "number": number, "of": of, "counted": 0}
        self._change(phase="dealing", prompt=f"Dealing pass {number} of {of}", notice=None,
                     **{"pass": p})

    def counted(self, counted: int, expected: int) -> None:
        self._change(**{"pass": {**self.data["pass"], "counted": counted,
                                 "expected": expected}})

    def touch_ignored(self, why: str) -> None:
        """The touch (or the page's Start pass) started nothing, and why."""
        self._change(notice=why or "touch ignored", ignored=self.data["ignored"] + 1)

    def hand_done(self, summary: dict[str, Any]) -> None:
        """A hand's summary (also when a fault stopped it): shuffler.control.reports.last_hand. A
        completed hand leaves the panel at "shuffled: deal" until the next pass starts; the
        panel's ``hand`` is the last hand that is over (one a fault stopped goes on after
        the clear, so it is not)."""
        if not summary.get("completed"):
            return
        if self.data["phase"] == "fault":
            self._change(hand=summary)
            return
        p = {**self.data["pass"], "number": 1, "counted": 0, "expected": None}
        self._change(hand=summary, **self._ready(p, self.data["battery"], shuffled=True),
                     **{"pass": p})

    def status(self, status: dict[str, Any]) -> None:
        """The service's status snapshot: fault, battery, dealer, counters."""
        fault = status.get("fault")
        values: dict[str, Any] = {
            "battery": status.get("battery"), "dealer": status.get("dealer"),
            "next_dealer": status.get("next_dealer"), "deck": status.get("deck"),
            "counters": status.get("counters"), "fault": fault}
        if status.get("notice"):
            values["notice"] = status["notice"]
        if (status.get("last_hand") or {}).get("completed"):
            values["hand"] = status["last_hand"]
        self._pending = status.get("hand_in_progress")
        phase, p = self.data["phase"], self.data["pass"]
        if fault:
            values.update(phase="fault", prompt=fault_headline(fault["message"]),
                          clear_steps=clear_steps(fault["kind"]))
        elif phase == "fault":
            p = self._next_touch(p)
            values.update(**self._ready(p, values["battery"]), clear_steps=[], **{"pass": p})
        elif phase in ("ready", "shuffled", "low_battery"):
            p = self._next_touch(p)
            values.update(self._ready(p, values["battery"], shuffled=phase == "shuffled"),
                          **{"pass": p})
        if {k: self.data.get(k) for k in values} != values:
            self._change(**values)

    def score(self, game: dict[str, Any] | None) -> None:
        self._change(score=game)

    # -- the page's side ------------------------------------------------------------
    def snapshot(self) -> tuple[int, dict[str, Any]]:
        with self._cond:
            return self.version, self.data

    def wait(self, version: int, timeout: float) -> tuple[int, dict[str, Any]]:
        with self._cond:
            self._cond.wait_for(lambda: self.version != version, timeout)
            return self.version, self.data
