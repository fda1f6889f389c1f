"""What the service's faces (the dealer's page, MQTT telemetry) see of it, and what the
service sees of them: two small interfaces, so neither imports the other. The CLI
builds the service with its faces (``Service(..., faces=Faces)``); the service only
publishes to subscribers and answers requests, as it does a socket client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from shuffler.control.session import Session


class Hub(Protocol):
    """The service as a face uses it."""

    session: Session

    @property
    def touch_waiting(self) -> bool: ...

    def subscribe(self, callback: Callable[[str, Any], None]) -> None: ...

    def submit(self, request: dict[str, Any]) -> dict[str, Any]: ...


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
