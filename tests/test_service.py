"""The service as an operator sees it: a real process, a real socket, real kills."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shuffler.service.client import ServiceError
from shuffler.store.audit import AuditLog

from .served import Service
from .waiting import wait_for


@pytest.fixture
def served(tmp_path):
    s = Service(tmp_path, speed=12.0).start()
    yield s
    if s.proc and s.proc.poll() is None:
        s.stop(signal.SIGKILL)


@pytest.fixture(scope="module")
def idle(tmp_path_factory):
    """One service for the tests that only ask and are refused: none runs a pass, scores
    or changes its state, so each finds it as it started (no pass counted)."""
    s = Service(tmp_path_factory.mktemp("idle"), speed=12.0).start()
    yield s
    if s.proc and s.proc.poll() is None:
        s.stop(signal.SIGKILL)


def raw(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    sock.makefile("rb").readline()  # the greeting
    return sock


def test_greeting_status_and_socket_mode(idle):
    client = idle.client()
    assert client.greeting["protocol"] == 1 and client.greeting["device"] == "sim"
    status = client.request("status")
    assert status["health"]["ok"] and status["counters"]["passes"] == 0
    assert oct(idle.socket.stat().st_mode & 0o777) == "0o660"


@pytest.mark.slow
def test_killed_mid_pass_then_restarted_loses_nothing(served):
    client = served.client()
    seen: list[dict] = []
    killed = threading.Event()

    def watch(event):
        seen.append(event)
        passes_done = sum(1 for e in seen if e.get("event") == "pass")
        cards = [e for e in seen if e.get("event") == "card"]
        if passes_done == 1 and cards and cards[-1]["counted"] == 10 and not killed.is_set():
            killed.set()
            served.proc.send_signal(signal.SIGKILL)  # in the middle of pass 2

    with pytest.raises(Exception):  # noqa: B017 - the connection dies with the service
        client.request("hand", watch, passes=4)
    served.proc.wait(10)
    assert killed.is_set()

    served.start()
    status = served.client().request("status")
    assert status["counters"]["passes"] == 1 and status["counters"]["interrupted"] == 1
    assert status["hand_in_progress"]["passes_done"] == 1
    audit = list(AuditLog(served.state / "audit.jsonl").read())
    assert [e["pass"] for e in audit] == [1, 2] and audit[1]["interrupted"]
    # cards may be strewn in the machine: nothing runs until the dealer clears
    assert status["fault"]["kind"] == "interrupted" and "back in the tray" in status["fault"][
        "message"]
    with pytest.raises(ServiceError) as refused:
        served.client().request("hand", passes=4)
    assert refused.value.exit_code == 3 and "interrupted" in str(refused.value)
    assert served.client().request("clear")["cleared"]

    events: list[dict] = []
    result = served.client().request("hand", events.append, passes=4)
    assert events[0]["event"] == "resume" and events[0]["at_pass"] == 2
    assert result["hand"]["completed"] and result["hand"]["resumed_at"] == 2
    assert [p["number"] for p in result["hand"]["pass_reports"]] == [2, 3, 4]
    audit = list(AuditLog(served.state / "audit.jsonl").read())
    completed = [e for e in audit if not e.get("interrupted")]
    assert sorted(e["pass"] for e in completed) == [1, 2, 3, 4]
    assert len({e["id"] for e in audit}) == len(audit)  # each pass once
    assert all(e["counted"] == 24 for e in completed)
    assert served.stop() == 0


@pytest.mark.parametrize("payload", [b"this is not json\n", b'{"cmd": "dance"}\n',
                                     b'["status"]\n', b'{"cmd": "pass", "cards": 500}\n'])
def test_a_bad_request_gets_an_error_and_the_connection_stays(idle, payload):
    sock = raw(idle.socket)
    f = sock.makefile("rwb")
    f.write(payload)
    f.flush()
    reply = json.loads(f.readline())
    assert reply["ok"] is False and reply["error"]["kind"] == "bad_request"
    f.write(b'{"cmd": "status"}\n')
    f.flush()
    assert json.loads(f.readline())["ok"] is True


def test_a_huge_line_or_half_a_line_cannot_hurt_the_service(idle):
    sock = raw(idle.socket)
    sock.sendall(b"x" * (70 * 1024) + b"\n")
    reply = json.loads(sock.makefile("rb").readline())
    assert reply["error"]["kind"] == "too_long"
    sock.close()
    half = raw(idle.socket)
    half.sendall(b'{"cmd": "sta')
    half.close()
    assert idle.client().request("status")["health"]["ok"]


def test_one_pass_at_a_time_and_twenty_clients_polling_status(served):
    results: dict[str, object] = {}

    def run_hand():
        results["hand"] = served.client().request("hand", passes=3)

    runner = threading.Thread(target=run_hand)
    runner.start()
    # the hand accepted (its claim is taken just after this log line) however late a loaded
    # machine runs the thread: a fixed sleep alone lost that race beside busy cores
    wait_for(lambda: '"cmd": "hand"' in served.log.read_text(), 60, "the hand's request")
    time.sleep(0.3)
    with pytest.raises(ServiceError) as busy:
        served.client().request("pass")
    assert busy.value.kind == "busy" and busy.value.exit_code == 3

    answered = [0] * 20

    def poll(i):  # at least once each, however late a loaded machine starts the thread
        client = served.client()
        while True:
            assert client.request("status")["device"]["kind"] == "sim"
            answered[i] += 1
            if not runner.is_alive():
                break
        client.close()

    pollers = [threading.Thread(target=poll, args=(i,)) for i in range(20)]
    for t in pollers:
        t.start()
    runner.join(60)
    for t in pollers:
        t.join(10)
    assert all(n > 0 for n in answered)
    assert [p["counted"] for p in results["hand"]["hand"]["pass_reports"]] == [24, 24, 24]


def test_the_cli_uses_the_service_and_prints_the_same(served, tmp_path):
    env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_SOCKET": str(served.socket),
           "SHUFFLER_STATE_DIR": str(tmp_path / "elsewhere")}
    out = subprocess.run([sys.executable, "-m", "shuffler", "--json", "hand", "--passes", "2"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    hand = json.loads(out.stdout)["hand"]
    assert [p["counted"] for p in hand["pass_reports"]] == [24, 24]
    assert not (tmp_path / "elsewhere").exists()  # the service's state, not a local one
    status = subprocess.run([sys.executable, "-m", "shuffler", "status"], capture_output=True,
                            text=True, env=env, timeout=30)
    assert "counters: 1 hand, 2 passes" in status.stdout


@pytest.mark.slow
def test_sigterm_stops_cleanly_and_nothing_anywhere_holds_a_plan(served):
    served.client().request("hand", passes=5)
    assert served.stop() == 0
    assert not served.socket.exists()
    written = served.log.read_text() + "".join(
        p.read_text() for p in served.state.rglob("*") if p.is_file())
    assert "labels" not in written and "codes" not in written
    for line in written.splitlines():
        bits = [t for t in line.replace(",", " ").replace("[", " ").split() if t in "01"]
        assert len(bits) < 24, line


def test_systemd_hears_ready_and_the_watchdog(tmp_path):
    notify = tmp_path / "notify.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify))
    listener.settimeout(10)
    env = {**os.environ, "SHUFFLER_CONFIG": "", "NOTIFY_SOCKET": str(notify),
           "WATCHDOG_USEC": "200000"}
    proc = subprocess.Popen([sys.executable, "-m", "shuffler", "--state-dir", str(tmp_path / "s"),
                             "--socket", str(tmp_path / "c.sock"), "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        messages = set()
        deadline = time.monotonic() + 10
        while not {"READY=1", "WATCHDOG=1"} <= messages and time.monotonic() < deadline:
            messages.update(listener.recv(256).decode().splitlines())
        assert {"READY=1", "WATCHDOG=1"} <= messages
        proc.terminate()
        assert proc.wait(10) == 0
        assert "STOPPING=1" in listener.recv(256).decode()
    finally:
        if proc.poll() is None:
            proc.kill()
        listener.close()


def test_a_socket_that_cannot_be_made_is_a_clear_error(tmp_path):
    bad = tmp_path / "group.toml"
    bad.write_text('[service]\ngroup = "no-such-group-here"\n')
    env = {**os.environ, "SHUFFLER_CONFIG": str(bad)}
    out = subprocess.run([sys.executable, "-m", "shuffler", "--state-dir", str(tmp_path / "s"),
                          "--socket", str(tmp_path / "c.sock"), "serve"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "no group called 'no-such-group-here'" in out.stderr
    assert "Traceback" not in out.stderr


def test_two_clients_scoring_the_same_version_score_the_hand_once(served):
    first, second = served.client(), served.client()
    version = first.request("score")["score"]["version"]
    answers: list = []

    def enter(client):
        try:
            answers.append(client.request("score", makers=0, tricks=5, version=version))
        except ServiceError as e:
            answers.append(e)

    threads = [threading.Thread(target=enter, args=(c,)) for c in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    scored = [a for a in answers if isinstance(a, dict)]
    refused = [a for a in answers if not isinstance(a, dict)]
    assert len(scored) == 1 and scored[0]["score"]["totals"] == [2, 0]
    assert len(refused) == 1 and refused[0].kind in ("stale_score", "busy")
    assert first.request("score")["score"]["totals"] == [2, 0]
    undone = first.request("undo", version=version + 1)
    assert undone["done"].startswith("undid hand 1")
    with pytest.raises(ServiceError, match="version"):
        second.request("undo", version=version + 1)  # the same Undo again undoes nothing
    assert second.request("redo", version=version + 2)["score"]["totals"] == [2, 0]
    first.close()
    second.close()


def test_the_battery_for_another_load_is_worked_out_for_that_load(served):
    """The snapshot holds the configured load's figures; another load is read for it on the
    deciding loop (it was answered with the 24-card figures), and frees the machine after."""
    client = served.client()
    usual, other = client.request("battery"), client.request("battery", cards=52)
    assert (usual["cards"], other["cards"]) == (24, 52)
    assert other["passes_left"] < usual["passes_left"]  # more cards, fewer passes a charge
    assert client.request("battery", cards=24) == usual
    assert client.request("pass")["pass"]["counted"] == 24  # not left busy
