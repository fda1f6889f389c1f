"""One owner of the machine: an exclusive lock in the state folder.

Whoever drives the device (``shuffler serve``, or a CLI command run in-process) holds
``<state dir>/machine.lock`` with ``fcntl.flock`` for as long as the device is open.
The kernel drops the lock when the holder dies, so a crash never leaves it stale.
The file holds the holder's pid and what it runs, for the message the next one reads::

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> first = MachineLock(folder).acquire("shuffler serve")
    >>> try:
    ...     MachineLock(folder).acquire("shuffler pass")
    ... except MachineBusyError as e:
    ...     print(str(e).split(":")[0])
    busy
    >>> first.release()
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from pathlib import Path

from .errors import BadInputError, DeviceError

LOCK_NAME = "machine.lock"


class MachineBusyError(DeviceError):
    """Another process drives the machine (exit 3)."""

    kind = "busy"


class MachineLock:
    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.path = Path(state_dir) / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, holder: str = "shuffler") -> MachineLock:
        """Take the lock at once or raise :class:`MachineBusyError` naming the holder."""
        if self._fd is not None:
            return self
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o664)
        except OSError as e:
            raise BadInputError(f"{self.path.parent}: cannot use it as the state folder: "
                                f"{e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _read(fd)
            os.close(fd)
            raise MachineBusyError(busy_message(who, self.path)) from None
        except OSError as e:
            os.close(fd)
            raise BadInputError(f"{self.path}: cannot lock: {e.strerror or e}") from None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{holder} (pid {os.getpid()})\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> MachineLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def busy_message(who: str, path: Path) -> str:
    """Who holds the lock, and the fix that fits: a service is asked through its socket or
    stopped; a command is waited for or stopped by its pid."""
    holder = who or "another shuffler"
    pid = re.search(r"\(pid (\d+)\)", who)
    if "shuffler serve" in who:
        return (f"busy: {holder} owns the machine (lock {path}): ask it through its socket "
                "(--socket PATH, or [service] socket in the config; not --no-service), or "
                "stop it first (sudo systemctl stop shuffler"
                + (f", or kill {pid.group(1)}" if pid else "") + ")")
    return (f"busy: {holder} drives the machine (lock {path}): wait for it to finish"
            + (f", or stop it (kill {pid.group(1)})" if pid else ""))


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
