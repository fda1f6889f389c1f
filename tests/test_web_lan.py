"""The dealer's page attacked from another host on the LAN (a network namespace), with
the real service: pairing, rebinding, starved streams, memory and threads."""

from __future__ import annotations

import http.client
import json
import subprocess
import time
from pathlib import Path

import pytest

from .lan import lan_host, needs_netns, popen
from .mqtt_broker import free_port
from .served import SHUFFLER, Service

pytestmark = [pytest.mark.slow, needs_netns]

POST = """
import http.client, json, sys
out = []
for body, headers in {calls!r}:
    conn = http.client.HTTPConnection({host!r}, {port}, timeout=10)
    conn.request("POST", {path!r}, body=body, headers=headers)
    r = conn.getresponse()
    out.append([r.status, r.getheader("Retry-After"), json.loads(r.read() or b"null")])
    conn.close()
print(json.dumps(out))
"""

HOLD = """
import socket, sys, time
held = []
data = {data}
for i in range({count}):
    s = socket.create_connection(({host!r}, {port}), timeout=10)
    try:
        s.sendall(data)
    except OSError:  # the server hung up: it would not read that much
        pass
    held.append(s)
print("held", flush=True)
time.sleep({hold})
"""


def proc_status(pid: int, key: str) -> int:
    """A number from /proc/PID/status (VmRSS in KiB, Threads)."""
    text = Path(f"/proc/{pid}/status").read_text()
    return int(text.split(f"\n{key}:", 1)[1].split()[0])


def rss_kb(pid: int) -> int:
    return proc_status(pid, "VmRSS")


def threads(pid: int) -> int:
    return proc_status(pid, "Threads")


def lan_service(tmp_path):
    port = free_port()
    return Service(tmp_path, f"[web]\nenabled = true\nlan = true\nport = {port}\n",
                   name="lan").start(), port


def cli(svc, *args):
    out = subprocess.run([SHUFFLER, "--state-dir", str(svc.state), "--json", "pair", *args],
                         capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def test_pairing_from_the_lan_new_codes_revocation_and_guessing(tmp_path):
    svc, port = lan_service(tmp_path)
    try:
        with lan_host() as lan:
            def post(path, *calls):
                out = lan.python(POST.format(host=lan.here, port=port, path=path,
                                             calls=list(calls)), timeout=60)
                assert out.returncode == 0, out.stderr
                return json.loads(out.stdout)

            json_h = {"Content-Type": "application/json"}
            old = cli(svc)["pairing_code"]
            new = cli(svc, "--new")["pairing_code"]
            [old_try, new_try] = post("/api/pair", (json.dumps({"code": old}), json_h),
                                      (json.dumps({"code": new}), json_h))
            assert old_try[0] == (403 if old != new else 200) and new_try[0] == 200
            token = new_try[2]["result"]["token"]
            paired = {**json_h, "X-Pairing-Token": token}
            [again] = post("/api/pair", (json.dumps({"code": new}), json_h))
            assert again[0] == 403  # the code is spent
            [acted] = post("/api/clear", ("{}", paired))
            assert acted[0] in (200, 409) and acted[2]["error" if acted[0] == 409 else
                                                      "result"] is not None
            phones = cli(svc, "--list")["phones"]
            assert [p["address"] for p in phones] == [lan.there]
            cli(svc, "--revoke", phones[0]["id"])
            [refused] = post("/api/clear", ("{}", paired))
            assert refused[0] == 403  # at once, with the service running

            wrong = json.dumps({"code": "000000" if new != "000000" else "111111"})
            answers = post("/api/pair", *[(wrong, json_h)] * 6)
            # the spent code was the first wrong one: two more are judged, then it waits
            assert [a[0] for a in answers] == [403, 403, 429, 429, 429, 429]
            assert answers[1][1] == "5" and 1 <= int(answers[2][1]) <= 5
            [rebound] = post("/api/clear", ("{}", {**paired, "Host": "evil.example",
                                                   "Origin": "http://evil.example"}))
            assert rebound[0] == 421
            read = lan.python(f"import http.client\nc = http.client.HTTPConnection("
                              f"{lan.here!r}, {port}, timeout=10)\nc.request('GET', "
                              f"'/api/panel')\nprint(c.getresponse().status)")
            assert read.stdout.strip() == "200"  # reading needs no pairing
        log = svc.log.read_text()
        assert new not in log and old not in log and token not in log
        assert log.count("pairing attempts throttled") == 1
    finally:
        svc.stop()


@pytest.fixture
def lan_served(tmp_path):
    svc, port = lan_service(tmp_path)
    try:
        with lan_host() as lan:
            yield svc, port, lan
    finally:
        svc.stop()


def test_twenty_streams_from_one_host_leave_room_for_the_dealers_page(lan_served):
    _, port, lan = lan_served
    hog = popen(lan, HOLD.format(host=lan.here, port=port, count=20, hold=30,
                                 data=repr(b"GET /api/events HTTP/1.1\r\nHost: "
                                           + lan.here.encode() + b"\r\n\r\n")))
    try:
        assert hog.stdout.readline().strip() == "held"
        time.sleep(1.5)  # the hog's streams all open (or turned away)
        sent = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/events")
        r = conn.getresponse()
        assert r.status == 200 and r.fp.readline().startswith(b"data: ")
        assert time.monotonic() - sent < 10
        conn.close()
    finally:
        hog.kill()
        hog.wait()


def test_huge_headers_and_slow_sockets_leave_memory_and_threads_flat(lan_served):
    svc, port, lan = lan_served
    pid = svc.proc.pid
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/api/panel")
    assert conn.getresponse().status == 200
    conn.close()
    time.sleep(0.5)
    before, before_threads = rss_kb(pid), threads(pid)
    huge = (f"b'GET /api/panel HTTP/1.1\\r\\nHost: {lan.here}\\r\\n' + "
            "b''.join(b'X-%d: %s\\r\\n' % (i, b'a' * 60000) for i in range(100))")
    attack = popen(lan, HOLD.format(host=lan.here, port=port, count=8, hold=3,
                                    data=huge))
    attack.communicate(timeout=60)
    slow = popen(lan, HOLD.format(host=lan.here, port=port, count=300, hold=5,
                                  data=repr(b"GET / HTTP/1.1\r\n")))
    assert slow.stdout.readline().strip() == "held"
    time.sleep(1)
    most_threads = threads(pid)
    slow.kill()
    slow.wait()
    time.sleep(1)
    after = rss_kb(pid)
    assert after - before < 10 * 1024, (before, after)
    assert most_threads - before_threads <= 50, (before_threads, most_threads)



#: POST /api/pair bodies, each from the address named beside it: [status, reply] each
PAIRS = """
import http.client, json
out = []
for src, body in {calls!r}:
    c = http.client.HTTPConnection({host!r}, {port}, timeout=10, source_address=(src, 0))
    c.request("POST", "/api/pair", body=json.dumps(body),
              headers={{"Content-Type": "application/json"}})
    r = c.getresponse()
    out.append([src, r.status, json.loads(r.read() or b"null")])
    c.close()
print(json.dumps(out))
"""


def test_guessing_from_the_lan_neither_pairs_nor_keeps_the_dealers_phone_out(tmp_path):
    """Ten addresses guess codes (far past the table's ten a minute) and ask to pair by
    touch with nobody touching; the dealer's phone, on an address of its own, pairs with
    the code `shuffler pair --new` made at the machine, at once."""
    svc, port = lan_service(tmp_path)
    try:
        with lan_host(addresses=11) as lan:
            def pairs(calls):
                out = lan.python(PAIRS.format(host=lan.here, port=port, calls=calls),
                                 timeout=120)
                assert out.returncode == 0, out.stderr
                return json.loads(out.stdout)

            guessers, dealer = lan.others[:10], lan.others[10]
            asks = pairs([(g, {"touch": True}) for g in guessers])
            assert {a[1] for a in asks} == {202}
            code = cli(svc, "--new")["pairing_code"]
            wrong = [f"{n:06d}" for n in range(200) if f"{n:06d}" != code]
            guesses = pairs([(guessers[i % 10], {"code": wrong[i]}) for i in range(60)])
            assert {g[1] for g in guesses} <= {403, 429}
            assert sum(g[1] == 403 for g in guesses) <= 10 + 10  # each one's first, then 10
            polled = pairs([(g, {"request": a[2]["result"]["request"]})
                            for g, a in zip(guessers, asks, strict=True)])
            assert {p[1] for p in polled} == {202}  # asking still: no touch, no token
            [mine] = pairs([(dealer, {"code": code})])
            assert mine[1] == 200, mine  # judged at once, whatever the guessers sent
            phones = cli(svc, "--list")["phones"]
            assert [p["address"] for p in phones] == [dealer]
    finally:
        svc.stop()
