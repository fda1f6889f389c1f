"""The dealer page's server: who may read, who may act, and the event stream."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest

from shuffler.control.panel import Panel, stack_prompt
from shuffler.core.mechanics import Pile
from shuffler.device.contract import Signal, Status
from shuffler.faces.pairing import Pairing
from shuffler.faces.web import WebServer
from shuffler.schemas import validate


class Recorder:
    """A panel source that records the actions it is asked for."""

    def __init__(self) -> None:
        self.board = Panel(5)
        self.actions: list[tuple[str, dict]] = []

    def panel(self):
        return self.board.snapshot()

    def wait_panel(self, version, timeout):
        return self.board.wait(version, timeout)

    def tables(self):
        return []

    def act(self, action, body):
        self.actions.append((action, body))
        return {"ok": True, "result": {"done": action}}


@pytest.fixture
def served(tmp_path):
    source = Recorder()
    web = WebServer(source, "127.0.0.1", 0, tmp_path).start()
    yield source, web
    web.close()


def request(web, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(*web.address, timeout=5)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, (json.loads(data) if r.getheader("Content-Type") == "application/json"
                      else data)


def test_the_page_and_the_panel_are_readable_on_loopback(served):
    _, web = served
    status, page = request(web, "GET", "/")
    assert status == 200 and b"<title>Shuffler</title>" in page
    status, panel = request(web, "GET", "/api/panel")
    assert status == 200 and panel["phase"] == "ready"
    validate(panel, "panel")
    assert panel["prompt"] == "Load the pack and touch to start pass 1 of 5"


def test_a_json_action_from_the_page_runs(served):
    source, web = served
    status, reply = request(web, "POST", "/api/clear", b"{}",
                            {"Content-Type": "application/json",
                             "Origin": f"http://{web.address[0]}:{web.address[1]}"})
    assert status == 200 and reply["ok"]
    assert source.actions == [("clear", {})]


@pytest.mark.parametrize("headers, body, status_expected, kind", [
    ({"Content-Type": "application/x-www-form-urlencoded"}, b"a=1", 403, "forbidden"),
    ({"Content-Type": "text/plain"}, b"{}", 403, "forbidden"),
    ({"Content-Type": "application/json", "Origin": "http://evil.example"}, b"{}", 403,
     "forbidden"),
    ({"Content-Type": "application/json"}, b"[1]", 400, "bad_request"),
    ({"Content-Type": "application/json"}, b"{" * 3000 + b"}" * 3000, 413, "too_long"),
    ({"Content-Type": "application/json"}, b"\xff\xfe", 400, "bad_request"),
])
def test_forms_other_origins_and_bad_bodies_are_refused(served, headers, body,
                                                        status_expected, kind):
    source, web = served
    status, reply = request(web, "POST", "/api/new_game", body, headers)
    assert status == status_expected and reply["error"]["kind"] == kind
    assert source.actions == []


def test_unknown_paths_and_actions_are_404(served):
    _, web = served
    assert request(web, "GET", "/etc/passwd")[0] == 404
    assert request(web, "POST", "/api/shutdown", b"{}",
                   {"Content-Type": "application/json"})[0] == 404


def test_the_stream_shows_a_change_within_200_ms(served):
    source, web = served
    conn = http.client.HTTPConnection(*web.address, timeout=5)
    conn.request("GET", "/api/events")
    r = conn.getresponse()
    assert r.getheader("Content-Type") == "text/event-stream"
    first = r.fp.readline()
    assert first.startswith(b"data: ")
    r.fp.readline()
    sent = time.monotonic()
    source.board.signal(Status(Signal.STACK, on_top=Pile.LEFT, next_pass=2, of=5))
    line = r.fp.readline()
    took = time.monotonic() - sent
    panel = json.loads(line.removeprefix(b"data: "))
    validate(panel, "panel")
    assert panel["prompt"] == stack_prompt(Pile.LEFT) == "Put the LEFT pile on top, then touch"
    assert took < 0.2
    conn.close()


def raw_exchange(web, data: bytes, timeout=5.0) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it."""
    with socket.create_connection(web.address, timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


@pytest.mark.parametrize("host, origin", [
    ("evil.example", "http://evil.example"),  # a rebinding site: both headers its own
    ("evil.example:{port}", None),
    ("127.0.0.1.evil.example", None),
    ("10.9.9.9", None),  # an address that is not the one this connection reached
    ("", None),
])
def test_a_request_naming_another_host_is_refused_even_from_loopback(served, host, origin):
    source, web = served
    headers = {"Host": host.format(port=web.address[1]), "Content-Type": "application/json"}
    if origin:
        headers["Origin"] = origin
    conn = http.client.HTTPConnection(*web.address, timeout=5)
    conn.putrequest("POST", "/api/clear", skip_host=True)
    for k, v in headers.items():
        conn.putheader(k, v)
    conn.putheader("Content-Length", "2")
    conn.endheaders(b"{}")
    r = conn.getresponse()
    assert r.status == 421 and json.loads(r.read())["error"]["kind"] == "wrong_host"
    conn.close()
    assert source.actions == []
    assert request(web, "GET", "/api/panel", headers={"Host": "evil.example"})[0] == 421


@pytest.mark.parametrize("host", ["localhost:{port}", "LOCALHOST", "127.0.0.1:{port}",
                                  "{name}", "{name}.local:{port}"])
def test_the_machines_own_names_are_let_in(served, host):
    _, web = served
    name = socket.gethostname().lower()
    host = host.format(port=web.address[1], name=name)
    assert request(web, "GET", "/api/panel", headers={"Host": host})[0] == 200


def test_a_configured_name_is_let_in(tmp_path):
    web = WebServer(Recorder(), "127.0.0.1", 0, tmp_path, hosts=("shuffler.club.lan",)).start()
    try:
        assert request(web, "GET", "/api/panel", headers={"Host": "shuffler.club.lan"})[0] \
            == 200
        assert request(web, "GET", "/api/panel", headers={"Host": "other.club.lan"})[0] == 421
    finally:
        web.close()


def test_a_cross_site_fetch_is_refused(served):
    source, web = served
    status, _ = request(web, "POST", "/api/clear", b"{}",
                        {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"})
    assert status == 403 and source.actions == []


def test_a_head_over_8_kib_is_refused_and_a_slow_one_cut_off(served, monkeypatch):
    _, web = served
    big = b"GET /api/panel HTTP/1.1\r\nHost: localhost\r\n" + \
        b"".join(b"X-%d: %s\r\n" % (i, b"a" * 1000) for i in range(9)) + b"\r\n"
    assert raw_exchange(web, big).startswith(b"HTTP/1.0 431")
    assert raw_exchange(web, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n").startswith(
        b"HTTP/1.0 414")
    monkeypatch.setattr("shuffler.faces.web_limits.HEAD_TIMEOUT_S", 1.0)
    with socket.create_connection(web.address, timeout=10) as s:
        sent = time.monotonic()
        s.sendall(b"GET /api/panel HTTP/1.1\r\n")
        for _ in range(80):  # a byte every 0.1 s: every wait is short, the head is not
            try:
                s.sendall(b"X")
            except OSError:
                break
            time.sleep(0.1)
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    break
            except BlockingIOError:
                pass
            finally:
                s.setblocking(True)
        took = time.monotonic() - sent
    assert took < 6  # cut off after about 1 s; left alone it would run 8 s


def test_connections_past_a_clients_share_are_turned_away_at_once(served, monkeypatch):
    _, web = served
    monkeypatch.setattr(web.httpd.gate, "per_client", 3)
    held = [socket.create_connection(web.address, timeout=5) for _ in range(3)]
    try:
        deadline = time.monotonic() + 5
        while sum(web.httpd.gate.open.values()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert raw_exchange(web, b"GET /api/panel HTTP/1.1\r\nHost: localhost\r\n\r\n") \
            .startswith(b"HTTP/1.1 503")
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 5
    while web.httpd.gate.open and time.monotonic() < deadline:
        time.sleep(0.01)
    assert request(web, "GET", "/api/panel")[0] == 200


def open_stream(web):
    conn = http.client.HTTPConnection(*web.address, timeout=5)
    conn.request("GET", "/api/events")
    r = conn.getresponse()
    assert r.status == 200 and r.fp.readline().startswith(b"data: ")
    return conn, r


def test_a_clients_oldest_stream_is_closed_when_it_opens_one_too_many(served):
    _, web = served
    from shuffler.faces.web import STREAMS_PER_CLIENT

    streams = [open_stream(web) for _ in range(STREAMS_PER_CLIENT + 2)]
    try:
        assert web.streams.count() == STREAMS_PER_CLIENT
        for _, r in streams[:2]:  # the two oldest end (the page would reconnect)
            r.fp.readline()
            assert r.fp.readline() == b""
    finally:
        for conn, _ in streams:
            conn.close()


def test_pairing_through_the_page_gives_a_token_and_wrong_codes_are_throttled(served):
    _, web = served
    code = Pairing(web.pairing.folder).current_or_new().code
    wrong = "000000" if code != "000000" else "111111"
    json_headers = {"Content-Type": "application/json"}
    answers = [request(web, "POST", "/api/pair", json.dumps({"code": wrong}), json_headers)
               for _ in range(4)]
    assert [a[0] for a in answers] == [403, 403, 403, 429]
    assert answers[3][1]["error"]["kind"] == "throttled"
    status, reply = request(web, "POST", "/api/pair", json.dumps({"code": code}), json_headers)
    assert status == 429  # even the right code waits its turn
    web.throttle.clients.clear()
    status, reply = request(web, "POST", "/api/pair", json.dumps({"code": code}), json_headers)
    assert status == 200 and web.pairing.known(reply["result"]["token"])
    assert request(web, "POST", "/api/pair", json.dumps({"code": 123456}), json_headers)[0] \
        == 400
