"""What the dealer sees: one panel, the same words on the page and in the terminal.

:class:`Panel` is pure: the service feeds it what happens (the status LED's signal,
pass progress, reports, the status snapshot, the score) and it keeps the panel the page
draws, with a version number that goes up on every change. The prompts are written
once here, so ``shuffler hand`` in a terminal and the page say the same thing.
"""

from __future__ import annotations

import threading
from typing import Any

from shuffler.core.mechanics import Pile
from shuffler.device.contract import Signal, Status

SCHEMA = 1


def stack_prompt(on_top: Pile | None, last: bool = False) -> str:
    """Between passes; after the ``last`` pass the pack is ready to deal."""
    pile = "one pile on the other" if on_top is None else f"the {on_top.name} pile on top"
    if last:
        return f"Put {pile}: the pack is shuffled, deal"
    return f"Put {pile}, then touch"


def ready_prompt(number: int, of: int) -> str:
    return f"Load the pack and touch to start pass {number} of {of}"


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


def fault_headline(message: str) -> str:
    """The first sentence of a fault's message: the steps below it say what to do."""
    return message.split(". ")[0].rstrip(".")


class Panel:
    """The dealer's panel; thread-safe: the service writes, page streams read."""

    def __init__(self, passes_per_hand: int) -> None:
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
        if status.signal is Signal.STACK:
            last = status.next_pass is None
            self._change(phase="stack", prompt=stack_prompt(status.on_top, last), **{"pass": p})
        elif status.signal is Signal.RUNNING:
            self._change(phase="dealing", prompt=f"Dealing pass {p['number']} of {p['of']}",
                         **{"pass": p})
        elif status.signal is Signal.LOW_BATTERY:
            self._change(phase="low_battery",
                         prompt="Battery low: change the 9 V battery before the next pass")
        elif status.signal is Signal.READY and self.data["phase"] not in ("fault", "shuffled"):
            self._change(phase="ready", prompt=ready_prompt(p["number"], p["of"]),
                         **{"pass": p})

    def event(self, ev: dict[str, Any]) -> None:
        """A progress event of a pass or hand (the socket's events)."""
        kind = ev.get("event")
        p = dict(self.data["pass"])
        if kind == "pass_start":
            p.update(number=ev["number"], of=ev["of"], counted=0)
            self._change(phase="dealing", prompt=f"Dealing pass {p['number']} of {p['of']}",
                         notice=None, **{"pass": p})
        elif kind == "touch_ignored":  # the touch (or the page's Start pass) started nothing
            self._change(notice=str(ev.get("why") or "touch ignored"),
                         ignored=self.data["ignored"] + 1)
        elif kind == "card":
            p.update(counted=ev["counted"], expected=ev["expected"])
            self._change(**{"pass": p})

    def hand_done(self, summary: dict[str, Any]) -> None:
        """A hand's summary (also when a fault stopped it): shuffler.control.reports.last_hand. A
        completed hand leaves the panel at "shuffled: deal" until the next pass starts."""
        if not summary.get("completed") or self.data["phase"] == "fault":
            self._change(hand=summary)
            return
        p = {**self.data["pass"], "number": 1, "counted": 0, "expected": None}
        self._change(hand=summary, phase="shuffled", prompt=SHUFFLED_PROMPT, **{"pass": p})

    def status(self, status: dict[str, Any]) -> None:
        """The service's status snapshot: fault, battery, dealer, counters."""
        fault = status.get("fault")
        values: dict[str, Any] = {
            "battery": status.get("battery"), "dealer": status.get("dealer"),
            "next_dealer": status.get("next_dealer"), "deck": status.get("deck"),
            "counters": status.get("counters"), "fault": fault}
        if status.get("notice"):
            values["notice"] = status["notice"]
        if status.get("last_hand"):
            values["hand"] = status["last_hand"]
        if fault:
            values.update(phase="fault", prompt=fault_headline(fault["message"]),
                          clear_steps=clear_steps(fault["kind"]))
        elif self.data["phase"] == "fault":
            p = self.data["pass"]
            values.update(phase="ready", prompt=ready_prompt(p["number"], p["of"]),
                          clear_steps=[])
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
