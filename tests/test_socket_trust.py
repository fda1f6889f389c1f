"""The control socket is trusted only if its owner is (#22): the default path is never a
bare name in /tmp, a socket another user made is refused naming the owner, and every
answer is checked before use (an odd one is exit 3, never a traceback)."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from shuffler.config import default_socket_path
from shuffler.service import client as client_mod
from shuffler_cli.main import cli

GREETING = b'{"shuffler": "0", "protocol": 1, "schema": 1, "device": "sim"}\n'


def invoke(tmp_path: Path, sock: Path, *args: str):
    env = {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_CONFIG": "",
           "SHUFFLER_SOCKET": str(sock), "SHUFFLER_CHECK_SCHEMAS": ""}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_without_a_runtime_folder_the_socket_lives_in_the_private_state_folder(monkeypatch,
                                                                              tmp_path):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_socket_path() == tmp_path / "shuffler" / "shuffler.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert default_socket_path() == tmp_path / "run" / "shuffler.sock"


def test_a_socket_of_an_untrusted_owner_is_refused_naming_it(tmp_path):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))
        s.listen(1)
        with pytest.raises(client_mod.ServiceUnreachableError) as info:
            client_mod.ServiceClient.reach(path, trusted=frozenset({os.getuid() + 4242}))
    assert info.value.kind == "service_untrusted" and info.value.exit_code == 3
    assert f"uid {os.getuid()}" in str(info.value) and "not trusting it" in str(info.value)


def test_the_service_account_named_in_the_config_is_trusted(monkeypatch):
    import pwd

    me = pwd.getpwuid(os.getuid()).pw_name
    assert client_mod.trusted_uids(me) == {0, os.getuid()}
    assert 4242 in client_mod.trusted_uids("4242")
    assert client_mod.trusted_uids("no-such-account-here") == {0, os.getuid()}


def squat(path: Path, uid: int, gid: int) -> int:
    """A process of ``uid`` listening on ``path`` and answering every request as a
    service would: the pid (forked: another account cannot run this interpreter)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the squatter
        try:
            os.setgid(gid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(path))
            s.listen(8)
            os.write(ready_w, b"r")
            while True:
                c, _ = s.accept()
                c.sendall(GREETING)
                c.recv(1000)
                c.sendall(b'{"ok": true, "result": {"fault": null, "squatted": true}}\n')
                c.close()
        finally:
            os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"r", "the squatter did not start"
    os.close(ready_r)
    return pid


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a squatter as another user")
def test_root_refuses_a_socket_squatted_by_another_user(tmp_path):
    import pwd
    import shutil
    import signal
    import tempfile

    nobody = pwd.getpwnam("nobody")
    folder = Path(tempfile.mkdtemp(prefix="squat-"))
    folder.chmod(0o777)  # a folder anyone can write to, as /tmp
    path = folder / "shuffler.sock"
    pid = squat(path, nobody.pw_uid, nobody.pw_gid)
    try:
        assert path.stat().st_uid == nobody.pw_uid
        result = invoke(tmp_path, path, "--json", "status")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        shutil.rmtree(folder)
    assert result.exit_code == 3, result.output
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "service_untrusted" and "'nobody'" in error["message"]
    assert "squatted" not in result.stdout


@pytest.fixture
def fake_service(tmp_path):
    """A socket that greets, then answers the first request with the given bytes."""
    threads = []

    def start(answer: bytes, events: bytes = b"") -> Path:
        path = tmp_path / f"fake{len(threads)}.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(1)

        def serve() -> None:
            conn, _ = server.accept()
            with conn, server:
                conn.sendall(GREETING)
                conn.makefile("rb").readline()
                conn.sendall(events + answer)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        threads.append(thread)
        return path
    yield start
    for thread in threads:
        thread.join(5)


@pytest.mark.parametrize("answer", [b"", b"null\n", b"[1]\n", b'{"ok": true}\n',
                                    b'{"ok": true, "result": 3}\n', b'{"ok": "yes"}\n',
                                    b'{"ok": false, "error": {"exit": "x"}}\n',
                                    b'{"ok": false, "error": {"message": "m", "exit": 99}}\n',
                                    b'{"ok": true, "res', b"\xff\xfe\n", b"[" * 50_000 + b"\n"])
def test_an_odd_answer_is_exit_3_never_a_traceback(fake_service, tmp_path, answer):
    result = invoke(tmp_path, fake_service(answer), "--json", "status")
    assert result.exit_code == 3, result.output
    error = json.loads(result.stdout)["error"]
    assert error["kind"] in ("service_bad_answer", "service_not_answering"), error
    assert "Traceback" not in result.output


def test_a_service_that_stops_mid_hand_says_so_exit_3(fake_service, tmp_path):
    event = b'{"event": "pass_start", "number": 1, "of": 5}\n'
    result = invoke(tmp_path, fake_service(b"", events=event), "--json", "hand")
    assert result.exit_code == 3, result.output
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "service_stopped"
    assert "stopped in the middle of the hand" in error["message"]
    assert "interrupted" in error["message"]



def _other_group() -> tuple[int, str]:
    import grp

    return next((g.gr_gid, g.gr_name) for g in grp.getgrall() if g.gr_gid not in (0, 4322))


def as_another_user(body) -> tuple[int, str]:
    """``body()`` (exit code, stdout) in a child forked as uid 4321 outside every group
    (forked: another account cannot run this interpreter, so what the CLI imports is
    imported first)."""
    import grp  # noqa: F401
    import struct  # noqa: F401

    import shuffler.control.reports  # noqa: F401
    import shuffler_cli.commands  # noqa: F401

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(4322)
            os.setuid(4321)
            code, out = body()
            os.write(write, json.dumps([code, out]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        got = answer.read()
    os.waitpid(pid, 0)
    assert got, "the child said nothing"
    code, out = json.loads(got)
    return code, out


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can run a command as another user")
@pytest.mark.parametrize("named", [True, False], ids=["socket", "deployed"])
def test_a_user_outside_the_group_is_told_to_join_it_not_that_nothing_runs(named):
    """The deploy page's last step, ``shuffler status`` by a user not yet in the
    ``shuffler`` group: /run/shuffler is 0750, so the socket cannot even be seen. That is
    exit 3 naming the folder and the group to join, never "not running: start it"."""
    import shutil
    import tempfile

    gid, group = _other_group()
    root = Path(tempfile.mkdtemp(prefix="shuffler-perm-"))  # /tmp: another user can enter
    try:
        root.chmod(0o755)
        run = root / "run" / "shuffler"
        run.mkdir(parents=True)
        (root / "etc" / "shuffler").mkdir(parents=True)
        (root / "etc" / "shuffler" / "config.toml").write_text("")
        os.chmod(root / "etc" / "shuffler" / "config.toml", 0o644)
        for folder in (root / "run", root / "etc", root / "etc" / "shuffler"):
            folder.chmod(0o755)
        os.chown(run, 0, gid)
        run.chmod(0o750)
        env = {"HOME": str(root), "SHUFFLER_SYSTEM_ROOT": str(root), "SHUFFLER_CONFIG": None,
               "SHUFFLER_STATE_DIR": str(root / "st"), "SHUFFLER_CHECK_SCHEMAS": "",
               "SHUFFLER_SOCKET": str(run / "shuffler.sock") if named else None}

        def status() -> tuple[int, str]:
            result = CliRunner().invoke(cli, ["--json", "status"], env=env)
            return result.exit_code, result.stdout

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(run / "shuffler.sock"))  # a service is there
            code, out = as_another_user(status)
    finally:
        shutil.rmtree(root)
    assert code == 3, out
    error = json.loads(out)["error"]
    assert error["kind"] == "service_permission", error
    assert f"may not enter {run}" in error["message"] and repr(group) in error["message"]
    assert "not running" not in error["message"]


def test_one_look_tells_nothing_there_from_a_file_that_is_no_socket(tmp_path):
    """What is at the socket's path is looked at once: nothing there (or a file where a
    folder should be) is no service (None); a plain file is never asked
    (service_not_running, exit 3, saying so)."""
    assert client_mod.ServiceClient.reach(tmp_path / "none.sock") is None
    plain = tmp_path / "plain"
    plain.write_text("not a socket")
    assert client_mod.ServiceClient.reach(plain / "under.sock") is None
    with pytest.raises(client_mod.ServiceUnreachableError) as caught:
        client_mod.ServiceClient.reach(plain)
    assert (caught.value.kind, caught.value.exit_code) == ("service_not_running", 3)
    assert f"{plain} is not a socket" in str(caught.value)
