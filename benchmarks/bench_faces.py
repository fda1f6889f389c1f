"""Benchmark: what the dealer's page and MQTT telemetry cost the service.

- the idle service's memory (RSS) with the page off and on, and with telemetry on;
- the time from a pass event (a card counted, as a socket client receives it; negative:
  the page heard first) to the page's event stream carrying it;
- the time from a table publishing to the tournament view receiving it, with 50
  tables on one broker (p50, p99);
- the messages a second one table's telemetry gets to the broker, and a pass's wall
  time with and without telemetry flooding beside it;
- with the page and MQTT (remote actions) both on: start-up, idle RSS, then the abuse
  of issue 24 all at once (8 connections sending 6 MB of headers, 300 slow sockets,
  20 event streams from one client, 2000 remote commands): peak and after RSS, peak
  threads, the page's event latency meanwhile, and whether every command was answered.

Prints a table, then the figures as JSON on the last line. Needs Mosquitto for the
MQTT rows (skipped with a note otherwise).

    .venv/bin/python benchmarks/bench_faces.py [--idle 5]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shuffler.service.client import ServiceError  # noqa: E402
from tests.mqtt_broker import MOSQUITTO, Broker, free_port  # noqa: E402
from tests.served import Service  # noqa: E402


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def idle_rss(tmp: Path, name: str, config: str, idle: float) -> float:
    svc = Service(tmp, config, name=name).start()
    try:
        time.sleep(idle)
        return rss_mib(svc.proc.pid)
    finally:
        svc.stop()


def page_latency(tmp: Path, hands: int = 3) -> list[float]:
    """Seconds from a card event on the socket to the same count on the page's stream."""
    port = free_port()
    svc = Service(tmp, f"[web]\nenabled = true\nport = {port}\n", speed=2.0,
                  name="latency").start()
    try:
        return stream_latency(svc, port, hands)
    finally:
        svc.stop()


def stream_latency(svc: Service, port: int, hands: int) -> list[float]:
    sent: dict[int, float] = {}
    seen: dict[int, float] = {}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/events")
        response = conn.getresponse()  # kept: dropping it closes the stream
        stream = response.fp
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                line = stream.readline()
                if line.startswith(b"data: "):
                    counted = json.loads(line[6:])["pass"]["counted"]
                    seen.setdefault(counted, time.perf_counter())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        client = svc.client()
        latencies = []
        for _ in range(hands):
            sent.clear()
            seen.clear()
            while True:  # busy while remote commands hold the machine: ask again
                try:
                    client.request("pass", lambda ev: ev.get("event") == "card" and
                                   sent.setdefault(ev["counted"], time.perf_counter()))
                    break
                except ServiceError as e:
                    if e.kind != "busy":
                        raise
                    time.sleep(0.01)
            time.sleep(0.3)
            latencies += [seen[c] - t for c, t in sent.items() if c in seen and c > 0]
        stop.set()
        client.close()
        return latencies
    finally:
        conn.close()


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def hold_sockets(port: int, count: int, data: bytes, stop: threading.Event) -> None:
    """``count`` connections to the page from another address than the dealer's page
    (127.0.0.2), each sending ``data`` and then holding on."""
    import socket

    held = []
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10,
                                         source_address=("127.0.0.2", 0))
            held.append(s)
            s.sendall(data)
        except OSError:
            continue  # turned away, or the server hung up on it: as it should
    stop.wait()
    for s in held:
        s.close()


def abuse(tmp: Path, idle: float, commands: int = 2000) -> dict[str, object]:
    """The page and MQTT on; every attack of issue 24 at once (see the module notes)."""
    from shuffler.config import MqttConfig
    from shuffler.faces.telemetry import connect_client

    broker = Broker(tmp).start()
    port = free_port()
    config = (f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\ntable = "abuse"\n'
              f"remote_actions = true\n\n[web]\nenabled = true\nport = {port}\n")
    started = time.perf_counter()
    svc = Service(tmp, config, speed=2.0, name="abuse").start()
    out: dict[str, object] = {"startup_s_page_mqtt": round(time.perf_counter() - started, 2)}
    stop = threading.Event()
    try:
        pid = svc.proc.pid
        time.sleep(idle)
        out["rss_mib_idle_page_mqtt"] = round(rss_mib(pid), 1)
        out["threads_idle"] = threads(pid)
        huge = b"GET /api/panel HTTP/1.1\r\nHost: localhost\r\n" + b"".join(
            b"X-%d: %s\r\n" % (i, b"a" * 60000) for i in range(100))
        stream = b"GET /api/events HTTP/1.1\r\nHost: localhost\r\n\r\n"
        attackers = [threading.Thread(target=hold_sockets, args=args, daemon=True)
                     for args in ((port, 8, huge, stop), (port, 300, b"GET / HTTP/1.1\r\n", stop),
                                  (port, 20, stream, stop))]
        replies: set[str] = set()
        sender = connect_client(MqttConfig(host="127.0.0.1", port=broker.port), "bench-flood")
        sender.on_connect = lambda c, u, f, rc, p=None: c.subscribe(
            "shuffler/abuse/command/reply", 1)
        sender.on_message = lambda c, u, m: replies.add(json.loads(m.payload)["request"])
        sender.max_queued_messages_set(0)
        sender.connect("127.0.0.1", broker.port, 30)
        sender.loop_start()
        time.sleep(0.5)
        for a in attackers:
            a.start()
        peak, most = [0.0], [0]

        def sample() -> None:
            while not stop.is_set():
                peak[0], most[0] = max(peak[0], rss_mib(pid)), max(most[0], threads(pid))
                time.sleep(0.1)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for i in range(commands):
            sender.publish("shuffler/abuse/command", json.dumps({"cmd": "clear", "id": str(i)}),
                           qos=1)
        lat = stream_latency(svc, port, 2)
        deadline = time.monotonic() + 60
        while len(replies) < commands and time.monotonic() < deadline:
            time.sleep(0.1)
        out["rss_mib_peak_abuse"] = round(peak[0], 1)
        out["threads_peak_abuse"] = most[0]
        out["page_event_ms_p50_abuse"] = round(1000 * statistics.median(lat), 3)
        out["page_event_ms_max_abuse"] = round(1000 * max(lat), 3)
        out["commands_answered"] = f"{len(replies)}/{commands}"
        stop.set()
        time.sleep(1)
        out["rss_mib_after_abuse"] = round(rss_mib(pid), 1)
        sender.disconnect()
        sender.loop_stop()
        return out
    finally:
        stop.set()
        svc.stop()
        broker.kill()


def view_latency(tmp: Path, tables: int = 50, rounds: int = 20) -> list[float]:
    """Publish-to-view seconds with ``tables`` tables each publishing ``rounds`` states."""
    from shuffler.config import MqttConfig
    from shuffler.faces.telemetry import Telemetry, connect_client

    broker = Broker(tmp).start()
    arrivals: list[float] = []
    try:
        view = connect_client(MqttConfig(host="127.0.0.1", port=broker.port), "bench-view")
        ready = threading.Event()
        view.on_connect = lambda c, u, f, rc, p=None: (c.subscribe("shuffler/+/state", 1),
                                                        ready.set())
        view.on_message = lambda c, u, m: arrivals.append(
            time.time() - json.loads(m.payload)["sent"])
        view.connect_async("127.0.0.1", broker.port)
        view.loop_start()
        ready.wait(10)
        pubs = [Telemetry(MqttConfig(host="127.0.0.1", port=broker.port, table=f"b{i}",
                                     discovery=False)) for i in range(tables)]
        for p in pubs:
            p.start()
        while not all(p.connected.is_set() for p in pubs):
            time.sleep(0.05)
        time.sleep(0.5)
        arrivals.clear()
        for _ in range(rounds):
            for p in pubs:
                p.state({"sent": time.time()})
            time.sleep(0.1)
        deadline = time.monotonic() + 10
        while len(arrivals) < tables * rounds and time.monotonic() < deadline:
            time.sleep(0.05)
        for p in pubs:
            p.close()
        view.loop_stop()
        return list(arrivals)
    finally:
        broker.kill()


def telemetry_rate(tmp: Path, seconds: float = 3.0) -> tuple[float, float, float]:
    """(messages/s delivered from one table, a pass's wall seconds alone, with flooding)."""
    from shuffler.config import Config, MqttConfig
    from shuffler.core.planning import Mode, PackTracker, make_planner, system_random
    from shuffler.device.registry import open_device
    from shuffler.faces.telemetry import Telemetry, connect_client

    broker = Broker(tmp).start()
    try:
        got = [0]
        sub = connect_client(MqttConfig(host="127.0.0.1", port=broker.port), "bench-sub")
        ready = threading.Event()
        sub.on_connect = lambda c, u, f, rc, p=None: (c.subscribe("shuffler/r/pass", 1),
                                                       ready.set())
        sub.on_message = lambda c, u, m: got.__setitem__(0, got[0] + 1)
        sub.connect_async("127.0.0.1", broker.port)
        sub.loop_start()
        ready.wait(10)

        def one_pass() -> float:
            device = open_device("sim", Config(), cards=24)
            planner = make_planner(Mode.PLANNED, 1, system_random())
            plan = planner.plan(0, 24, PackTracker(24, device.info.feed))
            start = time.perf_counter()
            device.run_pass(plan)
            device.close()
            return time.perf_counter() - start

        alone = statistics.median(one_pass() for _ in range(3))
        t = Telemetry(MqttConfig(host="127.0.0.1", port=broker.port, table="r",
                                 discovery=False, queue_limit=100_000))
        t.start()
        t.connected.wait(10)
        stop = threading.Event()

        def flood() -> None:
            while not stop.is_set():
                for _ in range(100):
                    t.publish("pass", {"pass": {"counted": 24}})
                time.sleep(0.001)

        flooder = threading.Thread(target=flood, daemon=True)
        start, before = time.perf_counter(), got[0]
        flooder.start()
        flooded = statistics.median(one_pass() for _ in range(3))
        time.sleep(max(0.0, seconds - (time.perf_counter() - start)))
        rate = (got[0] - before) / (time.perf_counter() - start)
        stop.set()
        t.close()
        sub.loop_stop()
        return rate, alone, flooded
    finally:
        broker.kill()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=5.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-faces-"))
    out: dict[str, object] = {}
    out["rss_mib_page_off"] = round(idle_rss(tmp, "off", "", args.idle), 1)
    port = free_port()
    out["rss_mib_page_on"] = round(idle_rss(tmp, "on", f"[web]\nenabled = true\nport = {port}\n",
                                            args.idle), 1)
    lat = page_latency(tmp)
    out["page_event_ms_p50"] = round(1000 * statistics.median(lat), 3)
    out["page_event_ms_max"] = round(1000 * max(lat), 3)
    if MOSQUITTO:
        (tmp / "rss").mkdir()
        broker = Broker(tmp / "rss").start()
        cfg = f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\ntable = "rss"\n'
        out["rss_mib_mqtt_on"] = round(idle_rss(tmp, "mqtt", cfg, args.idle), 1)
        broker.kill()
        (tmp / "view").mkdir()
        views = view_latency(tmp / "view")
        out["view_ms_p50_50_tables"] = round(1000 * pct(views, 0.5), 2)
        out["view_ms_p99_50_tables"] = round(1000 * pct(views, 0.99), 2)
        out["view_messages"] = len(views)
        (tmp / "rate").mkdir()
        rate, alone, flooded = telemetry_rate(tmp / "rate")
        out["telemetry_msgs_per_s"] = round(rate)
        out["pass_s_alone"] = round(alone, 3)
        out["pass_s_with_flood"] = round(flooded, 3)
        (tmp / "abuse").mkdir()
        out.update(abuse(tmp / "abuse", args.idle))
    else:
        out["mqtt"] = "skipped: needs mosquitto (apt-get install mosquitto)"
    width = max(len(k) for k in out)
    for key, value in out.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
