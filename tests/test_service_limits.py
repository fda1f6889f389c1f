"""The control socket's limits (#17): idle clients, bursts, deep or huge requests, a second
service, a socket path that is not a socket."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from hardware_sim import SimDevice
from shuffler.device.clock import VirtualClock
from shuffler.service.loop import Service
from tests.test_watchdog import serve, sim


@pytest.fixture
def running(tmp_path, monkeypatch):
    """A service in this process (its loop on a thread), on a real socket."""
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    started: list[tuple[Service, threading.Thread]] = []

    def start(**options) -> Service:
        service = serve(tmp_path / f"s{len(started)}", sim(SimDevice, VirtualClock()),
                        VirtualClock(), **options)
        loop = threading.Thread(target=service.run, daemon=True)
        loop.start()
        deadline = time.monotonic() + 20
        while service.listener.server is None:
            assert time.monotonic() < deadline and loop.is_alive(), "the service did not start"
            time.sleep(0.01)
        started.append((service, loop))
        return service

    yield start
    for service, loop in started:
        service.stopping.set()
        loop.join(10)


def connect(service: Service) -> tuple[socket.socket, dict]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(service.socket_path))
    return sock, json.loads(sock.makefile("rb").readline())


def ask(sock: socket.socket, line: bytes) -> dict:
    sock.sendall(line)
    return json.loads(sock.makefile("rb").readline())


def test_idle_connections_time_out_and_free_their_places(running):
    service = running(max_clients=3, idle_seconds=0.5)
    idle = [connect(service) for _ in range(3)]
    assert all("protocol" in greeting for _, greeting in idle)
    for sock, _ in idle:  # each is told why, then closed
        assert json.loads(sock.makefile("rb").readline())["error"]["kind"] == "idle"
        assert sock.recv(1) == b""
    sock, greeting = connect(service)
    assert "protocol" in greeting
    assert ask(sock, b'{"cmd": "status"}\n')["ok"]


def test_at_the_limit_the_oldest_idle_connection_makes_room(running):
    service = running(max_clients=3)
    idle = [connect(service) for _ in range(3)]
    newcomer, greeting = connect(service)
    assert "protocol" in greeting  # let in: the oldest idle one was closed for it
    told = json.loads(idle[0][0].makefile("rb").readline())
    assert told["error"]["kind"] == "idle" and "make room" in told["error"]["message"]
    assert ask(newcomer, b'{"cmd": "status"}\n')["ok"]
    assert ask(idle[2][0], b'{"cmd": "status"}\n')["ok"]  # the younger ones stay


def test_forty_idle_connections_do_not_stop_status(running, tmp_path):
    """The issue's flood: 40 idle connections against max_clients 32; the dealer's
    ``shuffler status`` still answers, promptly."""
    service = running()
    flood = []
    for _ in range(40):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(service.socket_path))
        flood.append(sock)
    try:
        start = time.monotonic()
        proc = cli(tmp_path, "--socket", str(service.socket_path), "--json", "status")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "fault" in json.loads(out) and time.monotonic() - start < 30
    finally:
        for sock in flood:
            sock.close()


def test_a_newcomer_is_refused_only_when_every_place_is_busy_answering():
    from shuffler.service.connections import Places

    places = Places(2)
    a, b = socket.socketpair()
    first, second = places.admit(a), places.admit(b)
    assert first is not None and second is not None
    places.busy(first, True)
    places.busy(second, True)
    assert places.admit(a) is None and places.evicted == 0
    places.busy(second, False)
    places.leave(second)  # what its thread does once its read ends
    assert places.admit(b) is not None
    a.close()
    b.close()



def test_the_newcomer_refused_hears_why_in_the_errors_shape_and_is_closed():
    """What the refused newcomer reads: one error line (too_many_clients, exit 3, the limit
    named), no greeting, then the end of the connection; the busy place is kept."""
    from shuffler.service.connections import Conversation, Places

    places = Places(1)
    busy, _ = socket.socketpair()
    place = places.admit(busy)
    assert place is not None
    places.busy(place, True)
    talk = Conversation(places, 1.0, lambda: {"greeting": True},
                        lambda req, send: pytest.fail("nothing is asked"), threading.Event())
    ours, theirs = socket.socketpair()
    talk(ours.makefile("rb"), ours.makefile("wb"), ours)
    ours.close()
    lines = theirs.makefile("rb").read().splitlines()
    assert [json.loads(line) for line in lines] == [{"ok": False, "error": {
        "kind": "too_many_clients", "exit": 3,
        "message": "too many clients: all 1 places are busy answering; try again"}}]
    assert places.admit(busy) is None  # the busy one still holds its place
    for end in (busy, theirs):
        end.close()


@pytest.mark.parametrize("burst", [32, 4 * 32])
def test_a_burst_of_every_client_at_once_waits_in_the_backlog(tmp_path, burst):
    """Every client at once, and four times as many: a busy host accepts slowly, and a
    Unix socket refuses what its backlog has no room for (the 33rd was refused)."""
    service = serve(tmp_path, sim(SimDevice, VirtualClock()), VirtualClock(), max_clients=32)
    service.listener.bind()  # listening, but nobody accepts yet: every connection must queue
    socks = []
    try:
        for _ in range(burst):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            socks.append(sock)
            assert sock.connect_ex(str(service.socket_path)) == 0, f"refused at {len(socks)}"
    finally:
        for sock in socks:
            sock.close()
        assert service.listener.server is not None
        service.listener.server.server_close()


@pytest.mark.parametrize("line", [b"[" * 50_000 + b"\n",
                                  b'{"cmd": "status", "x": [[[[[[[[1]]]]]]]]}\n'])
def test_deep_nesting_is_a_clear_error_and_no_traceback(running, capfd, line):
    service = running()
    sock, _ = connect(service)
    reply = ask(sock, line)
    assert reply["ok"] is False and reply["error"]["kind"] == "too_deep"
    assert "nested deeper" in reply["error"]["message"]
    assert ask(sock, b'{"cmd": "status"}\n')["ok"]  # the connection goes on
    assert "Traceback" not in capfd.readouterr().err


def cli(tmp_path, *args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "SHUFFLER_CONFIG": ""}
    env.pop("NOTIFY_SOCKET", None)
    return subprocess.Popen([sys.executable, "-m", "shuffler", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def finish(proc: subprocess.Popen) -> str:
    """Its stderr once it exits; killed if it does not (a service that wrongly started)."""
    try:
        return proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_regular_file_at_the_socket_path_is_refused_and_kept(tmp_path):
    precious = tmp_path / "notes.txt"
    precious.write_text("the dealer's notes\n")
    proc = cli(tmp_path, "--state-dir", str(tmp_path / "s"), "--socket", str(precious), "serve")
    err = finish(proc)
    assert proc.returncode == 2 and "is not a socket" in err and "Traceback" not in err
    assert precious.read_text() == "the dealer's notes\n"


def test_a_stale_socket_is_replaced(tmp_path):
    path = tmp_path / "s.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: what a crash leaves
    proc = cli(tmp_path, "--state-dir", str(tmp_path / "s"), "--socket", str(path), "serve")
    try:
        deadline = time.monotonic() + 30
        while True:
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(path))
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
                time.sleep(0.05)
            finally:
                probe.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_a_second_service_on_the_same_socket_says_one_is_running(tmp_path, running):
    first = running()
    proc = cli(tmp_path, "--state-dir", str(tmp_path / "other"), "--socket",
               str(first.socket_path), "serve")
    err = finish(proc)
    assert proc.returncode == 2 and "already running" in err and "Traceback" not in err
    assert connect(first)[1]["protocol"] == 1  # the first one is untouched


def test_a_number_of_thousands_of_digits_is_named_as_such():
    from shuffler.service.protocol import parse_request
    from shuffler.service.request import RequestError

    with pytest.raises(RequestError, match="thousands of digits") as info:
        parse_request(b'{"cmd": "pass", "cards": ' + b"9" * 5000 + b"}\n")
    assert info.value.kind == "bad_request"


def test_a_service_restarted_mid_hand_tells_the_client_and_latches(tmp_path):
    """systemctl restart in the middle of a hand: the CLI says the service stopped
    (exit 3), and the restarted service refuses the next pass until clear."""
    import signal as signals

    from tests.served import Service as Served

    served = Served(tmp_path, speed=8.0).start()
    try:
        proc = cli(tmp_path, "--socket", str(served.socket), "--json", "hand")
        deadline = time.monotonic() + 30
        while not (served.state / "state.json").exists() or json.loads(
                (served.state / "state.json").read_text()).get("in_flight") is None:
            assert time.monotonic() < deadline, "the hand never started"
            time.sleep(0.01)
        assert served.stop(signals.SIGTERM) == 0
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 3, err
        error = json.loads(out)["error"]
        assert error["kind"] == "service_stopped", error
        assert "the middle of the hand" in error["message"] and "Traceback" not in err
        served.start()
        status = served.client().request("status")
        assert status["fault"]["kind"] == "interrupted"
    finally:
        if served.proc and served.proc.poll() is None:
            served.stop(signals.SIGKILL)


def test_closing_a_client_the_service_hung_up_on_is_no_error(tmp_path):
    """The service greets and hangs up (a reload, a crash): the request fails clearly,
    and closing the client afterwards raises nothing (its unsent line was flushed into
    the closed socket: BrokenPipeError out of ``close``, under a `finally`)."""
    from shuffler import __version__
    from shuffler.constants import PROTOCOL, SCHEMA
    from shuffler.service.client import ServiceClient, ServiceUnreachableError

    GREETING = {"shuffler": __version__, "protocol": PROTOCOL, "schema": SCHEMA,
                "device": "sim"}
    path = tmp_path / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    hung_up = threading.Event()

    def greet_and_hang_up():
        conn, _ = listener.accept()
        conn.sendall(json.dumps(GREETING).encode() + b"\n")
        conn.close()
        hung_up.set()

    threading.Thread(target=greet_and_hang_up, daemon=True).start()
    try:
        client = ServiceClient(path)
        assert hung_up.wait(5)
        with pytest.raises(ServiceUnreachableError):
            client.request("status")
        client.close()
    finally:
        listener.close()
