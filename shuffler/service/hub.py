"""What the service's faces (the dealer's page, MQTT telemetry) see of it, and what the
service sees of them: two small interfaces, so neither imports the other, and the
service's publishing to them (:class:`Publisher`). The CLI builds the service with its
faces (``Service(..., faces=Faces)``); the service only publishes to subscribers and
answers requests, as it does a socket client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from shuffler.control.session import Session
from shuffler.logs import get_logger
from shuffler.service.events import Event, Translator

log = get_logger("shuffler.service")


class Hub(Protocol):
    """The service as a face uses it."""

    session: Session

    @property
    def touch_waiting(self) -> bool: ...

    def subscribe(self, callback: Callable[[str, Any], None]) -> None: ...

    def submit(self, request: dict[str, Any]) -> dict[str, Any]: ...


class Publisher:
    """What the service publishes to its faces (page, telemetry), from its own threads."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[str, Any], None]] = []

    def subscribe(self, callback: Callable[[str, Any], None]) -> None:
        """``callback(kind, body)`` for everything the service does, from its own
        threads: ``signal`` (a :class:`~shuffler.device.contract.Status`), ``event`` (pass
        progress), ``result`` (a pass, hand or score result), ``status`` (the snapshot),
        ``score``, ``battery``. Never a plan. A callback must not block; one that raises
        is logged."""
        self.listeners.append(callback)

    def subscribe_events(self, callback: Callable[[Event], None]) -> None:
        """``callback(event)`` with the typed events of :mod:`shuffler.service.events`: pass
        started, card counted, pass report, hand summary, state, fault and battery."""
        translate = Translator()

        def typed(kind: str, body: Any) -> None:
            for event in translate(kind, body):
                callback(event)

        self.subscribe(typed)

    def publish(self, kind: str, body: Any) -> None:
        for callback in self.listeners:
            try:
                callback(kind, body)
            except Exception:
                log.exception("a listener failed", kind=kind)


class Face(Protocol):
    """The faces as the service runs them: started once it listens, closed as it ends."""

    @property
    def page(self) -> str | None:
        """The page's address, or None when it is off."""

    def start(self) -> None: ...

    def close(self) -> None: ...


class NoFaces:
    """A service with no page and no telemetry (tests that drive the loop alone)."""

    page = None

    def __init__(self, hub: Hub) -> None:
        pass

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass
