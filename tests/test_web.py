"""The dealer page's server: who may read, who may act, and the event stream."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest

from shuffler.control.prompts import stack_prompt
from shuffler.core.mechanics import Pile
from shuffler.device.contract import Signal, Status
from shuffler.faces.pairing import Pairing
from shuffler.faces.panel import Panel
from shuffler.faces.tables import TableBook, board
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

    def tournament(self):
        return board(TableBook(), 0)

    def act(self, action, body):
        self.actions.append((action, body))
        return {"ok": True, "result": {"done": action}}

    def serve(self, folder, **options):
        return WebServer(self.board, self.act, self.tournament, "127.0.0.1", 0, folder,
                         **options).start()


@pytest.fixture
def served(tmp_path):
    source = Recorder()
    web = source.serve(tmp_path)
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
    web = Recorder().serve(tmp_path, hosts=("shuffler.club.lan",))
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
    monkeypatch.setattr("shuffler.faces.web_limits.REQUEST_S", 1.0)
    took, _ = drip(web, b"GET /api/panel HTTP/1.1\r\n", 80)
    assert took < 6  # cut off after about 1 s; left alone it would run 8 s


def drip(web, start: bytes, count: int) -> tuple[float, bytes]:
    """Send ``start`` and then a byte every 0.1 s (every wait short, the request not) until
    the server hangs up or ``count`` are sent: (seconds from the first byte, its answer)."""
    answer = b""
    with socket.create_connection(web.address, timeout=10) as s:
        sent = time.monotonic()
        s.sendall(start)
        for _ in range(count):
            try:
                s.sendall(b" ")
            except OSError:
                break
            time.sleep(0.1)
            s.setblocking(False)
            try:
                chunk = s.recv(4096)
                answer += chunk
                if chunk == b"":
                    break
            except BlockingIOError:
                pass
            finally:
                s.setblocking(True)
        return time.monotonic() - sent, answer


def wait_for(test, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not test() and time.monotonic() < deadline:
        time.sleep(0.01)
    return test()


def hung_up(s: socket.socket, seconds: float = 2.0) -> bool:
    """Whether the server closed ``s`` within ``seconds`` (it sent nothing)."""
    s.settimeout(seconds)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_a_client_past_its_share_of_waiting_connections_is_turned_away(served,
                                                                        monkeypatch):
    _, web = served
    monkeypatch.setattr(web.httpd.gate, "waiting_per_client", 3)
    held = [socket.create_connection(web.address, timeout=5) for _ in range(3)]
    try:
        assert wait_for(lambda: len(web.httpd.gate.conns) == 3)
        assert raw_exchange(web, b"GET /api/panel HTTP/1.1\r\nHost: localhost\r\n\r\n") \
            .startswith(b"HTTP/1.1 503")
        assert not hung_up(held[0], 0.3)  # it made no room for itself
    finally:
        for s in held:
            s.close()
    assert wait_for(lambda: len(web.httpd.gate.conns) == 0)
    assert request(web, "GET", "/api/panel")[0] == 200


def test_only_connections_all_being_answered_turn_a_client_away(served, monkeypatch):
    _, web = served
    monkeypatch.setattr(web.httpd.gate, "per_client", 3)
    streams = [open_stream(web) for _ in range(3)]  # being answered: never closed for room
    try:
        assert raw_exchange(web, b"GET /api/panel HTTP/1.1\r\nHost: localhost\r\n\r\n") \
            .startswith(b"HTTP/1.1 503")
    finally:
        for conn, _ in streams:
            conn.close()
        for _, closed in list(web.streams.open):
            closed.set()
    assert wait_for(lambda: len(web.httpd.gate.conns) == 0)
    assert request(web, "GET", "/api/panel")[0] == 200


def test_a_silent_connection_is_closed_after_its_idle_time(served, monkeypatch):
    _, web = served
    monkeypatch.setattr("shuffler.faces.web_limits.IDLE_S", 0.5)
    with socket.create_connection(web.address, timeout=5) as s:
        sent = time.monotonic()
        assert hung_up(s, 3.0) and time.monotonic() - sent < 2
    assert wait_for(lambda: len(web.httpd.gate.conns) == 0)


def test_past_the_total_the_greediest_address_makes_room(monkeypatch):
    from shuffler.faces.web_limits import Connections

    gate = Connections(total=4, per_client=3, waiting_per_client=3)
    a = [gate.enter("10.0.0.1") for _ in range(3)]
    b = gate.enter("10.0.0.2")
    assert all(a) and b and len(gate.conns) == 4
    assert gate.enter("10.0.0.1") is None  # past its own share
    fresh = gate.enter("10.0.0.9")
    assert fresh is not None and a[0].closed and not b.closed  # the one holding most gives
    assert gate.enter("10.0.0.2") is not None and a[1].closed
    # now .1 holds 1, .9 holds 1, .2 holds 2: another from .9 takes .2's oldest
    b2 = gate.conns[-1]
    assert gate.enter("10.0.0.9") is not None and b.closed and not b2.closed
    # .9 holds 2, the others 1: a third from .9 has no one greedier to take from
    assert gate.enter("10.0.0.9") is None
    for c in gate.conns:
        gate.busy(c)
    assert gate.enter("10.0.0.8") is None  # all being answered: none to close
    gate.leave(b2)
    assert gate.enter("10.0.0.8") is not None


def test_an_address_cut_for_room_before_it_asked_anything_takes_no_ones_room_a_while():
    """Fifty addresses that reconnect the moment they are cut kept the server making room
    for one another, a thread each time, while a phone's connection waited behind them
    (4.4 s): one cut for room before it asked anything is turned away while the server is
    full, for SUSPECT_S; a fresh address is still let in, and one that had asked is not
    a suspect."""
    from shuffler.faces import web_limits
    from shuffler.faces.web_limits import Connections

    now = [0.0]
    gate = Connections(total=4, per_client=3, waiting_per_client=3, clock=lambda: now[0])
    held = [gate.enter(f"10.0.0.{i}") for i in range(1, 5)]
    assert all(held)
    assert gate.enter("10.0.0.5") is not None and held[0].closed  # .1 makes room
    assert gate.enter("10.0.0.1") is None  # .1, cut a moment ago, takes no one's
    assert not any(c.closed for c in held[1:])
    phone = gate.enter("10.0.0.9")  # a fresh address is let in as before
    assert phone is not None and held[1].closed
    gate.busy(phone)
    gate.busy(phone, False)  # it asked, was answered, and waits again
    now[0] = web_limits.SUSPECT_S - 0.01
    assert gate.enter("10.0.0.1") is None and gate.enter("10.0.0.2") is None
    now[0] = web_limits.SUSPECT_S + 0.01  # .1's time is up: it may take room again
    assert gate.enter("10.0.0.1") is not None
    # the phone's connection, cut for room after it had asked: the phone is no suspect
    one = Connections(total=1, per_client=1, waiting_per_client=1, clock=lambda: now[0])
    phone = one.enter("10.0.0.9")
    one.busy(phone)
    one.busy(phone, False)
    other = one.enter("10.0.0.7")
    assert other is not None and phone.closed
    assert one.enter("10.0.0.9") is not None and other.closed  # .7 had asked nothing
    assert one.enter("10.0.0.7") is None


def test_the_suspects_kept_are_bounded():
    from shuffler.faces import web_limits
    from shuffler.faces.web_limits import Connections

    gate = Connections(total=1, per_client=1, waiting_per_client=1, clock=lambda: 0.0)
    for i in range(web_limits.SUSPECTS_KEPT + 500):
        assert gate.enter(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}") is not None
    assert len(gate.suspects) == web_limits.SUSPECTS_KEPT


def test_a_phone_whose_last_connection_is_not_yet_counted_out_is_let_in():
    """Fifty addresses hold one connection each, the phone's just-ended one among them
    (closed by the phone, its thread not yet awake): its next one is let in in its place,
    never 503; one the phone still holds open is not taken."""
    from shuffler.faces.web_limits import Connections

    gate = Connections(total=4, per_client=3, waiting_per_client=3)
    held = [gate.enter(f"10.0.0.{i}") for i in range(1, 4)]
    ours, theirs = socket.socketpair()
    try:
        phone = gate.enter("10.0.0.50", ours)
        assert all(held) and phone
        assert gate.enter("10.0.0.50") is None  # its one is open: it waits its turn
        theirs.close()  # the phone's request is over
        assert gate.enter("10.0.0.50") is not None and phone.closed
        assert not any(c.closed for c in held)
    finally:
        ours.close()
        theirs.close()


def test_a_slow_body_is_cut_off_within_the_requests_time(served, monkeypatch):
    source, web = served
    monkeypatch.setattr("shuffler.faces.web_limits.BODY_S", 1.0)
    took, answer = drip(web, b"POST /api/pair HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                        b"application/json\r\nContent-Length: 100\r\n\r\n{", 60)
    assert took < 3, took  # cut off after about 1 s; left alone it would run 6 s
    assert answer.startswith(b"HTTP/1.0 408") and b"too_slow" in answer
    assert source.actions == []


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
        assert len(web.streams.open) == STREAMS_PER_CLIENT
        for _, r in streams[:2]:  # the two oldest end (the page would reconnect)
            r.fp.readline()
            assert r.fp.readline() == b""
    finally:
        for conn, _ in streams:
            conn.close()


def test_pairing_through_the_page_gives_a_token_and_wrong_codes_are_throttled(served):
    _, web = served
    code = Pairing(web.pairing.files.folder).current_or_new().code
    wrong = "000000" if code != "000000" else "111111"
    json_headers = {"Content-Type": "application/json"}
    answers = [request(web, "POST", "/api/pair", json.dumps({"code": wrong}), json_headers)
               for _ in range(4)]
    assert [a[0] for a in answers] == [403, 403, 403, 429]
    assert answers[3][1]["error"]["kind"] == "throttled"
    status, reply = request(web, "POST", "/api/pair", json.dumps({"code": code}), json_headers)
    assert status == 429  # even the right code waits its turn
    web.pairing.throttle.clients.clear()
    status, reply = request(web, "POST", "/api/pair", json.dumps({"code": code}), json_headers)
    assert status == 200 and web.pairing.files.known(reply["result"]["token"])
    assert request(web, "POST", "/api/pair", json.dumps({"code": 123456}), json_headers)[0] \
        == 400


def test_a_flood_of_wrong_codes_is_logged_once_not_once_a_refusal(served):
    _, web = served
    said = []
    web.pairing._throttled.logger = type("Log", (), {
        "warning": staticmethod(lambda what, **fields: said.append((what, fields)))})()
    code = Pairing(web.pairing.files.folder).current_or_new().code
    wrong = json.dumps({"code": "000000" if code != "000000" else "111111"})
    statuses = [request(web, "POST", "/api/pair", wrong, {"Content-Type": "application/json"})[0]
                for _ in range(8)]
    assert statuses == [403] * 3 + [429] * 5
    assert [(what, fields["client"], fields["count"]) for what, fields in said] == [
        ("pairing attempts throttled", "127.0.0.1", 1)]


def pair(web, body):
    return request(web, "POST", "/api/pair", json.dumps(body),
                   {"Content-Type": "application/json"})


def test_no_pairing_by_touch_while_a_hand_is_dealt(served):
    source, web = served
    source.board.pass_started(2, 5)  # a touch now starts the hand's next pass
    status, reply = pair(web, {"touch": True})
    assert status == 409 and reply["error"]["kind"] == "pairing_busy"
    assert reply["error"]["exit"] == 2 and not web.touched()  # nobody was let ask


def test_a_touch_while_another_address_asks_pairs_neither_and_says_why(served):
    _, web = served
    rid = pair(web, {"touch": True})[1]["result"]["request"]
    web.pairing.ask("10.0.0.66", "a guesser", False, web.clock())
    assert web.touched()  # taken for pairing: no pass starts
    status, reply = pair(web, {"request": rid})
    assert status == 409 and reply["error"]["kind"] == "pairing_ambiguous"
    assert web.pairing.files.phones() == []


def test_another_addresss_request_id_pairs_nothing(served):
    _, web = served
    theirs = web.pairing.ask("10.0.0.66", "phone", False, web.clock())[1]["result"]["request"]
    assert web.touched()  # confirmed for 10.0.0.66 alone
    status, reply = pair(web, {"request": theirs})  # replayed from loopback
    assert status == 410 and reply["error"]["kind"] == "pairing_expired"
    assert web.pairing.files.phones() == []


def test_unusable_pairing_files_are_a_503_that_names_them_never_a_traceback(tmp_path):
    blocked = tmp_path / "state"
    blocked.write_text("a file where the folder should be")
    web = Recorder().serve(blocked)
    try:
        status, reply = pair(web, {"code": "123456"})
        assert status == 503 and reply["error"]["kind"] == "file_access"
        assert "pairing files" in reply["error"]["message"]
        rid = pair(web, {"touch": True})[1]["result"]["request"]
        assert web.touched()
        assert pair(web, {"request": rid})[1]["error"]["kind"] == "file_access"
    finally:
        web.close()
