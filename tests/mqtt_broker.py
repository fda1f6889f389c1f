"""A real Mosquitto broker for the tests: on a free loopback port, with a config the
test writes, killed and restarted on the same port when a test asks."""

from __future__ import annotations

import getpass
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

MOSQUITTO = shutil.which("mosquitto") or (
    "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None)
PASSWD = shutil.which("mosquitto_passwd")

needs_mosquitto = pytest.mark.skipif(
    MOSQUITTO is None,
    reason="needs the Mosquitto broker: apt-get install mosquitto (Debian package)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, folder: Path, *, users: dict[str, str] | None = None,
                 acl: str | None = None, persistent: bool = False,
                 queue: int | None = None) -> None:
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        # as root, mosquitto would drop to its own user and lose the test's files
        # a room's broker: sessions on disk, and a deep queue for a slow organiser
        keep = ["persistence true", f"persistence_location {folder}/", "autosave_interval 1",
                "max_queued_messages 1000000"]
        # queue: the messages held per connected client beyond those in flight (Mosquitto's
        # default is 1000; past it the broker drops that client's QoS 1 messages)
        deep = [] if queue is None else [f"max_queued_messages {queue}"]
        lines = [f"listener {self.port} 127.0.0.1",
                 *(keep if persistent else ["persistence false", *deep]),
                 f"user {getpass.getuser()}",
                 "log_dest stderr", "log_type error", "log_type warning", "log_type notice"]
        if users:
            pw = folder / "passwd"
            pw.write_text("".join(f"{u}:{p}\n" for u, p in users.items()))
            pw.chmod(0o600)
            subprocess.run([PASSWD or "mosquitto_passwd", "-U", str(pw)], check=True)
            lines += ["allow_anonymous false", f"password_file {pw}"]
        else:
            lines.append("allow_anonymous true")
        if acl is not None:
            (folder / "acl").write_text(acl)
            lines.append(f"acl_file {folder / 'acl'}")
        self.conf = folder / "mosquitto.conf"
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self) -> Broker:
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)],
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(self.folder / "broker.log", "ab"))  # noqa: SIM115
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError((self.folder / "broker.log").read_text()) from None
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start")

    def kill(self) -> None:
        """SIGKILL: what the broker held only in memory is gone."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def terminate(self) -> None:
        """SIGTERM: the broker closes its clients and saves its sessions first."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(20)
            self.proc = None

    def log(self) -> str:
        return (self.folder / "broker.log").read_text()
