"""Talking to ``shuffler serve`` over its Unix socket (see :mod:`shuffler.service`).

No socket file: no service, the CLI may drive the device itself (under the machine's
lock). A socket file that cannot be used is never a reason to open the device: the
client says why (not running, not answering, permission denied) and the CLI exits 3.
"""

from __future__ import annotations

import errno
import grp
import json
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import DeviceError, ShufflerError

#: the socket protocol this client speaks (shuffler.service.PROTOCOL; a test keeps them equal)
PROTOCOL = 1
CONNECT_TIMEOUT = 2.0
#: the schema of a request's result, where it is not the command's own name
RESULT_SCHEMAS = {"undo": "score", "new_game": "score"}
NO_SERVICE_HINT = "or pass --no-service to drive the device from this command"


class ServiceError(ShufflerError):
    """The service answered with an error; ``exit_code`` is the one it gave."""

    def __init__(self, message: str, exit_code: int, kind: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.kind = kind


class ServiceUnreachableError(DeviceError):
    """A socket is there but no service can be asked through it (exit 3)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def schemas_checked() -> bool:
    return os.environ.get("SHUFFLER_CHECK_SCHEMAS", "") not in ("", "0")


def _group_hint(path: Path) -> str:
    try:
        gid = path.stat().st_gid
        name = grp.getgrgid(gid).gr_name
    except (OSError, KeyError):
        return "ask who runs the service for access"
    return (f"join the group {name!r} (sudo usermod -aG {name} $USER, then log in again)")


class ServiceClient:
    def __init__(self, path: Path, timeout: float = CONNECT_TIMEOUT) -> None:
        self.path = Path(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
            self.file = self.sock.makefile("rwb")
            self.greeting = self._read()
        except BaseException:
            self.sock.close()
            raise
        if self.greeting.get("protocol") != PROTOCOL:
            self.close()
            raise ServiceUnreachableError(
                f"the service at {path} speaks protocol {self.greeting.get('protocol')!r}, "
                f"this CLI {PROTOCOL}: update one of them", "service_protocol")
        self.sock.settimeout(None)  # a hand takes as long as it takes

    @classmethod
    def connect(cls, path: Path, timeout: float = CONNECT_TIMEOUT) -> ServiceClient | None:
        """A client if a service answers at ``path``, else None (for waiting on one)."""
        try:
            return cls.reach(path, timeout)
        except ServiceUnreachableError:
            return None

    @classmethod
    def reach(cls, path: Path, timeout: float = CONNECT_TIMEOUT) -> ServiceClient | None:
        """A client if a service answers at ``path``; None if there is no socket there.
        Raises :class:`ServiceUnreachableError` saying why if one is there but unusable."""
        path = Path(path)
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ServiceUnreachableError(
                f"{path}: cannot look at the service's socket: {e.strerror or e}",
                "service_permission") from None
        if not stat.S_ISSOCK(mode):
            raise ServiceUnreachableError(
                f"{path} is not a socket, so no service can be asked there: name the "
                f"service's socket with --socket, {NO_SERVICE_HINT}", "service_not_running")
        try:
            return cls(path, timeout)
        except PermissionError:
            raise ServiceUnreachableError(
                f"{path}: permission denied: the service runs, but this user may not talk "
                f"to it: {_group_hint(path)}", "service_permission") from None
        except (ConnectionRefusedError, FileNotFoundError):
            raise ServiceUnreachableError(
                f"{path}: the service is not running (the socket is left from an earlier "
                f"run): start it (sudo systemctl start shuffler), {NO_SERVICE_HINT}",
                "service_not_running") from None
        except (TimeoutError, ShufflerError, ValueError) as e:
            if isinstance(e, TimeoutError):
                why = f"did not answer within {timeout:g} s"
            else:
                why = f"answered badly ({e})"
            raise ServiceUnreachableError(
                f"{path}: the service {why}: check it (systemctl status shuffler), "
                f"{NO_SERVICE_HINT}", "service_not_answering") from None
        except OSError as e:
            if e.errno == errno.EAGAIN:  # the listen queue is full: it runs, but is swamped
                raise ServiceUnreachableError(
                    f"{path}: the service is too busy to take a connection; try again",
                    "service_not_answering") from None
            raise ServiceUnreachableError(f"{path}: cannot reach the service: "
                                          f"{e.strerror or e}", "service_not_answering") from None

    def _read(self) -> dict[str, Any]:
        line = self.file.readline()
        if not line:
            raise ShufflerError("the service closed the connection")
        msg = json.loads(line)
        if not isinstance(msg, dict):
            raise ValueError("not a JSON object")
        if schemas_checked():
            from .schemas import check

            name = "reply" if "ok" in msg else "event" if "event" in msg else "greeting"
            check(msg, name)
        return msg

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
                if schemas_checked():
                    from .schemas import check

                    check(msg["result"], RESULT_SCHEMAS.get(cmd, cmd))
                return msg["result"]
            err = msg["error"]
            raise ServiceError(err["message"], err.get("exit", 1), err.get("kind", "error"))

    def close(self) -> None:
        try:
            self.file.close()
        finally:
            self.sock.close()

