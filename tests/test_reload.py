"""SIGHUP of ``serve`` is the daemon's reload (#33: it used to exit 0, so systemd's
``Restart=on-failure`` left the service down): a config on disk that does not load is
logged and the running one kept; one that loads is applied by starting the same command
again in place (the same pid, ``RELOADING=1`` then ``READY=1`` to systemd), once the
pass that runs has ended. Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from shuffler.service.client import ServiceClient, ServiceUnreachableError
from tests.served import SHUFFLER
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


class Notified:
    """systemd's notify socket, as the service sees it (``NOTIFY_SOCKET``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.05)
        self.heard: list[str] = []

    def said(self, text: str) -> bool:
        try:
            while True:
                self.heard.append(self.sock.recv(4096).decode())
        except (TimeoutError, BlockingIOError):
            pass
        return any(text in m for m in self.heard)


def start(tmp: Path, config: Path, notify: Notified) -> subprocess.Popen:
    env = {**os.environ, "NOTIFY_SOCKET": str(notify.path), "SHUFFLER_CONFIG": ""}
    env.pop("WATCHDOG_USEC", None)
    return subprocess.Popen(
        [SHUFFLER, "--config", str(config), "--state-dir", str(tmp / "state"), "--socket",
         str(tmp / "s.sock"), "--sim-speed", "3", "--log-json", "serve"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(tmp / "service.log", "ab"))


def status(tmp: Path) -> dict | None:
    """The service's status; None while there is none to answer (it is starting again)."""
    client = ServiceClient.connect(tmp / "s.sock")
    if client is None:
        return None
    try:
        return client.request("status")
    except ServiceUnreachableError:
        return None
    finally:
        client.close()


def logged(tmp: Path, text: str) -> bool:
    return any(text in json.loads(line).get("event", "")
               for line in (tmp / "service.log").read_text().splitlines()
               if line.startswith("{"))


def hands_left(tmp: Path) -> int | None:
    now = status(tmp)
    return None if now is None else now["battery"]["hands_left"]


def test_sighup_keeps_the_config_running_when_the_new_one_is_bad_and_applies_a_good_one(
        tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[hand]\npasses = 3\n")
    notify = Notified(tmp_path / "notify")
    proc = start(tmp_path, config, notify)
    try:
        wait_for(lambda: notify.said("READY=1"), what="READY=1")
        battery = wait_for(lambda: status(tmp_path), what="the status")["battery"]
        assert battery["hands_left"] == battery["passes_left"] // 3

        config.write_text("[hand\npasses = 4\n")  # a TOML error
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: logged(tmp_path, "keeping the one running"), what="the refusal")
        assert proc.poll() is None and hands_left(tmp_path) == battery["passes_left"] // 3
        assert "config.toml: not valid TOML" in (tmp_path / "service.log").read_text()  # why

        config.write_text("[hand]\npasses = 4\n")
        before = len(notify.heard)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: hands_left(tmp_path) == battery["passes_left"] // 4,
                 what="the new config applied")
        assert proc.poll() is None  # the same process: systemd sees a reload
        assert notify.said("RELOADING=1")
        assert any("READY=1" in m for m in notify.heard[before:])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in (tmp_path / "service.log").read_text()


def test_sighup_mid_pass_lets_the_pass_finish_then_reloads(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("")
    notify = Notified(tmp_path / "notify")
    proc = start(tmp_path, config, notify)
    results: list[dict] = []
    try:
        wait_for(lambda: notify.said("READY=1"), what="READY=1")
        client = ServiceClient.connect(tmp_path / "s.sock")
        assert client is not None
        cards: list[dict] = []
        runner = threading.Thread(target=lambda: results.append(
            client.request("pass", cards.append, cards=None, mode=None)))
        runner.start()
        wait_for(lambda: len(cards) >= 3, what="the pass to be feeding")
        proc.send_signal(signal.SIGHUP)
        runner.join(30)
        client.close()
        assert results and results[0]["pass"]["counted"] == 24
        assert results[0]["pass"]["fault"] is None  # not stopped: the reload waited
        wait_for(lambda: notify.said("RELOADING=1"), what="the reload")
        wait_for(lambda: status(tmp_path), what="the service back")
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(20)
    assert code == 0 and "Traceback" not in (tmp_path / "service.log").read_text()
