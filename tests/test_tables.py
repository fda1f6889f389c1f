"""A room of tables on one real broker: services on the simulator publish, a view and
the CLI read, the broker dies and comes back, a service is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from shuffler.config import MqttConfig
from shuffler.faces.tables import TableWatcher
from shuffler.schemas import validate
from shuffler.service.client import ServiceError

from .mqtt_broker import Broker, needs_mosquitto
from .served import SHUFFLER, Service
from .waiting import wait_for

pytest.importorskip("paho.mqtt.client", reason="needs paho-mqtt: pip install 'shuffler[mqtt]'")

#: the room: 50 tables for a minute (SHUFFLER_ROOM="tables,seconds" to try another)
TABLES, SECONDS = (int(x) for x in os.environ.get("SHUFFLER_ROOM", "50,60").split(","))


def table_config(port: int, name: str, keepalive: int = 30) -> str:
    return (f'[mqtt]\nhost = "127.0.0.1"\nport = {port}\ntable = "{name}"\n'
            f"keepalive_s = {keepalive}\n\n[hand]\npasses = 2\n")


def cli(*args: str, config=None) -> subprocess.CompletedProcess:
    env = {**os.environ}
    return subprocess.run([SHUFFLER, *(["--config", str(config)] if config else []), *args],
                          capture_output=True, text=True, timeout=60, env=env, check=False)


@needs_mosquitto
def test_a_room_of_tables_loses_nothing_when_the_broker_restarts(tmp_path):
    # the broker keeps sessions on disk (saved every second), as a room's broker would
    broker = Broker(tmp_path, persistent=True).start()
    services = [Service(tmp_path, table_config(broker.port, f"t{i:02d}"), speed=200,
                        name=f"t{i:02d}") for i in range(TABLES)]
    watcher = None
    try:
        for s in services:
            s.start(timeout=120)
        watcher = TableWatcher(MqttConfig(host="127.0.0.1", port=broker.port),
                               client_id="organiser", persistent=True).start()
        assert watcher.subscribed.wait(10)
        hands = {s.folder.name: [] for s in services}  # wall-clock end of each hand
        stop = threading.Event()

        def play(s: Service) -> None:
            client = s.client()
            while not stop.is_set():
                try:
                    result = client.request("hand")
                except ServiceError as e:  # busy: the service's own touch, never here
                    raise AssertionError(f"{s.folder.name}: {e}") from None
                assert result["hand"]["completed"], result
                hands[s.folder.name].append(time.monotonic())
            client.close()

        players = [threading.Thread(target=play, args=(s,), daemon=True) for s in services]
        started = time.monotonic()
        for p in players:
            p.start()
        time.sleep(max(SECONDS / 3, 2))
        # killed as an init system stops it (SIGTERM): it saves the sessions it holds; a
        # SIGKILLed broker loses what it held only in memory, as MQTT allows
        broker.terminate()
        down = time.monotonic()
        time.sleep(SECONDS / 4)  # long enough for every table to finish hands meanwhile
        up = time.monotonic()
        broker.start()
        time.sleep(max(0.0, SECONDS - (time.monotonic() - started)))
        stop.set()
        for p in players:
            p.join(60)
            assert not p.is_alive()
        # no table waited on the broker: the room dealt as fast while it was away
        def rate(lo: float, hi: float) -> float:
            return sum(lo < t < hi for ends in hands.values() for t in ends) / (hi - lo)
        before, during = rate(started + 5, down), rate(down, up)
        assert during > 0.5 * before, f"hands/s before {before:.2f}, broker down {during:.2f}"
        assert all(hands.values()), "a table finished no hand"
        # every pass and hand message arrived once; the retained states match each status
        view = TableWatcher(MqttConfig(host="127.0.0.1", port=broker.port),
                            client_id="late-view").start()
        try:
            for s in services:
                status = s.client().request("status")
                name = s.folder.name

                def caught_up(name=name, status=status):
                    row = watcher.book.rows.get(name)
                    late = view.book.rows.get(name)
                    return (row is not None and late is not None
                            and len(row.pass_ids) == status["counters"]["passes"]
                            and len(row.hand_ids) == status["counters"]["hands"]
                            and late.status.get("counters") == status["counters"])
                wait_for(caught_up, 60, f"{name}: {status['counters']}; organiser "
                         f"{watcher.book.rows.get(name)}; late view "
                         f"{(view.book.rows.get(name) or object())!r}")
                assert status["counters"]["hands"] == len(hands[name])
        finally:
            view.close()
        # the organiser's view, as a script reads it
        conf = tmp_path / "organiser.toml"
        conf.write_text(f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\n')
        out = cli("--json", "tables", "--wait", "2", config=conf)
        assert out.returncode == 0, out.stderr
        seen = json.loads(out.stdout)
        validate(seen, "tables")
        assert {t["table"] for t in seen["tables"]} == {s.folder.name for s in services}
        assert all(t["state"] == "ready" and t["online"] for t in seen["tables"])
    finally:
        if watcher:
            watcher.close()
        for s in services:
            if s.proc and s.proc.poll() is None:
                s.stop()
        broker.kill()


@needs_mosquitto
def test_a_killed_service_goes_offline_within_its_keepalive_and_sorts_first(tmp_path):
    broker = Broker(tmp_path).start()
    keepalive = 5
    dead = Service(tmp_path, table_config(broker.port, "dead", keepalive), name="dead")
    alive = Service(tmp_path, table_config(broker.port, "alive", keepalive), name="alive")
    watcher = TableWatcher(MqttConfig(host="127.0.0.1", port=broker.port), "view").start()
    try:
        dead.start()
        alive.start()
        wait_for(lambda: all(watcher.book.rows.get(n) and watcher.book.rows[n].online
                             for n in ("dead", "alive")), 20, "both online")
        # what a table publishes for a hand, each message checked against its schema
        from shuffler.faces.telemetry import connect_client

        got: list = []
        sub = connect_client(MqttConfig(host="127.0.0.1", port=broker.port), "checker")
        sub.on_connect = lambda c, u, f, rc, p=None: c.subscribe("shuffler/alive/#", 1)
        sub.on_message = lambda c, u, m: got.append((m.topic.rsplit("/", 1)[1], m.payload))
        sub.connect_async("127.0.0.1", broker.port)
        sub.loop_start()
        client = alive.client()
        client.request("hand", passes=2)
        client.close()
        wait_for(lambda: {k for k, _ in got} >= {"state", "pass", "hand"}, 20, "messages")
        sub.loop_stop()
        for kind, payload in got:
            if kind in ("state", "pass", "hand", "fault"):
                validate(json.loads(payload), f"mqtt_{kind}")
        dead.stop(signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: watcher.book.rows["dead"].online is False, 3 * keepalive,
                 "the last will")
        assert time.monotonic() - killed <= 1.5 * keepalive + 1
        assert [r.name for r in watcher.book.sorted_rows()] == ["dead", "alive"]
    finally:
        watcher.close()
        for s in (dead, alive):
            if s.proc and s.proc.poll() is None:
                s.stop()
        broker.kill()


def test_the_score_from_the_command_line(tmp_path):
    state = ["--state-dir", str(tmp_path / "state"), "--no-service"]
    assert cli(*state, "score", "add", "North", "5", "--alone").returncode == 0
    assert cli(*state, "score", "add", "West", "2").returncode == 0  # East & West euchred
    out = cli(*state, "--json", "score")
    score = json.loads(out.stdout)["score"]
    assert score["totals"] == [6, 0] and [h["points"] for h in score["hands"]] == [4, 2]
    bad = cli(*state, "score", "add", "Nobody", "3")
    assert bad.returncode == 2 and "expected one of North, East, South, West" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert cli(*state, "score", "undo").returncode == 0
    new = cli(*state, "score", "new", "--first-dealer", "South")
    assert new.returncode == 0 and "game 2 to 10" in new.stdout
    assert "dealer" in (status := cli(*state, "--json", "status")).stdout
    assert json.loads(status.stdout)["dealer"] == "South"
    code = cli(*state, "pair").stdout
    assert cli(*state, "pair").stdout == code and code.startswith("pairing code: ")
    assert cli(*state, "pair", "--new").stdout != code


def test_the_view_without_a_broker_says_so(tmp_path):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    out = cli("--config", str(empty), "tables")
    assert out.returncode == 2 and "[mqtt] host" in out.stderr


@needs_mosquitto
def test_the_page_shows_every_table_problems_first(tmp_path):
    import http.client

    from .mqtt_broker import free_port

    broker = Broker(tmp_path).start()
    port = free_port()
    page = Service(tmp_path, table_config(broker.port, "page", 5)
                   + f"\n[web]\nenabled = true\nport = {port}\n", name="page")
    other = Service(tmp_path, table_config(broker.port, "other", 5), name="other")

    def rows():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/api/tables")
        body = json.loads(conn.getresponse().read())
        conn.close()
        return body["tables"]

    try:
        page.start()
        other.start()
        wait_for(lambda: {r["table"] for r in rows() if r["online"]} == {"page", "other"},
                 20, "both tables on the page")
        validate({"broker": "b", "connected": True, "tables": rows()}, "tables")
        other.stop(signal.SIGKILL)
        wait_for(lambda: rows()[0]["table"] == "other" and rows()[0]["state"] == "offline",
                 20, "the dead table first")
    finally:
        for s in (page, other):
            if s.proc and s.proc.poll() is None:
                s.stop()
        broker.kill()
