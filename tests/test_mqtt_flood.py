"""A flood of remote commands at a real service through a real Mosquitto: the table
stays online, every command is answered, and the dealer's touch still starts the pass."""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest

from shuffler.config import MqttConfig
from shuffler.faces.telemetry import connect_client

from .mqtt_broker import Broker, free_port, needs_mosquitto
from .served import Service
from .waiting import wait_for

pytest.importorskip("paho.mqtt.client", reason="needs paho-mqtt: pip install 'shuffler[mqtt]'")
pytestmark = [pytest.mark.slow, needs_mosquitto]

COMMANDS = 2000


class Listener:
    """Every message under shuffler/t1/ as it arrives (availability included)."""

    def __init__(self, port: int, client_id: str, slow: float = 0.0) -> None:
        self.messages: list[tuple[str, bytes, bool]] = []
        self.replied: set[str] = set()  # the ids of the command replies seen
        self.lock = threading.Lock()
        ready = threading.Event()
        self.client = connect_client(MqttConfig(host="127.0.0.1", port=port),
                                     client_id=client_id)

        def on_connect(c, u, f, rc, p=None):
            c.subscribe("shuffler/t1/#", qos=1)
            ready.set()

        def on_message(c, u, m):
            time.sleep(slow)  # a view on a busy machine, slow on purpose
            with self.lock:
                self.messages.append((m.topic, m.payload, m.retain))
                if m.topic.endswith("/command/reply"):  # read once, as it comes
                    self.replied.add(json.loads(m.payload)["request"])
        self.client.on_connect, self.client.on_message = on_connect, on_message
        self.client.connect_async("127.0.0.1", port, 10)
        self.client.loop_start()
        assert ready.wait(10)

    def on(self, topic: str) -> list[bytes]:
        with self.lock:
            return [p for t, p, _ in self.messages if t == topic]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def test_two_thousand_remote_commands_leave_the_table_online_and_the_touch_working(tmp_path):
    # The listener sees 4000 messages (every command and its reply) in this process, beside
    # the sender: starved, it falls more than Mosquitto's default 1000 behind, and the broker
    # drops its copies ("Outgoing messages are being dropped for client flood-listener").
    # That is the test's own view losing messages, not the table: give it a room's queue.
    # The listener is made slow on purpose (3 ms a message), so the default would fail.
    broker = Broker(tmp_path, queue=100_000).start()
    web_port = free_port()
    svc = Service(tmp_path, f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\n'
                            f'table = "t1"\nkeepalive_s = 5\nremote_actions = true\n\n'
                            f"[web]\nenabled = true\nport = {web_port}\n\n[hand]\npasses = 2\n",
                  speed=20, name="t1")
    listen = sender = None
    try:
        svc.start()
        listen = Listener(broker.port, "flood-listener", slow=0.003)
        wait_for(lambda: b"online" in listen.on("shuffler/t1/availability"), 20, "online")
        sender = connect_client(MqttConfig(host="127.0.0.1", port=broker.port),
                                client_id="flood-sender")
        sender.max_queued_messages_set(0)
        sender.connect("127.0.0.1", broker.port, 30)
        sender.loop_start()
        infos = []
        for i in range(COMMANDS):
            infos.append(sender.publish("shuffler/t1/command",
                                        json.dumps({"cmd": "clear", "id": f"c{i}"}), qos=1))
            if i == COMMANDS // 4:  # the dealer touches the machine mid-flood
                conn = http.client.HTTPConnection("127.0.0.1", web_port, timeout=10)
                conn.request("POST", "/api/pass", b"{}", {"Content-Type": "application/json"})
                assert conn.getresponse().status == 200
                conn.close()
        for info in infos:
            info.wait_for_publish(30)

        def answered() -> set[str]:
            with listen.lock:
                return set(listen.replied)
        # every command answered is the promise, not how fast: a starved machine takes longer
        try:
            ids = wait_for(lambda: len(answered()) >= COMMANDS and answered(), 300,
                           "a reply to every command", every=0.2)
        except AssertionError:
            missing = sorted({f"c{i}" for i in range(COMMANDS)} - answered(),
                             key=lambda m: int(m[1:]))
            raise AssertionError(f"{len(missing)} of {COMMANDS} commands unanswered, e.g. "
                                 f"{missing[:5]}; the broker's log ends: {broker.log()[-600:]}; "
                                 f"the service's log ends: {svc.log.read_text()[-1500:]}"
                                 ) from None
        assert ids == {f"c{i}" for i in range(COMMANDS)}
        replies = [json.loads(p) for p in listen.on("shuffler/t1/command/reply")]
        assert len(replies) == COMMANDS  # one each
        refused = [r for r in replies if not r["ok"]]
        assert all(r["error"]["kind"] in ("busy",) for r in refused), refused[:3]
        # the touch made during the flood ran the hand
        hand = wait_for(lambda: listen.on("shuffler/t1/hand"), 60, "the touched hand")
        assert json.loads(hand[0])["hand"]["completed"]
        time.sleep(8)  # past the keepalive: a lapsed connection would show by now
        assert listen.on("shuffler/t1/availability")[-1] == b"online"
        assert b"offline" not in listen.on("shuffler/t1/availability")
        late = Listener(broker.port, "late-view")  # what a new view sees: retained online
        try:
            wait_for(lambda: late.on("shuffler/t1/availability"), 10, "retained availability")
            assert late.on("shuffler/t1/availability") == [b"online"]
            # retained too, delivered after availability: on a busy host a moment later
            wait_for(lambda: late.on("shuffler/t1/state"), 10, "the retained state")
        finally:
            late.close()
        assert svc.log.read_text().count("remote commands refused") < 50  # once a burst
    finally:
        if sender is not None:
            sender.disconnect()
            sender.loop_stop()
        if listen is not None:
            listen.close()
        svc.stop()
        broker.kill()
