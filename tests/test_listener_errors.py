"""A service that says why it will not start (issue 45): ``serve`` with the page on and
its port held by a real listening socket exits 2 with one line naming the key, the port
and who holds it, and leaves no socket behind; a network the system refuses (the unit
without network.conf: EAFNOSUPPORT, as the kernel answers a family it refuses) names the
installer. The refusal under real systemd (``RestrictAddressFamilies=AF_UNIX``, no
restart loop): tests/vm/test_vm_walk.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from shuffler.errors import ConfigError
from shuffler.faces.listen import check_network, listener_error

SHUFFLER = str(Path(sys.executable).parent / "shuffler")


def serve(tmp_path: Path, section: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n[service]\n'
                      f'socket = "{tmp_path / "s.sock"}"\n{section}\n')
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    return subprocess.run([SHUFFLER, "--config", str(config), "serve"], capture_output=True,
                          text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)


def test_a_taken_port_names_the_key_the_port_and_the_process_holding_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(tmp_path, f"[web]\nenabled = true\nport = {port}")
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"[web] port = {port} (on 127.0.0.1): the port is taken (Address already in " \
        "use)" in lines[0]  # the kernel's words too, as docs/troubleshooting.md quotes them
    assert f"pid {os.getpid()} (" in lines[0]  # this test's process holds it
    assert "set another [web] port in the config" in lines[0]
    assert not (tmp_path / "s.sock").exists()


def test_a_refused_address_family_names_the_installer():
    with pytest.raises(OSError) as refused:
        socket.socket(socket.AF_IPX, socket.SOCK_STREAM)  # a family this kernel refuses
    error = listener_error(refused.value, "web", "0.0.0.0", 8080)
    assert isinstance(error, ConfigError) and error.exit_code == 2
    text = str(error)
    assert text.startswith("[web] port = 8080 (on 0.0.0.0): the system refuses a network "
                           "socket (Address family not supported by protocol)")
    assert "network.conf" in text and "sudo shuffler-setup install" in text


def test_mqtt_with_the_network_allowed_passes_the_check():
    check_network("mqtt", "127.0.0.1", 1883)  # no connection is made: nothing listens
