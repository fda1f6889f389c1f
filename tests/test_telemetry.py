"""Telemetry against a real Mosquitto broker on loopback."""

from __future__ import annotations

import json
import threading
import time

import pytest

from shuffler.config import MqttConfig
from shuffler.faces.tables import TableBook, render
from shuffler.faces.telemetry import Telemetry, discovery_messages, parse_command

from .mqtt_broker import Broker, needs_mosquitto
from .waiting import wait_for

pytestmark = pytest.mark.slow

pytest.importorskip("paho.mqtt.client", reason="needs paho-mqtt: pip install 'shuffler[mqtt]'")

STATUS = {"fault": None, "battery": {"volts": 8.9, "percent": 80.0, "passes_left": 400,
                                     "hands_left": 80, "state": "ok"},
          "counters": {"hands": 3, "passes": 15}}


def cfg(broker: Broker, **kw) -> MqttConfig:
    return MqttConfig(host="127.0.0.1", port=broker.port, **{"table": "t1", **kw})


class Subscriber:
    """Collects every message under a topic filter."""

    def __init__(self, config: MqttConfig, topic: str = "#") -> None:
        from shuffler.faces.telemetry import connect_client

        self.messages: list[tuple[str, bytes, bool]] = []
        self.ready = threading.Event()
        self.client = connect_client(config, client_id="test-subscriber")

        def on_connect(c, u, f, rc, p=None):
            c.subscribe(topic, qos=1)
            self.ready.set()
        self.client.on_connect = on_connect
        self.client.on_message = lambda c, u, m: self.messages.append(
            (m.topic, m.payload, m.retain))
        self.client.connect_async(config.host, config.port, 10)
        self.client.loop_start()
        assert self.ready.wait(10)

    def on(self, topic):
        return [json.loads(p) if p.startswith(b"{") else p.decode()
                for t, p, _ in self.messages if t == topic]

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    b.start()
    yield b
    b.kill()


def test_commands_are_checked_and_a_pass_is_never_one():
    assert parse_command(b'{"cmd": "clear"}') == {"cmd": "clear", "id": None}
    for bad in (b"", b"[]", b"\xff", b'{"cmd": "pass"}', b'{"cmd": "hand"}',
                b'{"cmd": "new_game", "first_dealer": 7}', b"[" * 5000, b"x" * 5000):
        with pytest.raises(ValueError):
            parse_command(bad)


def test_discovery_names_units_device_and_origin_with_current_keys():
    config = MqttConfig(host="h", table="t9")
    from shuffler.faces.telemetry import Topics

    msgs = dict(discovery_messages(config, Topics("shuffler", "t9")))
    battery = msgs["homeassistant/sensor/t9/battery/config"]
    assert battery["unit_of_measurement"] == "%"
    assert battery["device_class"] == "battery"
    assert battery["device"]["identifiers"] == ["shuffler_t9"]
    assert battery["availability_topic"] == "shuffler/t9/availability"
    assert battery["default_entity_id"] == "sensor.shuffler_t9_battery"
    assert battery["origin"]["name"] == "shuffler" and battery["origin"]["sw_version"]
    assert all("object_id" not in body for body in msgs.values())  # deprecated in HA 2025.10
    assert msgs["homeassistant/binary_sensor/t9/fault/config"]["device_class"] == "problem"
    assert msgs["homeassistant/binary_sensor/t9/fault/config"]["default_entity_id"] == \
        "binary_sensor.shuffler_t9_fault"
    assert msgs["homeassistant/sensor/t9/battery_volts/config"]["unit_of_measurement"] == "V"


#: Home Assistant's rule for an entity id (homeassistant.core.valid_entity_id)
VALID_ENTITY_ID = r"(?!.+__)(?!_)[\da-z_]+(?<!_)\.(?!_)[\da-z_]+(?<!_)"


@pytest.mark.parametrize("table, slug", [("table-7", "table_7"), ("Table_7", "table_7"),
                                         ("t9", "t9"), ("club-A--2", "club_a_2"),
                                         ("_7-", "7")])
def test_every_entity_id_is_valid_whatever_the_tables_name(table, slug):
    import re

    from shuffler.faces.telemetry import Topics

    msgs = discovery_messages(MqttConfig(host="h", table=table), Topics("shuffler", table))
    for _, body in msgs:
        assert re.fullmatch(VALID_ENTITY_ID, body["default_entity_id"]), body
        assert f"shuffler_{slug}_" in body["default_entity_id"]
        assert body["unique_id"].startswith(f"shuffler_{table}_")  # kept: no entity moves
    assert "sensor.shuffler_table_7_battery" in {b["default_entity_id"] for _, b in msgs} \
        or table != "table-7"


@pytest.mark.parametrize("battery, expected", [
    ({"percent": 79.6, "volts": 8.9, "passes_left": 400}, ["80.0", "8.9", "400"]),
    (None, ["None"] * 3),
    ({"percent": None, "volts": None, "passes_left": None}, ["None"] * 3),
    ("missing", ["None"] * 3),
])
def test_every_template_renders_without_an_error_whatever_the_battery(battery, expected):
    jinja2 = pytest.importorskip("jinja2", reason="the templates are checked with Jinja2 "
                                 "(pip install jinja2), Home Assistant's template engine")
    from shuffler.faces.telemetry import Topics

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    value = {"state": "ready", "fault": None}
    if battery != "missing":
        value["battery"] = battery
    msgs = dict(discovery_messages(MqttConfig(host="h", table="t9"),
                                   Topics("shuffler", "t9")))
    got = [env.from_string(msgs[f"homeassistant/sensor/t9/{key}/config"]["value_template"])
           .render(value_json=value).strip() for key in ("battery", "battery_volts",
                                                         "passes_left")]
    assert got == expected
    assert env.from_string(msgs["homeassistant/sensor/t9/state/config"]["value_template"]) \
        .render(value_json=value) == "ready"
    assert env.from_string(msgs["homeassistant/binary_sensor/t9/fault/config"][
        "value_template"]).render(value_json=value) == "OFF"


def test_the_view_puts_problems_first_and_counts_duplicates_once():
    book = TableBook()
    book.take("shuffler/a/state", json.dumps({"state": "ready", **STATUS}).encode())
    book.take("shuffler/b/state", json.dumps({"state": "fault", **STATUS}).encode())
    book.take("shuffler/c/availability", b"offline")
    book.take("shuffler/a/pass", b'{"id": "x-1"}')
    book.take("shuffler/a/pass", b'{"id": "x-1"}')
    book.take("other/a/pass", b'{"id": "x-2"}')
    book.take("shuffler/a/pass", b"not json")
    assert [r.name for r in book.sorted_rows()] == ["c", "b", "a"]
    a = book.rows["a"]
    assert len(a.pass_ids) == 1 and a.duplicates == 1
    text = render(book.sorted_rows())
    assert text.splitlines()[1].startswith("c ") and "offline" in text


@needs_mosquitto
def test_state_is_retained_with_discovery_and_passes_arrive(broker):
    t = Telemetry(cfg(broker))
    t.start()
    try:
        wait_for(t.connected.is_set, what="connection")
        t.state(STATUS)
        for n in range(5):
            t.publish("pass", {"pass": {"number": n + 1, "counted": 24}})
        late = Subscriber(cfg(broker), "shuffler/t1/#")  # subscribes after the fact
        wait_for(lambda: late.on("shuffler/t1/state"), what="the retained state")
        state = late.on("shuffler/t1/state")[0]
        assert state["state"] == "ready" and state["counters"] == STATUS["counters"]
        assert late.on("shuffler/t1/availability") == ["online"]
        # passes are never retained (one may still arrive live)
        assert not any(r for topic, _, r in late.messages if topic.endswith("/pass"))
        late.close()
        sub = Subscriber(cfg(broker), "homeassistant/#")
        wait_for(lambda: len(sub.messages) >= 5, what="discovery")
        assert all(retain for _, _, retain in sub.messages)
        sub.close()
    finally:
        t.close()
    sub = Subscriber(cfg(broker), "shuffler/t1/availability")
    wait_for(lambda: sub.on("shuffler/t1/availability") == ["offline"], what="offline")
    sub.close()


@needs_mosquitto
def test_a_broker_restart_loses_nothing_and_state_comes_back(broker):
    t = Telemetry(cfg(broker))
    t.start()
    sub = None
    try:
        wait_for(t.connected.is_set, what="connection")
        t.state(STATUS)
        broker.kill()
        wait_for(lambda: not t.connected.is_set(), what="the loss to be seen")
        started = time.monotonic()
        for n in range(20):  # while the broker is away: never blocks
            t.publish("pass", {"n": n})
        assert time.monotonic() - started < 0.05
        broker.start()
        sub = Subscriber(cfg(broker), "shuffler/t1/#")
        wait_for(t.connected.is_set, what="reconnection")
        wait_for(lambda: len(sub.on("shuffler/t1/pass")) >= 20, what="queued passes")
        wait_for(lambda: sub.on("shuffler/t1/state"), what="state republished")
        ids = [m["id"] for m in sub.on("shuffler/t1/pass")]
        assert len(set(ids)) == 20
        assert [m["n"] for m in sub.on("shuffler/t1/pass")][:20] == list(range(20))
    finally:
        if sub:
            sub.close()
        t.close()


@needs_mosquitto
def test_remote_commands_need_permission_and_bad_ones_are_refused(broker):
    seen = []

    def handle(command):
        seen.append(command)
        return {"ok": True, "result": {"cleared": True}}

    for remote in (False, True):
        t = Telemetry(cfg(broker, remote_actions=remote, table=f"r{int(remote)}"),
                      on_command=handle)
        t.start()
        sub = Subscriber(cfg(broker), f"shuffler/r{int(remote)}/command/reply")
        try:
            wait_for(t.connected.is_set, what="connection")
            time.sleep(0.2)  # the subscription to commands is in place
            for payload in (b'{"cmd": "clear", "id": "a"}', b'{"cmd": "pass"}', b"\xff["):
                sub.client.publish(f"shuffler/r{int(remote)}/command", payload, qos=1)
            wait_for(lambda s=sub: len(s.messages) >= 3, what="replies")
            replies = sub.on(f"shuffler/r{int(remote)}/command/reply")
            [good] = [r for r in replies if r["request"] == "a"]
            if remote:
                assert good["ok"]
            else:  # answered too: the sender learns why nothing happened
                assert not good["ok"] and good["error"]["kind"] == "forbidden"
                assert "remote actions are off" in good["error"]["message"]
            bad = [r for r in replies if r["request"] is None]
            assert [(r["ok"], r["error"]["kind"]) for r in bad] == [(False, "bad_request")] * 2
            time.sleep(0.3)
            assert len(sub.messages) == 3  # one reply each
        finally:
            sub.close()
            t.close()
    assert [c["cmd"] for c in seen] == ["clear"]


@needs_mosquitto
def test_wrong_credentials_and_topics_outside_the_prefix_are_refused(tmp_path):
    acl = ("user t1\ntopic readwrite shuffler/t1/#\ntopic write homeassistant/#\n"
           "user admin\ntopic read #\n")
    broker = Broker(tmp_path, users={"t1": "right", "admin": "admin"}, acl=acl).start()
    try:
        pw = tmp_path / "pw"
        pw.write_text("wrong\n")
        t = Telemetry(cfg(broker, username="t1", password_file=pw))
        t.start()
        time.sleep(1.0)
        assert not t.connected.is_set()  # refused, logged, and nothing crashed
        t.publish("pass", {"n": 1})
        t.close()
        pw.write_text("right\n")
        good = Telemetry(cfg(broker, username="t1", password_file=pw))
        good.start()
        wait_for(good.connected.is_set, what="connection with the right password")
        # the same user may not write another table's topics: the broker drops it
        admin_pw = tmp_path / "apw"
        admin_pw.write_text("admin\n")
        sub = Subscriber(cfg(broker, username="admin", password_file=admin_pw), "shuffler/#")
        good._client.publish("shuffler/t2/state", b"{}", qos=1).wait_for_publish(5)
        good.publish("pass", {"n": 1})  # its own topic goes through
        wait_for(lambda: sub.on("shuffler/t1/pass"), what="the table's own pass")
        assert sub.on("shuffler/t2/state") == []  # the broker dropped the stray topic
        sub.close()
        good.close()
    finally:
        broker.kill()


def documented_acl() -> str:
    """The ACL that docs/mqtt.md tells a room to use, exactly."""
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "mqtt.md").read_text()
    start = doc.index("```\n# /etc/mosquitto/acl") + 4
    return doc[start:doc.index("```", start)]


@needs_mosquitto
def test_the_documented_acl_keeps_each_table_to_its_own_topics(tmp_path):
    users = {"t1": "p1", "t2": "p2", "homeassistant": "ha"}
    broker = Broker(tmp_path, users=users, acl=documented_acl()).start()

    def config(user: str) -> MqttConfig:
        (tmp_path / f"{user}.pw").write_text(users[user] + "\n")
        return cfg(broker, table=user if user.startswith("t") else "t1", username=user,
                   password_file=tmp_path / f"{user}.pw")
    t1 = Telemetry(config("t1"))
    t2 = Telemetry(config("t2"))
    ha = None
    try:
        t1.start()
        t2.start()
        wait_for(lambda: t1.connected.is_set() and t2.connected.is_set(), what="connections")
        t1.state(STATUS)
        ha = Subscriber(config("homeassistant"), "#")
        mine = "homeassistant/sensor/t1/battery/config"
        wait_for(lambda: ha.on(mine) and ha.on("shuffler/t1/state"), what="t1's own topics")
        wait_for(lambda: ha.on("homeassistant/sensor/t2/battery/config"), what="t2's own")
        # t2 tries to overwrite t1's discovery config and state: the broker drops both
        for topic in (mine, "shuffler/t1/state", "shuffler/t1/availability"):
            t2._client.publish(topic, b'{"hijacked": true}', qos=1,
                               retain=True).wait_for_publish(5)
        time.sleep(0.5)
        hijacked = [t for t, p, _ in ha.messages if b"hijacked" in p]
        assert hijacked == []
        ha.close()  # the spy below takes its client id
        ha = None
        # t2's page still shows the room (t1 online and its state), never t1's commands
        from shuffler.faces.tables import TableWatcher

        room = TableWatcher(config("t2"), client_id="t2-view").start()
        spy = Subscriber(config("t2"), "shuffler/t1/command")
        try:
            wait_for(lambda: (row := room.book.rows.get("t1")) is not None
                     and row.online and row.state == "ready", what="t1 in t2's room view")
            t1._client.publish("shuffler/t1/command", b'{"cmd": "clear"}', qos=1) \
                .wait_for_publish(5)
            time.sleep(0.5)
            assert spy.messages == []
        finally:
            spy.close()
            room.close()
    finally:
        if ha is not None:
            ha.close()
        t1.close()
        t2.close()
        broker.kill()


def test_a_burst_of_refusals_is_one_log_line_with_a_count(monkeypatch):
    from shuffler import logs

    lines = []

    class Logger:
        def warning(self, what, **fields):
            lines.append((what, fields))
    now = [100.0]
    monkeypatch.setattr(logs.time, "monotonic", lambda: now[0])
    burst = logs.Burst(Logger(), "refused", every=10)
    for _ in range(500):
        burst.note(kind="busy")
        now[0] += 0.01
    now[0] += 10
    burst.note(kind="busy")
    assert lines == [("refused", {"count": 1, "kind": "busy"}),
                     ("refused", {"count": 500, "kind": "busy"})]


class FakeClient:
    """Stands in for paho's client: records what is published; ``full`` publishes are
    refused as paho does when its own store is full."""

    def __init__(self, config, full=0):
        self.sent: list[str] = []
        self.full = full
        self.lock = threading.Lock()

    def will_set(self, *a, **k):
        pass

    def publish(self, topic, payload, qos=0, retain=False):
        from types import SimpleNamespace

        with self.lock:
            if self.full:
                self.full -= 1
                return SimpleNamespace(rc=15)
            self.sent.append(topic)
        return SimpleNamespace(rc=0)

    def subscribe(self, *a, **k):
        pass


class Reason:
    is_failure = False


def test_after_a_reconnect_online_goes_first_then_discovery_then_state_whatever_is_queued():
    fake = FakeClient(None, full=30)
    t = Telemetry(MqttConfig(host="h", table="t1", queue_limit=20),
                  client_factory=lambda config: fake)
    for i in range(200):  # the broker is away: far more than the queue holds
        t.publish("pass", {"n": i})
    t.state(STATUS)
    t.publish("fault", {"fault": None}, retain=True)
    t._on_connect(fake, None, None, Reason())
    t._sender.start()
    wait_for(lambda: len(fake.sent) >= 1 + 5 + 2 + 20, what="everything sent")
    discovery = [m for m in fake.sent if m.startswith("homeassistant/")]
    assert fake.sent[0] == "shuffler/t1/availability"
    assert fake.sent[1:6] == discovery and len(discovery) == 5
    assert set(fake.sent[6:8]) == {"shuffler/t1/state", "shuffler/t1/fault"}
    assert fake.sent[8:] == ["shuffler/t1/pass"] * 20  # the newest 20 passes
    assert t.dropped == 180  # counted; and paho's full store dropped nothing: it waited
    with t._wake:
        t._closing = True
        t._wake.notify()
    t._sender.join(5)


def test_a_flood_of_passes_with_a_slow_sender_drops_passes_never_a_command_reply():
    from types import SimpleNamespace

    warned = []

    class Logger:
        def warning(self, what, **fields):
            warned.append((what, fields))
    fake = FakeClient(None)
    slow = fake.publish

    def publish(topic, payload, qos=0, retain=False):
        time.sleep(0.002)  # a starved machine: the sender falls far behind
        return slow(topic, payload, qos, retain)
    fake.publish = publish
    t = Telemetry(MqttConfig(host="h", table="t1", queue_limit=50, remote_actions=False),
                  client_factory=lambda config: fake)
    t._drops.logger = Logger()
    t._on_connect(fake, None, None, Reason())
    t._sender.start()
    for i in range(40):  # each refused (actions off), between floods of passes
        t._on_message(fake, None, SimpleNamespace(
            topic="shuffler/t1/command", payload=json.dumps({"cmd": "clear", "id": f"c{i}"})
            .encode()))
        for n in range(20):
            t.publish("pass", {"n": n})
    wait_for(lambda: not (t._replies or t._queue), 30, "the queues drained")
    assert fake.sent.count("shuffler/t1/command/reply") == 40  # every reply
    assert t.dropped > 0  # passes went, counted
    drops = [f for w, f in warned if w.startswith("telemetry messages dropped")]
    assert drops and drops[0]["topic"] == "shuffler/t1/pass"
    assert len(drops) < 5  # once a burst, not once each
    with t._wake:
        t._closing = True
        t._wake.notify()
    t._sender.join(5)


def test_the_service_tells_the_broker_each_pass_as_it_ends_and_each_fault_change_once(
        broker, tmp_path, monkeypatch):
    """The service's bus to MQTT (Telemetry.hear): a jam's fault once as it latches and
    null once as it clears, however often the state is told; a hand's passes one by one,
    before its summary."""
    import dataclasses
    import random

    from hardware_sim import SimDevice, parse_fault_specs
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.session import Session
    from shuffler.device.clock import VirtualClock
    from shuffler.faces.router import Faces
    from shuffler.service.loop import Service
    from shuffler.store.state import StateStore

    from .test_watchdog import run

    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    config = dataclasses.replace(Config(), mqtt=cfg(broker))
    clock = VirtualClock()
    device = SimDevice.for_cards(24, faults=parse_fault_specs(["jam:5:99"]),
                                 rng=random.Random(3), clock=clock)
    session = Session(PassController(device, StateStore(tmp_path / "state")), config,
                      random.Random(1))
    service = Service(session, tmp_path / "s.sock", clock=clock, faces=Faces)
    sub = Subscriber(cfg(broker), "shuffler/t1/#")
    service.faces.start()

    def faults(n: int) -> list:
        """The fault messages once there are ``n`` (a retained topic's newest is sent: each
        step waits for its own, or a quick one would replace the last unsent)."""
        told = lambda: [m["fault"] and m["fault"]["kind"] for m in sub.on("shuffler/t1/fault")]  # noqa: E731
        wait_for(lambda: len(told()) >= n, what=f"{n} fault messages")
        return told()

    try:
        wait_for(service.faces.telemetry.connected.is_set, what="connection")
        service.refresh()  # the first state tells its fault: none
        assert faults(1) == [None]
        assert run(service, "pass")["result"]["pass"]["fault"]["kind"] == "jam"
        assert faults(2) == [None, "jam"]
        service.refresh()
        assert run(service, "clear")["result"]["cleared"]
        assert faults(3) == [None, "jam", None]
        service.refresh()
        assert run(service, "hand", passes=2)["ok"]
        wait_for(lambda: sub.on("shuffler/t1/hand"), what="the hand")
        assert faults(3) == [None, "jam", None]  # the states between: no fault told again
        order = [t.rsplit("/", 1)[1] for t, _, _ in sub.messages
                 if t.endswith(("/pass", "/hand"))]
        assert order == ["pass", "pass", "pass", "hand"]  # the jammed one, then the hand's
    finally:
        service.faces.close()
        sub.close()
