"""The dealer page's server: who may read, who may act, and the event stream."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from shuffler.device import Signal, Status
from shuffler.mechanics import Pile
from shuffler.panel import Panel, stack_prompt
from shuffler.schemas import validate
from shuffler.web import WebServer, pairing_code

from .lan import lan_host, needs_netns


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
def served():
    source = Recorder()
    web = WebServer(source, "127.0.0.1", 0, "123456").start()
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


def test_the_pairing_code_is_kept_private_and_stable(tmp_path):
    code, new = pairing_code(tmp_path)
    assert new and len(code) == 6 and code.isdigit()
    assert (tmp_path / "pairing-code").stat().st_mode & 0o777 == 0o600
    assert pairing_code(tmp_path) == (code, False)


LAN_CLIENT = """
import http.client, json, sys
conn = http.client.HTTPConnection({host!r}, {port}, timeout=5)
conn.request({method!r}, {path!r}, body={body!r}, headers={headers!r})
r = conn.getresponse()
print(r.status)
"""


@needs_netns
def test_from_the_lan_reading_is_open_and_acting_needs_the_code():
    source = Recorder()
    with lan_host() as lan:
        web = WebServer(source, lan.here, 0, "424242").start()
        try:
            def from_lan(method, path, body=None, headers=None):
                out = lan.python(LAN_CLIENT.format(host=lan.here, port=web.address[1],
                                                   method=method, path=path, body=body,
                                                   headers=headers or {}))
                assert out.returncode == 0, out.stderr
                return int(out.stdout.strip())

            assert from_lan("GET", "/api/panel") == 200
            json_headers = {"Content-Type": "application/json"}
            assert from_lan("POST", "/api/clear", "{}", json_headers) == 403
            assert from_lan("POST", "/api/clear", "{}",
                            {**json_headers, "X-Pairing-Code": "000000"}) == 403
            assert source.actions == []
            assert from_lan("POST", "/api/clear", "{}",
                            {**json_headers, "X-Pairing-Code": "424242"}) == 200
            assert source.actions == [("clear", {})]
        finally:
            web.close()
