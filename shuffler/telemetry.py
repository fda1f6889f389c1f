"""MQTT telemetry: each table's machine on the broker the room already runs.

``shuffler serve`` publishes, when the config names a broker (``[mqtt] host``), under
``<prefix>/<table>/``::

    availability   "online" / "offline"   retained; the broker sends "offline" (the
                                          last will) when the service dies or drops
    state          the machine's state    retained, QoS 1, republished on reconnect
    pass           each pass's report     QoS 1, with an ``id`` to spot duplicates
    hand           each hand's summary    QoS 1, likewise
    command        remote clear / new_game, only when ``remote_actions = true``
    command/reply  the answer to a command

and Home Assistant's discovery topics. Nothing here ever carries a plan or the card
order: the payloads are built from the reports the CLI prints.

The deciding loop never waits on the broker: it hands messages to a bounded queue
(:meth:`Telemetry.publish`), and one sender thread feeds the MQTT client, whose own
bounded store keeps QoS 1 messages while the broker is away and resends them when it is
back. When the queue is full the oldest message goes, and the drop is counted.
"""

from __future__ import annotations

import collections
import contextlib
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .config import MqttConfig
from .errors import ConfigError
from .logs import get_logger

log = get_logger("shuffler.telemetry")

SCHEMA = 1


@dataclass(frozen=True)
class Topics:
    prefix: str
    table: str

    @property
    def base(self) -> str:
        return f"{self.prefix}/{self.table}"

    def __getattr__(self, name: str) -> str:  # topics.state, topics.pass_ ...
        if name.startswith("_"):
            raise AttributeError(name)
        return f"{self.base}/{name.rstrip('_').replace('_', '/')}"


#: Commands a table accepts over MQTT. A pass is never one: it needs the dealer's hand.
REMOTE_COMMANDS = ("clear", "new_game")


def parse_command(payload: bytes) -> dict[str, Any]:
    """A remote command, checked; raises ValueError with what is wrong."""
    if len(payload) > 4096:
        raise ValueError("command longer than 4096 bytes")
    try:
        data = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError("not a JSON object") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    cmd = data.get("cmd")
    if cmd not in REMOTE_COMMANDS:
        raise ValueError(f"cmd: expected one of {', '.join(REMOTE_COMMANDS)}, got {cmd!r}")
    request_id = data.get("id")
    if request_id is not None and not (isinstance(request_id, str) and len(request_id) <= 64):
        raise ValueError("id: expected a string of at most 64 characters")
    out: dict[str, Any] = {"cmd": cmd, "id": request_id}
    if cmd == "new_game":
        dealer = data.get("first_dealer")
        if dealer is not None and not (isinstance(dealer, str) and 0 < len(dealer) <= 32):
            raise ValueError("first_dealer: expected a seat name")
        out["first_dealer"] = dealer
        version = data.get("version")
        if version is not None and not (type(version) is int and version >= 0):
            raise ValueError("version: expected the score's version, a whole number")
        out["version"] = version
    return out


def table_state(status: dict[str, Any]) -> str:
    """One word for the machine, from a status report: what the view sorts on."""
    if status.get("fault"):
        return "fault"
    battery = status.get("battery") or {}
    if battery.get("state") in ("low", "critical"):
        return "low_battery"
    if status.get("busy"):
        return "dealing"
    return "ready"


@dataclass
class _Message:
    topic: str
    payload: str
    qos: int
    retain: bool


class Telemetry:
    """Publishes one table; see the module notes. ``client_factory`` is for tests."""

    def __init__(self, config: MqttConfig, *,
                 on_command: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 client_factory: Callable[..., Any] | None = None) -> None:
        self.config = config
        self.topics = Topics(config.prefix, config.table)
        self.on_command = on_command
        self.boot = secrets.token_hex(4)  # ids stay unique across restarts
        self.seq = 0
        self.dropped = 0
        self.connected = threading.Event()
        self._queue: collections.deque[_Message] = collections.deque()
        self._wake = threading.Condition()
        self._closing = False
        self._retained: dict[str, _Message] = {}
        self._client = (client_factory or connect_client)(config)
        self._client.on_connect = _guarded(self._on_connect)
        self._client.on_disconnect = _guarded(self._on_disconnect)
        self._client.on_message = _guarded(self._on_message)
        self._client.will_set(self.topics.availability, "offline", qos=1, retain=True)
        self._sender = threading.Thread(target=self._send_loop, name="mqtt-send", daemon=True)

    # -- the service's side: never blocks ----------------------------------------------
    def start(self) -> None:
        self._client.connect_async(self.config.host, self.config.port, self.config.keepalive)
        self._client.loop_start()
        self._sender.start()
        log.info("telemetry on", broker=f"{self.config.host}:{self.config.port}",
                 topic=self.topics.base)

    def publish(self, name: str, body: dict[str, Any], *, retain: bool = False) -> None:
        """Queue ``body`` for ``<prefix>/<table>/<name>``; ``retain`` keeps it on the
        broker and republishes it after every reconnect."""
        self.seq += 1
        payload = {"schema": SCHEMA, "table": self.config.table,
                   "id": f"{self.boot}-{self.seq}", **body}
        msg = _Message(getattr(self.topics, name), json.dumps(payload, separators=(",", ":")),
                       1, retain)
        with self._wake:
            if retain:
                self._retained[msg.topic] = msg
            if len(self._queue) >= self.config.queue_limit:
                self._queue.popleft()
                self.dropped += 1
            self._queue.append(msg)
            self._wake.notify()

    def state(self, status: dict[str, Any]) -> None:
        self.publish("state", {"state": table_state(status), **status}, retain=True)

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        if self._sender.is_alive():
            self._sender.join(timeout=2)
        if self.connected.is_set():
            info = self._client.publish(self.topics.availability, "offline", qos=1, retain=True)
            with contextlib.suppress(RuntimeError, ValueError):
                info.wait_for_publish(timeout=1)
        self._client.disconnect()
        self._client.loop_stop()

    # -- the sender thread ------------------------------------------------------------
    def _send_loop(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closing:
                    self._wake.wait()
                if self._closing and not self._queue:
                    return
                msg = self._queue.popleft()
            info = self._client.publish(msg.topic, msg.payload, qos=msg.qos, retain=msg.retain)
            if info.rc not in (0, 4):  # 4: no connection yet, the client keeps it
                self.dropped += 1
                log.warning("telemetry message dropped", topic=msg.topic, rc=info.rc)

    # -- the MQTT client's thread -------------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties=None) -> None:
        # Only the sender thread publishes: paho's publish from this callback races the
        # sender's for paho's own locks (taken in opposite orders) and can deadlock.
        if reason_code.is_failure:
            log.warning("broker refused the connection", reason=str(reason_code))
            return
        log.info("broker connected", broker=f"{self.config.host}:{self.config.port}")
        if self.config.remote_actions:
            client.subscribe(self.topics.command, qos=1)
        first = [_Message(self.topics.availability, "online", 1, True)]
        if self.config.discovery:
            first += [_Message(topic, json.dumps(body), 1, True)
                      for topic, body in discovery_messages(self.config, self.topics)]
        with self._wake:  # the retained state may have been lost with the broker
            again = [m for m in self._retained.values() if m not in self._queue]
            self._queue.extendleft(reversed(first + again))
            self._wake.notify()
        self.connected.set()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties=None) -> None:
        if self.connected.is_set():
            log.warning("broker connection lost; telemetry is queued", reason=str(reason_code))
        self.connected.clear()

    def _on_message(self, client, userdata, message) -> None:
        if message.topic != self.topics.command or not self.config.remote_actions:
            log.warning("message on an unexpected topic ignored", topic=message.topic)
            return
        try:
            command = parse_command(message.payload)
        except ValueError as e:
            log.warning("remote command refused", error=str(e))
            self.publish("command_reply", {"ok": False, "error": {
                "kind": "bad_request", "message": str(e), "exit": 2}})
            return
        log.info("remote command", cmd=command["cmd"])
        reply = (self.on_command(command) if self.on_command
                 else {"ok": False, "error": {"kind": "unsupported",
                                              "message": "no handler", "exit": 2}})
        self.publish("command_reply", {"request": command["id"], **reply})


def _guarded(callback: Callable[..., None]) -> Callable[..., None]:
    """A callback that cannot kill the MQTT client's thread (paho re-raises)."""
    def run(*args: Any) -> None:
        try:
            callback(*args)
        except Exception:
            log.exception("telemetry callback failed")
    return run


def connect_client(config: MqttConfig, client_id: str | None = None,
                   persistent: bool = False) -> Any:
    """An MQTT client set up from the config (credentials read from their file now);
    not connected yet. ``persistent``: the broker keeps the session (subscriptions and
    QoS 1 messages) while this client is away; it needs a stable ``client_id``."""
    try:
        from paho.mqtt import client as mqtt
    except ImportError:
        raise ConfigError("[mqtt] host is set but the MQTT client library is missing: "
                          "pip install 'shuffler[mqtt]' (paho-mqtt)") from None
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2,
                         client_id=client_id or f"shuffler-{config.table}",
                         clean_session=not persistent, protocol=mqtt.MQTTv311)
    client.max_queued_messages_set(config.queue_limit)
    client.reconnect_delay_set(min_delay=1, max_delay=10)
    if config.username:
        password = None
        if config.password_file is not None:
            try:
                password = config.password_file.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as e:
                raise ConfigError(f"{config.password_file}: cannot read the MQTT password "
                                  f"file: {getattr(e, 'strerror', None) or e}") from None
        client.username_pw_set(config.username, password)
    if config.tls:
        client.tls_set(ca_certs=_str(config.ca_file), certfile=_str(config.cert_file),
                       keyfile=_str(config.key_file))
    return client


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)


# -- Home Assistant -----------------------------------------------------------------

#: (component, key, name, value template, unit, device class)
ENTITIES = (
    ("sensor", "state", "State", "{{ value_json.state }}", None, None),
    ("sensor", "battery", "Battery", "{{ value_json.battery.percent | round(0) }}", "%",
     "battery"),
    ("sensor", "battery_volts", "Battery voltage", "{{ value_json.battery.volts }}", "V",
     "voltage"),
    ("sensor", "passes_left", "Passes left", "{{ value_json.battery.passes_left }}",
     "passes", None),
    ("binary_sensor", "fault", "Fault", "{{ 'ON' if value_json.fault else 'OFF' }}", None,
     "problem"),
)


def discovery_messages(config: MqttConfig, topics: Topics) -> list[tuple[str, dict[str, Any]]]:
    """Home Assistant MQTT discovery: one retained config message per entity."""
    device = {"identifiers": [f"shuffler_{config.table}"], "name": f"Shuffler {config.table}",
              "manufacturer": "shuffler project", "model": "two-pile card shuffler",
              "sw_version": __version__}
    out = []
    for component, key, name, template, unit, device_class in ENTITIES:
        uid = f"shuffler_{config.table}_{key}"
        body: dict[str, Any] = {
            "name": name, "unique_id": uid, "object_id": uid, "state_topic": topics.state,
            "value_template": template, "availability_topic": topics.availability,
            "payload_available": "online", "payload_not_available": "offline",
            "device": device}
        if unit:
            body["unit_of_measurement"] = unit
        if device_class:
            body["device_class"] = device_class
        if component == "sensor" and unit:
            body["state_class"] = "measurement"
        out.append((f"{config.discovery_prefix}/{component}/{uid}/config", body))
    return out
