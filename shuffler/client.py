"""Talking to ``shuffler serve`` over its Unix socket (see :mod:`shuffler.service`)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import ShufflerError
from .service import PROTOCOL


class ServiceError(ShufflerError):
    """The service answered with an error; ``exit_code`` is the one it gave."""

    def __init__(self, message: str, exit_code: int, kind: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.kind = kind


class ServiceClient:
    def __init__(self, path: Path, timeout: float = 2.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rwb")
        self.greeting = self._read()
        if self.greeting.get("protocol") != PROTOCOL:
            raise ShufflerError(f"the service at {path} speaks protocol "
                                f"{self.greeting.get('protocol')!r}, this CLI {PROTOCOL}")
        self.sock.settimeout(None)  # a hand takes as long as it takes

    @classmethod
    def connect(cls, path: Path) -> ServiceClient | None:
        """A client if a service answers at ``path``, else None (run in-process)."""
        if not Path(path).exists():
            return None
        try:
            return cls(path)
        except OSError:
            return None

    def _read(self) -> dict[str, Any]:
        line = self.file.readline()
        if not line:
            raise ShufflerError("the service closed the connection")
        return json.loads(line)

    def request(self, cmd: str, on_event: Callable[[dict], None] | None = None,
                **args: Any) -> dict[str, Any]:
        """Send one request, pass progress events on, return the result (or raise)."""
        self.file.write((json.dumps({"cmd": cmd, **args}) + "\n").encode())
        self.file.flush()
        while True:
            msg = self._read()
            if "ok" not in msg:
                if on_event:
                    on_event(msg)
                continue
            if msg["ok"]:
                return msg["result"]
            err = msg["error"]
            raise ServiceError(err["message"], err.get("exit", 1), err.get("kind", "error"))

    def close(self) -> None:
        self.file.close()
        self.sock.close()
