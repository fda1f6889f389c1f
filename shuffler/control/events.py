"""A pass's and a hand's progress, as :class:`~shuffler.control.session.Session` emits it:
frozen records, each its socket event (``shuffler/schemas/event.json``) by
:meth:`Progress.to_json`. The service sends them to the client that asked and publishes
them to its faces (:mod:`shuffler.service.events`, which re-exports them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from shuffler.control.reports import PassResult
from shuffler.core.record import OMIT_NONE, Record


@dataclass(frozen=True)
class Progress(Record):
    """One progress event; ``event`` is its name on the socket (``class X(Progress,
    event="name")``)."""

    event: ClassVar[str]

    def __init_subclass__(cls, event: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.event = event

    def to_json(self) -> dict[str, Any]:
        return {"event": self.event, **super().to_json()}


@dataclass(frozen=True)
class PassStarted(Progress, event="pass_start"):
    number: int
    of: int


@dataclass(frozen=True)
class CardCounted(Progress, event="card"):
    counted: int
    expected: int


@dataclass(frozen=True)
class PassReported(Progress, event="pass"):
    """A pass's report as it ends (a lone pass's, or each of a hand's: of its ``of``)."""

    pass_: PassResult
    of: int = 1


@dataclass(frozen=True)
class StackAsked(Progress, event="stack"):
    """Between passes: which pile goes on top, in the words the page uses too, and the
    pass just dealt (before the restack: its stacking not yet known); with ``warning``,
    the other pile was lifted first. Told to the client that asked (the faces see the
    light itself)."""

    on_top: str | None
    next_pass: int | None
    of: int | None
    prompt: str
    pass_: PassResult | None = field(default=None, metadata=OMIT_NONE)
    warning: bool | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class Resumed(Progress, event="resume"):
    """A hand left unfinished is resumed (told to the client that asked)."""

    number: int
    at_pass: int
    of: int


@dataclass(frozen=True)
class TouchIgnored(Progress, event="touch_ignored"):
    why: str  # a touch started nothing: why (shuffler/control/touch.py's words)


Emit = Callable[[Progress], None]


def quiet(event: Progress) -> None:
    """An :data:`Emit` that hears nothing."""
