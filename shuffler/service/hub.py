"""What the service's faces (the dealer's page, MQTT telemetry) see of it, and what the
service sees of them: two small interfaces, so neither imports the other, and the
service's publishing to them (:class:`Publisher`). The CLI builds the service with its
faces (``Service(..., faces=Faces)``); the service only publishes to subscribers and
answers requests, as it does a socket client."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

# the port's own names for what a face is handed from below (the faces import nothing
# under the service: the contract in pyproject.toml): the config the service runs on and
# its [mqtt] section, the light a SignalShown carries, and the dealer's words the page's
# panel says as the terminal does
from shuffler.config import Config as Config
from shuffler.config import MqttConfig as MqttConfig
from shuffler.control.prompts import stack_prompt as stack_prompt
from shuffler.control.prompts import wrong_pile_prompt as wrong_pile_prompt
from shuffler.control.touch import Answer as Answer
from shuffler.control.touch import Ignore as Ignore
from shuffler.control.touch import Start as Start
from shuffler.device.contract import Signal as Signal
from shuffler.device.contract import Status as Status
from shuffler.logs import get_logger
from shuffler.service.events import Event

log = get_logger("shuffler.service")


class Hub(Protocol):
    """The service as a face uses it: the config, the state folder, the score, a touch
    and a request; never the session, the controller or the device behind them."""

    @property
    def config(self) -> Config: ...

    @property
    def state_folder(self) -> Path: ...

    def score(self) -> dict[str, Any]:
        """The scorebook as ``shuffler score`` prints it."""

    @property
    def touch_waiting(self) -> bool: ...

    def subscribe(self, callback: Callable[[Event], None]) -> None: ...  # Publisher's

    def submit(self, request: dict[str, Any], face: str) -> dict[str, Any]:
        """Run ``request`` (checked as a socket request would be) as a socket client's,
        sent by ``face`` (machine.PAGE, machine.MQTT), and return the final answer: a
        command the declaration does not list for it is refused."""

    def on_touch(self, claim: Callable[[], bool]) -> None:
        """Ask ``claim()`` first of every touch on the sensor between hands (never a face's
        own touch); True takes it for the face (pairing a phone) and starts nothing: the
        light is shown again with one short beep."""

    def touch(self) -> Future[Answer]:
        """The dealer's touch from a face (the page's Start pass), stamped now in device
        time by the service that owns the device and decided by the same touch policy as
        the sensor's (:mod:`shuffler.control.touch`). The answer is its decision:
        :class:`Start` once the pass has started, else the :class:`Ignore` saying why not
        (a pass it started that the machine refused: the machine's words). It always
        resolves: a service stopping answers ``STOPPING``."""


class Publisher:
    """What the service publishes to its faces (page, telemetry), from its own threads:
    the typed events of :mod:`shuffler.service.events`, never a dict."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[Event], None]] = []

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        """``callback(event)`` for each event of :mod:`shuffler.service.events`, from the
        service's threads. A callback must not block; one that raises is logged."""
        self.listeners.append(callback)

    def publish(self, event: Event) -> None:
        for callback in self.listeners:
            try:
                callback(event)
            except Exception:
                log.exception("a listener failed", kind=type(event).__name__)


class Face(Protocol):
    """The faces as the service runs them: started once it listens, closed as it ends."""

    @property
    def page(self) -> str | None:
        """The page's address, or None when it is off."""

    def start(self) -> None: ...

    def close(self) -> None: ...


class NoFaces(Face):
    """A service with no page and no telemetry (tests that drive the loop alone)."""

    def __init__(self, hub: Hub) -> None:
        pass
