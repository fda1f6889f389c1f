"""A serve that fails at start leaves no socket behind, and the message for a socket
nobody answers on tells a start that never finished from an earlier run (issue 35)."""

from __future__ import annotations

import json
import os
import socket
import subprocess

import pytest
from click.testing import CliRunner

from shuffler.service.listening import READY_MODE, STARTING_MODE, Listener
from shuffler_cli.main import cli
from tests.served import SHUFFLER


def status(sock) -> dict:
    result = CliRunner().invoke(cli, ["--socket", str(sock), "--json", "status"],
                                env={"SHUFFLER_CONFIG": None}, catch_exceptions=False)
    assert result.exit_code == 3, result.output
    return json.loads(result.stdout)["error"]


def test_a_serve_whose_group_is_no_group_exits_2_and_leaves_no_socket(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[service]\ngroup = "no-such-group-here"\n')
    sock = tmp_path / "s.sock"
    proc = subprocess.run([SHUFFLER, "--config", str(config), "--state-dir",
                           str(tmp_path / "state"), "--socket", str(sock), "serve"],
                          capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert "[service] group: no group called 'no-such-group-here'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not os.path.lexists(sock)  # the next command is not told of "an earlier run"
    error = status(sock)
    assert error["kind"] == "service_not_running" and "earlier run" not in error["message"]
    assert "no such socket" in error["message"]


def test_a_bind_that_fails_half_way_removes_what_it_made(tmp_path):
    sock = tmp_path / "s.sock"
    listener = Listener(sock, lambda *a: None, group="no-such-group-here", backlog=4,
                        first_timeout=1.0)
    with pytest.raises(ValueError, match="no group called"):
        listener.start()
    assert not os.path.lexists(sock) and listener.server is None


def left(sock, mode: int) -> None:
    """A socket nobody listens on any more, with ``mode``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(sock))
    s.close()
    os.chmod(sock, mode)


def test_a_socket_left_by_a_start_that_never_finished_says_so(tmp_path):
    left(tmp_path / "s.sock", STARTING_MODE)
    error = status(tmp_path / "s.sock")
    assert error["kind"] == "service_not_running"
    assert "a start that never finished" in error["message"]
    assert "earlier run" not in error["message"]


def test_a_socket_left_by_a_service_that_ran_says_an_earlier_run(tmp_path):
    left(tmp_path / "s.sock", READY_MODE)
    error = status(tmp_path / "s.sock")
    assert error["kind"] == "service_not_running" and "earlier run" in error["message"]
    assert "never finished" not in error["message"]


def test_a_listener_is_starting_until_ready(tmp_path):
    sock = tmp_path / "s.sock"
    listener = Listener(sock, lambda r, w, s: w.write(b"hi\n"), group=None, backlog=4,
                        first_timeout=5.0)
    listener.start()
    try:
        assert sock.stat().st_mode & 0o777 == STARTING_MODE
        listener.ready()
        assert sock.stat().st_mode & 0o777 == READY_MODE
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(5)
            c.connect(str(sock))
            assert c.recv(3) == b"hi\n"
    finally:
        listener.close()
    assert not os.path.lexists(sock)
