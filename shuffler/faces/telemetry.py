"""MQTT telemetry: each table's machine on the broker the room already runs, under
``<prefix>/<table>/`` (the topics, payloads and promises: docs/mqtt.md), and Home
Assistant's discovery. Nothing here carries a plan or the card order.

The deciding loop never waits on the broker: :meth:`Telemetry.publish` queues a message
(bounded: the oldest goes, counted and logged once per burst) and one sender thread feeds
the MQTT client, whose own bounded store keeps QoS 1 messages while the broker is away.
Three lanes, sent in this order: the retained messages (one per topic, sent again after
every reconnect, ``online`` first), the command replies, then passes and hands. MQTT's
network thread never runs a command: it checks it and queues it (:data:`COMMAND_QUEUE`),
and one worker hands each to the service; every command gets exactly one reply.
"""

from __future__ import annotations

import collections
import contextlib
import json
import queue
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shuffler import __version__
from shuffler.constants import SCHEMA
from shuffler.errors import ConfigError, ShufflerError
from shuffler.logs import Burst, get_logger
from shuffler.service.events import (
    Event,
    FaultChanged,
    HandSummary,
    PassReported,
    ScoreChanged,
    StateChanged,
)
from shuffler.service.hub import MqttConfig
from shuffler.service.machine import MQTT, sent_by
from shuffler.service.protocol import error_reply
from shuffler.service.request import RequestError

log = get_logger("shuffler.telemetry")

MQTT_ERR_QUEUE_SIZE = 15  # paho: its store of unsent QoS 1 messages is full

COMMAND_QUEUE = 8  # remote commands waiting for the service; more are refused


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
    # the commands a table accepts over MQTT (machine.sent_by(MQTT)); a pass is never
    # one: it needs the dealer's hand
    if cmd not in (remote := sent_by(MQTT)):
        raise ValueError(f"cmd: expected one of {', '.join(remote)}, got {cmd!r}")
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
    battery = status.get("battery") or {}
    if status.get("fault") or battery.get("state") == "monitor_fault":  # no pass starts
        return "fault"
    if battery.get("state") in ("low", "critical"):
        return "low_battery"
    if status.get("busy"):
        return "dealing"
    return "ready"


@dataclass
class _Message:
    """One message for the broker (every one QoS 1)."""

    topic: str
    payload: str
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
        self.commands: queue.Queue[dict[str, Any] | None] = queue.Queue(COMMAND_QUEUE)
        self._queue: collections.deque[_Message] = collections.deque()
        self._replies: collections.deque[_Message] = collections.deque()  # command replies
        self._drops = Burst(log, "telemetry messages dropped (the queue was full)")
        self._control: dict[str, _Message] = {}  # retained, by topic, sent first
        self._wake = threading.Condition()
        self._closing = False
        self._retained: dict[str, _Message] = {}
        self._refusals = Burst(log, "remote commands refused")
        self._client = (client_factory or connect_client)(config)
        self._client.on_connect = _guarded(self._on_connect)
        self._client.on_disconnect = _guarded(self._on_disconnect)
        self._client.on_message = _guarded(self._on_message)
        self._client.will_set(self.topics.availability, "offline", qos=1, retain=True)
        self._sender = threading.Thread(target=self._send_loop, name="mqtt-send", daemon=True)
        self._worker = threading.Thread(target=self._serve_commands, name="mqtt-commands",
                                        daemon=True)

    # -- the service's side: never blocks ----------------------------------------------
    def start(self) -> None:
        self._client.connect_async(self.config.host, self.config.port, self.config.keepalive)
        self._client.loop_start()
        self._sender.start()
        self._worker.start()
        log.info("telemetry on", broker=f"{self.config.host}:{self.config.port}",
                 topic=self.topics.base)

    def publish(self, name: str, body: dict[str, Any], *, retain: bool = False) -> None:
        """Queue ``body`` for ``<prefix>/<table>/<name>``; ``retain`` keeps it on the
        broker and republishes it after every reconnect."""
        with self._wake:
            self.seq += 1
            payload = {"schema": SCHEMA, "table": self.config.table,
                       "id": f"{self.boot}-{self.seq}", **body}
            msg = _Message(getattr(self.topics, name),
                           json.dumps(payload, separators=(",", ":")), retain)
            if retain:
                self._retained[msg.topic] = self._control[msg.topic] = msg
            else:
                lane = self._replies if name == "command_reply" else self._queue
                if len(lane) >= self.config.queue_limit:
                    gone = lane.popleft()
                    self.dropped += 1
                    self._drops.note(topic=gone.topic, dropped=self.dropped)
                lane.append(msg)
            self._wake.notify()

    def state(self, status: dict[str, Any]) -> None:
        self.publish("state", {"state": table_state(status), **status}, retain=True)

    def hear(self, event: Event) -> None:
        """What the service says (a subscriber of its bus), to the broker: the state, the
        fault and the score retained; each pass as it ends and each hand."""
        match event:
            case StateChanged(status):
                self.state(status.to_json())
            case FaultChanged(fault):
                self.publish("fault", {"fault": fault and fault.to_json()}, retain=True)
            case ScoreChanged(score):
                self.publish("score", {"score": score.to_json()}, retain=True)
            case PassReported(report):
                self.publish("pass", {"pass": report.to_json()})
            case HandSummary(hand):
                self.publish("hand", {"hand": hand.to_json()})

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        with contextlib.suppress(queue.Full):
            self.commands.put_nowait(None)
        if self._worker.is_alive():
            self._worker.join(timeout=2)
        if self._sender.is_alive():
            self._sender.join(timeout=2)
        if self.connected.is_set():
            info = self._client.publish(self.topics.availability, "offline", qos=1, retain=True)
            with contextlib.suppress(RuntimeError, ValueError):
                info.wait_for_publish(timeout=1)
        self._client.disconnect()
        self._client.loop_stop()

    # -- the sender thread ------------------------------------------------------------
    def _next(self) -> _Message | None:
        """The next message to send (retained ones first), or None when closing."""
        with self._wake:
            while not (self._control or self._replies or self._queue or self._closing):
                self._wake.wait()
            if self._control:
                return self._control.pop(next(iter(self._control)))
            if self._replies:
                return self._replies.popleft()
            return self._queue.popleft() if self._queue else None

    def _send_loop(self) -> None:
        while (msg := self._next()) is not None:
            while True:
                info = self._client.publish(msg.topic, msg.payload, qos=1, retain=msg.retain)
                if info.rc != MQTT_ERR_QUEUE_SIZE or self._closing:
                    break
                time.sleep(0.02)  # the client's store is full: wait for the broker's acks
            if info.rc not in (0, 4, MQTT_ERR_QUEUE_SIZE):  # 4: no connection, kept
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
        client.subscribe(self.topics.command, qos=1)  # with actions off, to say so
        first = [_Message(self.topics.availability, "online", True)]
        if self.config.discovery:
            first += [_Message(topic, json.dumps(body), True)
                      for topic, body in discovery_messages(self.config, self.topics)]
        with self._wake:  # the retained messages may have been lost with the broker
            self._control = {m.topic: m for m in (*first, *self._retained.values())}
            self._wake.notify()
        self.connected.set()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties=None) -> None:
        if self.connected.is_set():
            log.warning("broker connection lost; telemetry is queued", reason=str(reason_code))
        self.connected.clear()

    def _on_message(self, client, userdata, message) -> None:
        """A command: checked and queued here, never run (this is the network thread)."""
        if message.topic != self.topics.command:
            log.warning("message on an unexpected topic ignored", topic=message.topic)
            return
        try:
            command = parse_command(message.payload)
        except ValueError as e:
            self._refuse(_request_id(message.payload), "bad_request", str(e))
            return
        if not self.config.remote_actions:
            self._refuse(command["id"], "forbidden", "remote actions are off on this table "
                         "([mqtt] remote_actions = false)")
            return
        try:
            self.commands.put_nowait(command)
        except queue.Full:
            self._refuse(command["id"], "busy", f"{COMMAND_QUEUE} remote commands are "
                         "already waiting; try again")

    def _refuse(self, request: str | None, kind: str, message: str) -> None:
        self._refusals.note(kind=kind, last=message)
        self.publish("command_reply", {"request": request,
                                       **error_reply(RequestError(message, kind))})

    # -- the command worker -------------------------------------------------------------
    def _serve_commands(self) -> None:
        while (command := self.commands.get()) is not None:
            try:
                reply = (self.on_command(command) if self.on_command else
                         error_reply(RequestError("no handler", "unsupported")))
            except Exception as e:
                log.exception("remote command failed")
                reply = error_reply(ShufflerError(str(e)))  # internal, exit 1
            log.info("remote command", cmd=command["cmd"], ok=bool(reply.get("ok")))
            self.publish("command_reply", {"request": command["id"], **reply})


def _request_id(payload: bytes) -> str | None:
    """The ``id`` of a command that is otherwise wrong, to reply to it, if it has one."""
    with contextlib.suppress(ValueError, UnicodeDecodeError, RecursionError, AttributeError):
        found = json.loads(payload[:4096].decode("utf-8")).get("id")
        if isinstance(found, str) and len(found) <= 64:
            return found
    return None


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

#: what the battery templates read: a number, or nothing (the state had no battery)
_BATTERY = "(value_json.get('battery') or {{}}).get('{key}')"

#: (component, key, name, value template, unit, device class). A template renders
#: ``None`` (Home Assistant: unknown) when the field is missing or null, never an error.
ENTITIES = (
    ("sensor", "state", "State", "{{ value_json.state | default(none) }}", None, None),
    ("sensor", "battery", "Battery",
     "{% set v = " + _BATTERY.format(key="percent") + " %}"
     "{{ v | round(0) if v is number else none }}", "%", "battery"),
    ("sensor", "battery_volts", "Battery voltage",
     "{% set v = " + _BATTERY.format(key="volts") + " %}{{ v if v is number else none }}",
     "V", "voltage"),
    ("sensor", "passes_left", "Passes left",
     "{% set v = " + _BATTERY.format(key="passes_left") + " %}"
     "{{ v if v is number else none }}", "passes", None),
    ("binary_sensor", "fault", "Fault", "{{ 'ON' if value_json.fault else 'OFF' }}", None,
     "problem"),
)

ORIGIN = {"name": "shuffler", "sw_version": __version__}


def entity_slug(text: str) -> str:
    """``text`` as the object id of a Home Assistant entity id: lower case, every run of
    characters other than ``a-z`` and ``0-9`` one ``_``, none at either end
    (``shuffler_table-7_battery`` -> ``shuffler_table_7_battery``).

    >>> entity_slug("shuffler_Table-7__battery")
    'shuffler_table_7_battery'
    """
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def discovery_messages(config: MqttConfig, topics: Topics) -> list[tuple[str, dict[str, Any]]]:
    """Home Assistant MQTT discovery: one retained config message per entity, under
    ``<discovery_prefix>/<component>/<table>/<key>/config`` (the table as the node id,
    so a broker's ACL can give each table its own discovery topics)."""
    device = {"identifiers": [f"shuffler_{config.table}"], "name": f"Shuffler {config.table}",
              "manufacturer": "shuffler project", "model": "two-pile card shuffler",
              "sw_version": __version__}
    out = []
    for component, key, name, template, unit, device_class in ENTITIES:
        uid = f"shuffler_{config.table}_{key}"
        body: dict[str, Any] = {
            "name": name, "unique_id": uid, "default_entity_id": f"{component}.{entity_slug(uid)}",
            "state_topic": topics.state, "value_template": template,
            "availability_topic": topics.availability,
            "payload_available": "online", "payload_not_available": "offline",
            "device": device, "origin": ORIGIN}
        if unit:
            body["unit_of_measurement"] = unit
        if device_class:
            body["device_class"] = device_class
        if component == "sensor" and unit:
            body["state_class"] = "measurement"
        out.append((f"{config.discovery_prefix}/{component}/{config.table}/{key}/config", body))
    return out
