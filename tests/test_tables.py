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

pytestmark = pytest.mark.slow

pytest.importorskip("paho.mqtt.client", reason="needs paho-mqtt: pip install 'shuffler[mqtt]'")

#: the room: 50 tables for half a minute, the broker away for a quarter of it
#: (SHUFFLER_ROOM="tables,seconds" to try another: "50,600" for an evening's taste)
TABLES, SECONDS = (int(x) for x in os.environ.get("SHUFFLER_ROOM", "50,30").split(","))


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


# -- the tournament board: 20 tables' keepers, the organiser's standings ------------------

def keeper_plays(client, rng, hands=None) -> None:
    """One game played out at a table as its keeper scores it (to the target, or
    ``hands`` hands): random makers, tricks, now and then a loner or a renege."""
    n = 0
    while hands is None or n < hands:
        score = client.request("score")["score"]
        if score["winner"] is not None:
            return
        makers, tricks = rng.randrange(2), rng.choice((0, 1, 2, 3, 3, 4, 4, 5, 5))
        renege = rng.randrange(2) if rng.random() < 0.05 else None
        client.request("score", makers=makers, tricks=tricks, renege=renege,
                       alone=tricks == 5 and rng.random() < 0.2, version=score["version"])
        n += 1


def sum_of_scorebooks(books: dict[str, dict]) -> dict[str, dict]:
    """The standings as the test adds them up itself from each table's own scorebook:
    every won game, played or at the table, by team name."""
    lines: dict[str, dict] = {}
    for score in books.values():
        current = {**score, "hands": len(score["hands"])}
        for g in [*score["played"], current]:
            if g["winner"] is None:
                continue
            for t in (0, 1):
                line = lines.setdefault(g["team_names"][t], {"played": 0, "won": 0, "lost": 0,
                                                             "points_for": 0,
                                                             "points_against": 0})
                line["played"] += 1
                line["won" if g["winner"] == t else "lost"] += 1
                line["points_for"] += g["totals"][t]
                line["points_against"] += g["totals"][1 - t]
    return lines


@needs_mosquitto
def test_a_tournament_of_20_tables_fills_the_board_by_itself(tmp_path):
    import csv
    import io
    import random

    from shuffler.faces.tables import board

    rng = random.Random(36)  # the games' results only: nothing here is a plan
    broker = Broker(tmp_path).start()
    names = [f"t{i:02d}" for i in range(20)]
    services = {n: Service(tmp_path, table_config(broker.port, n), speed=200, name=n)
                for n in names}
    teams = [f"Team {k:02d}" for k in range(40)]
    watcher = TableWatcher(MqttConfig(host="127.0.0.1", port=broker.port), "organiser")
    try:
        for s in services.values():
            s.start(timeout=120)
        watcher.start()
        assert watcher.subscribed.wait(10)

        def play_round(r: int, i: int, hands=None) -> None:
            """Round r at table i: two teams (they move between rounds), a game."""
            a, b = teams[2 * i], teams[(2 * i + 1 + 2 * r) % 40]
            client = services[names[i]].client()
            try:
                client.request("new_game", names=[a, b])
                keeper_plays(client, rng, hands)
            finally:
                client.close()

        for r in range(2):  # two rounds played out at every table, one left going
            for i in range(20):
                play_round(r, i)
        # table 3 drops off the broker (killed: the broker sends its last will) and comes
        # back, replaying its retained score; table 4 is stopped and restarted
        services["t03"].stop(signal.SIGKILL)
        services["t04"].stop()
        wait_for(lambda: all(watcher.book.rows[n].online is False for n in ("t03", "t04")),
                 60, "t03 and t04 offline")
        services["t03"].start(timeout=60)
        services["t04"].start(timeout=60)
        for i in range(20):
            play_round(2, i, hands=2 if i % 2 else None)
        books = {n: s.client().request("score")["score"] for n, s in services.items()}

        def caught_up() -> bool:
            rows = watcher.book.rows
            return all(rows.get(n) and rows[n].online and rows[n].score
                       and rows[n].score["version"] == books[n]["version"] for n in names)
        wait_for(caught_up, 60, "every table's last score on the board")
        view = board(watcher.book, time.time())
        expected = sum_of_scorebooks(books)
        got = {s["team"]: {k: s[k] for k in ("played", "won", "lost", "points_for",
                                             "points_against")} for s in view["standings"]}
        assert got == expected
        assert sum(s["won"] for s in view["standings"]) == sum(
            len([g for g in [*b["played"], b] if g["winner"] is not None]) for b in books.values())
        # the games at the tables now: each team playing one is shown with its score
        playing = {s["team"]: s["playing"] for s in view["standings"] if s["playing"]}
        for i in range(1, 20, 2):
            b = books[names[i]]
            assert b["winner"] is None and len(b["hands"]) == 2
            assert playing[b["team_names"][0]] == {
                "table": names[i], "game": b["number"], "against": b["team_names"][1],
                "score": b["totals"][0], "their_score": b["totals"][1]}
        # games numbered as played: three at every table
        assert all([g["number"] for g in b["played"]] == [1, 2] and b["number"] == 3
                   for b in books.values())
        # the organiser's sheet: a round clock started, then the CSV and the JSON agree
        conf = tmp_path / "organiser.toml"
        conf.write_text(f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\n')
        started = cli("tables", "--round", "20", "--once", "--wait", "2", config=conf)
        assert started.returncode == 0, started.stderr
        assert "round 1 started: 20 minutes" in started.stdout
        assert "round 1: 19:5" in started.stdout or "round 1: 20:00" in started.stdout
        sheet = cli("tables", "--results", "csv", "--wait", "2", config=conf)
        data = cli("tables", "--results", "json", "--wait", "2", config=conf)
        assert sheet.returncode == data.returncode == 0, sheet.stderr + data.stderr
        rows = list(csv.DictReader(io.StringIO(sheet.stdout)))
        standings = json.loads(data.stdout)["standings"]
        assert len(rows) == len(standings) == 40
        for row, line in zip(rows, standings, strict=True):
            assert row["team"] == line["team"]
            assert all(int(row[k]) == line[k] for k in ("place", "played", "won", "lost",
                                                        "points_for", "points_against",
                                                        "difference"))
        assert {line["team"]: {k: line[k] for k in expected[line["team"]]}
                for line in standings} == expected
        assert json.loads(data.stdout)["round"]["round"] == 1
        snapshot = cli("--json", "tables", "--wait", "2", config=conf)
        validate(json.loads(snapshot.stdout), "tables")
        # nothing published carries a plan or a card order: only the scores' words
        for row in watcher.book.rows.values():
            text = json.dumps(row.score)
            assert "plan" not in text and "order" not in text
    finally:
        watcher.close()
        for s in services.values():
            if s.proc and s.proc.poll() is None:
                s.stop()
        broker.kill()


@needs_mosquitto
def test_the_board_page_shows_the_standings_and_the_horn_to_a_phone(tmp_path):
    import random
    from pathlib import Path

    from .browser import AXE_JS, CHROMIUM, audit, phone_browser
    from .mqtt_broker import free_port

    if not CHROMIUM or AXE_JS is None:
        pytest.skip("needs chromium and axe-core (see tests/browser.py)")
    shots = os.environ.get("SHUFFLER_SCREENSHOTS")
    broker = Broker(tmp_path).start()
    port = free_port()
    page = Service(tmp_path, table_config(broker.port, "table-1")
                   + f"\n[web]\nenabled = true\nport = {port}\n", speed=200, name="table-1")
    other = Service(tmp_path, table_config(broker.port, "table-2"), speed=200, name="table-2")
    rng = random.Random(7)
    try:
        for s, pair in ((page, ["Ann & Bo", "Cy & Di"]), (other, ["Ed & Fay", "Gus & Hal"])):
            s.start()
            client = s.client()
            client.request("new_game", names=pair)
            keeper_plays(client, rng)
            client.request("new_game", names=pair[::-1])
            keeper_plays(client, rng, hands=3)
            client.close()
        with phone_browser() as d:
            d.get(f"http://127.0.0.1:{port}/tables")
            count = "return document.querySelectorAll('#standings tr').length"
            wait_for(lambda: d.execute_script(count) == 4, 30, "four teams on the board")
            audit(d, "the tournament board")
            if shots:
                d.save_screenshot(str(Path(shots) / "board.png"))
            conf = tmp_path / "organiser.toml"
            conf.write_text(f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\n')
            started = cli("tables", "--round", "20", "--once", "--wait", "1", config=conf)
            assert started.returncode == 0, started.stderr
            clock = "return document.getElementById('clock').textContent"
            wait_for(lambda: d.execute_script(clock) in ("20:00", "19:59", "19:58", "19:57"),
                     15, "the round clock")
            from shuffler.faces.telemetry import connect_client

            horn = connect_client(MqttConfig(host="127.0.0.1", port=broker.port), "horn")
            horn.connect("127.0.0.1", broker.port)
            horn.loop_start()
            horn.publish("shuffler/.room/round", json.dumps(
                {"round": 2, "started": time.time() - 20 * 60 - 1, "minutes": 20}),
                qos=1, retain=True).wait_for_publish(5)
            horn.loop_stop()
            horn.disconnect()
            wait_for(lambda: d.execute_script(clock) == "Time!", 15, "the horn")
            assert d.find_element("id", "clockbox").get_attribute("data-horn") == "true"
            audit(d, "the tournament board at the horn")
            if shots:
                d.save_screenshot(str(Path(shots) / "board-horn.png"))
    finally:
        for s in (page, other):
            if s.proc and s.proc.poll() is None:
                s.stop()
        broker.kill()
