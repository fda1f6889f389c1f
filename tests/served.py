"""``shuffler serve`` as a real process on the simulator, with a config the test writes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from shuffler.service.client import ServiceClient

from .cli import SHUFFLER


class Service:
    def __init__(self, folder: Path, config: str = "", *, speed: float = 4.0,
                 faults: tuple[str, ...] = (), name: str = "svc") -> None:
        self.folder = folder / name
        self.folder.mkdir(parents=True, exist_ok=True)
        self.socket = self.folder / "shuffler.sock"
        self.state = self.folder / "state"
        self.config = self.folder / "config.toml"
        self.config.write_text(config)
        self.args = ["--sim-speed", str(speed), *(f"--sim-fault={f}" for f in faults)]
        self.proc: subprocess.Popen | None = None
        self.log = self.folder / "service.log"

    def start(self, timeout: float = 30) -> Service:
        env = {**os.environ, "SHUFFLER_CONFIG": str(self.config)}
        env.pop("NOTIFY_SOCKET", None)
        self.proc = subprocess.Popen(
            [SHUFFLER, "--config", str(self.config), "--state-dir", str(self.state),
             "--socket", str(self.socket), "-v", "--log-json", *self.args, "serve"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.log, "ab"))  # noqa: SIM115
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"service exited: {self.log.read_text()}")
            if (client := ServiceClient.connect(self.socket)) is not None:
                client.close()
                return self
            time.sleep(0.05)
        raise AssertionError("service did not start")

    def client(self) -> ServiceClient:
        client = ServiceClient.connect(self.socket)
        assert client is not None
        return client

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(20)
