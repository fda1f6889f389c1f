"""Talking to ``shuffler serve`` over its Unix socket (see :mod:`shuffler.service.loop`).

No socket file: no service, the CLI may drive the device itself (under the machine's
lock). A socket file that cannot be used is never a reason to open the device: the
client says why (not running, not answering, permission denied) and the CLI exits 3.

A socket is trusted only if its owner is: the process listening on it (``SO_PEERCRED``)
and the socket file must belong to root, to the user running the CLI, or to the
service's account (``[service] user``). Anything else is refused (exit 3, the owner
named): a local user who created the socket first must not speak for the machine.
Every line the service sends is checked before use; an odd one is exit 3, never a
traceback.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import json
import os
import pwd
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shuffler.constants import PROTOCOL
from shuffler.errors import BadInputError, DeviceError, ShufflerError
from shuffler.service.machine import COMMANDS
from shuffler.service.trust import peer_uid
from shuffler.service.trust import trusted_uids as trusted_uids  # the CLI's name for it

CONNECT_TIMEOUT = 2.0
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


class SimBesideServiceError(BadInputError):
    """A simulator's option (``--sim-fault``...) given to a command that would ask a
    service: it could never reach the service's machine (exit 2, a usage error)."""

    kind = "usage"


def _check_schema(msg: dict[str, Any], name: str) -> None:
    """shuffler.schemas' check, imported only when ``SHUFFLER_CHECK_SCHEMAS`` asks for it
    (it loads jsonschema: never for the quick status)."""
    if os.environ.get("SHUFFLER_CHECK_SCHEMAS", "") not in ("", "0"):
        from shuffler.schemas import validate

        validate(msg, name)


class ServiceStoppedError(DeviceError):
    """The service went away in the middle of a request that moves the machine (exit 3):
    the pass in flight left a latched ``interrupted`` fault."""

    kind = "service_stopped"


def owner_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def check_owner(path: Path, uid: int, trusted: frozenset[int], what: str) -> None:
    """Refuse a socket whose ``what`` (file, listener) belongs to an untrusted ``uid``."""
    if uid in trusted:
        return
    names = ", ".join(owner_name(u) for u in sorted(trusted))
    raise ServiceUnreachableError(
        f"{path}: the socket's {what} belongs to {owner_name(uid)}, not to {names}: not "
        "trusting it (anyone can create a socket there first). Remove it, name the "
        "service's socket with --socket, or set [service] user to the service's account",
        "service_untrusted")


class BadAnswerError(ShufflerError, ValueError):
    """A line from the service that is not what the protocol says."""


class ServiceClosedError(ShufflerError):
    """The connection ended (or failed) before the answer came."""


#: the longest line a client reads from the service
MAX_ANSWER = 4 << 20


def _check_shape(msg: dict[str, Any]) -> None:
    """An answer ``{"ok": true, "result": {...}}`` or ``{"ok": false, "error": {...}}``
    with a message and an exit code from 1 to 4; events and the greeting pass."""
    if "ok" not in msg:
        return
    ok = msg["ok"]
    if ok is True:
        if not isinstance(msg.get("result"), dict):
            raise BadAnswerError("an answer without a result object")
        return
    err = msg.get("error")
    if ok is not False or not isinstance(err, dict):
        raise BadAnswerError("an answer that is neither a result nor an error")
    code = err.get("exit", 1)
    if (not isinstance(err.get("message"), str) or type(code) is not int
            or not 1 <= code <= 4 or not isinstance(err.get("kind", "error"), str)):
        raise BadAnswerError("an error answer without a message or an exit code of 1 to 4")


def _group_hint(path: Path) -> str:
    try:
        gid = path.stat().st_gid
        name = grp.getgrgid(gid).gr_name
    except (OSError, KeyError):
        return "ask who runs the service for access"
    return (f"join the group {name!r} (sudo usermod -aG {name} $USER, then log in again)")


def _denied_folder(path: Path) -> Path:
    """The first folder on the way to ``path`` that this user may not enter."""
    for folder in reversed(Path(os.path.abspath(path)).parents):  # from / down
        if not os.access(folder, os.X_OK):
            return folder
    return path.parent


def left_by(mode: int) -> str:
    """What left a socket nobody answers on: a start that never finished (its owner's
    execute bit, shuffler.service.listening's notes) or a service that ran."""
    if mode & stat.S_IXUSR:
        return ("the socket is left by a start that never finished: the service was "
                "killed or crashed while starting; `journalctl -u shuffler` says why")
    return ("the socket is left from an earlier run that was killed or crashed; "
            "`journalctl -u shuffler` says why it stopped")


def socket_there(path: Path) -> os.stat_result | None:
    """What is at ``path`` (a socket or not: :meth:`ServiceClient.reach` looks closer),
    None if nothing. A folder on the way that this user may not enter is never "no
    service": it is :class:`ServiceUnreachableError` naming the folder and the group to
    join (the deployed /run/shuffler is 0750, for the ``shuffler`` group)."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        folder = _denied_folder(Path(path))
        raise ServiceUnreachableError(
            f"{path}: permission denied: this user may not enter {folder}, the service's "
            f"socket's folder, so cannot ask the service (nor tell whether it runs): "
            f"{_group_hint(folder)}", "service_permission") from None
    except OSError as e:
        raise ServiceUnreachableError(
            f"{path}: cannot look at the service's socket: {e.strerror or e}",
            "service_permission") from None


class ServiceClient:
    def __init__(self, path: Path, timeout: float = CONNECT_TIMEOUT,
                 trusted: frozenset[int] | None = None) -> None:
        self.path = Path(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
            peer = peer_uid(self.sock)
            if trusted is not None and peer is not None:
                check_owner(self.path, peer, trusted, "listening process")
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
    def connect(cls, path: Path, timeout: float = CONNECT_TIMEOUT,
                trusted: frozenset[int] | None = None) -> ServiceClient | None:
        """A client if a service answers at ``path``, else None (for waiting on one)."""
        try:
            return cls.reach(path, timeout, trusted)
        except ServiceUnreachableError:
            return None

    @classmethod
    def reach(cls, path: Path, timeout: float = CONNECT_TIMEOUT,
              trusted: frozenset[int] | None = None) -> ServiceClient | None:
        """A client if a service answers at ``path``; None if there is no socket there.
        Raises :class:`ServiceUnreachableError` saying why if one is there but unusable,
        or if the socket or its listener belongs to a uid outside ``trusted`` (default:
        root and this user)."""
        path = Path(path)
        trusted = trusted_uids() if trusted is None else trusted
        if (st := socket_there(path)) is None:
            return None
        if not stat.S_ISSOCK(st.st_mode):
            raise ServiceUnreachableError(
                f"{path} is not a socket, so no service can be asked there: name the "
                f"service's socket with --socket, {NO_SERVICE_HINT}", "service_not_running")
        check_owner(path, st.st_uid, trusted, "file")
        try:
            return cls(path, timeout, trusted)
        except ServiceUnreachableError:
            raise
        except PermissionError:
            raise ServiceUnreachableError(
                f"{path}: permission denied: the service runs, but this user may not talk "
                f"to it: {_group_hint(path)}", "service_permission") from None
        except (ConnectionRefusedError, FileNotFoundError):
            raise ServiceUnreachableError(
                f"{path}: the service is not running ({left_by(st.st_mode)}): start it (sudo "
                f"systemctl start shuffler), {NO_SERVICE_HINT}", "service_not_running"
            ) from None
        except (TimeoutError, ShufflerError, ValueError) as e:
            why = (f"did not answer within {timeout:g} s" if isinstance(e, TimeoutError)
                   else f"answered badly ({e})")
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
        try:
            line = self.file.readline(MAX_ANSWER)
        except TimeoutError:
            raise
        except OSError as e:
            raise ServiceClosedError(f"the connection failed: {e.strerror or e}") from None
        if not line:
            raise ServiceClosedError("the service closed the connection")
        if not line.endswith(b"\n"):
            raise BadAnswerError("an answer cut short or longer than "
                                 f"{MAX_ANSWER} bytes")
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            raise BadAnswerError("an answer that is not JSON") from None
        if not isinstance(msg, dict):
            raise BadAnswerError("an answer that is not a JSON object")
        _check_shape(msg)
        _check_schema(msg, "reply" if "ok" in msg else "event" if "event" in msg else "greeting")
        return msg

    def request(self, cmd: str, on_event: Callable[[dict], None] | None = None,
                **args: Any) -> dict[str, Any]:
        """Send one request, pass progress events on, return the result (or raise).

        A service that goes away before it answers is :class:`ServiceStoppedError` for
        a request that moves the machine, :class:`ServiceUnreachableError` otherwise;
        an answer that is not what the protocol says is ``service_bad_answer`` (both
        exit 3)."""
        try:
            self.file.write((json.dumps({"cmd": cmd, **args}) + "\n").encode())
            self.file.flush()
            while True:
                msg = self._read()
                if "ok" in msg:
                    break
                if on_event:
                    on_event(msg)
        except ServiceClosedError as e:
            if cmd in COMMANDS and COMMANDS[cmd].machine:
                raise ServiceStoppedError(
                    f"{self.path}: the service stopped in the middle of the {cmd} ({e}); "
                    "the machine's state is unknown: if the pass was running a latched "
                    "`interrupted` fault holds it: put every card back in the tray, then "
                    "run `shuffler status` and `shuffler clear`") from None
            raise ServiceUnreachableError(f"{self.path}: {e} before answering {cmd}",
                                          "service_not_answering") from None
        except OSError as e:
            raise ServiceUnreachableError(f"{self.path}: cannot talk to the service: "
                                          f"{e.strerror or e}", "service_not_answering") from None
        except BadAnswerError as e:
            raise ServiceUnreachableError(f"{self.path}: the service answered badly ({e})",
                                          "service_bad_answer") from None
        if msg["ok"]:
            _check_schema(msg["result"], COMMANDS[cmd].schema if cmd in COMMANDS else cmd)
            return msg["result"]
        err = msg["error"]
        raise ServiceError(err["message"], err.get("exit", 1), err.get("kind", "error"))

    def close(self) -> None:
        try:
            # a request the service hung up on leaves its line unsent in the buffer,
            # and closing flushes it: a peer gone is no error to the one closing
            with contextlib.suppress(OSError):
                self.file.close()
        finally:
            self.sock.close()

