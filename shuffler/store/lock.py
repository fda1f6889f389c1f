"""One owner of the machine: an exclusive lock in the state folder, and one on the device.

Whoever drives the device (``shuffler serve``, or a CLI command run in-process) holds
``<state dir>/machine.lock`` with ``fcntl.flock`` for as long as the device is open.
The kernel drops the lock when the holder dies, so a crash never leaves it stale.
The lock file is never opened through a symlink (nor truncated before it is locked),
and the lock is held on an open file whose identity is checked: a lock file removed
or replaced while held would let a second owner in, so :meth:`MachineLock.verify`
notices it and the holder refuses to go on (exit 3).
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

The state folder's lock alone lets a second command with another ``--state-dir`` drive
the same machine. So whoever opens a device that others could open too also takes a
:class:`DeviceLock` on what *is* that device: the GPIO chip's node, the serial port's,
or the file a simulated machine's pins are kept in (``shuffler.device.registry.device_identity``);
a simulated machine private to its process has none and needs none.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
from pathlib import Path

from shuffler.errors import BadInputError, DeviceError
from shuffler.files import make_folder, open_kept, symlink_refusal

LOCK_NAME = "machine.lock"


class MachineBusyError(DeviceError):
    """Another process drives the machine (exit 3)."""

    kind = "busy"


class LockLostError(DeviceError):
    """The lock file was removed or replaced while held: another process may now think it
    owns the machine, so this one stops (exit 3)."""

    kind = "lock_lost"


class MachineLock:
    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.path = Path(state_dir) / LOCK_NAME
        self._fd: int | None = None
        #: the state folder cannot be written: only a look at the state is possible
        self.read_only = False

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, holder: str = "shuffler", *, reading: bool = False) -> MachineLock:
        """Take the lock at once or raise :class:`MachineBusyError` naming the holder.

        With ``reading`` (a command that only looks: ``status``, ``battery``) a state
        folder that cannot be written (a read-only card, another user's folder) is no
        error: the lock is taken on the file opened for reading if it is there, none is
        taken if it is not (nobody can write the state there either), and
        :attr:`read_only` says so."""
        if self._fd is not None:
            return self
        for _ in range(5):  # replaced between our open and our lock: open the new one
            fd = self._open(reading)
            if fd is None:
                return self
            self._take(fd)
            if self._same(fd):
                break
            os.close(fd)
        else:
            raise LockLostError(f"{self.path}: the lock file keeps being replaced; "
                                "someone else is meddling with the state folder")
        if not self.read_only:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{holder} (pid {os.getpid()})\n".encode(), 0)
        self._fd = fd
        return self

    def _open(self, reading: bool) -> int | None:
        try:
            make_folder(self.path.parent)
            return open_kept(self.path, os.O_RDWR | os.O_CREAT, 0o664)
        except OSError as e:
            if not (reading and e.errno in (errno.EROFS, errno.EACCES, errno.EPERM)):
                where = self.path if e.filename else self.path.parent
                raise BadInputError(f"{where}: cannot use it as the state folder's lock: "
                                    f"{symlink_refusal(e)}") from None
        self.read_only = True
        try:
            return open_kept(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise BadInputError(f"{self.path}: cannot use it as the state folder's lock: "
                                f"{symlink_refusal(e)}") from None

    def _same(self, fd: int) -> bool:
        """Whether ``fd`` is still the file at the lock's path (not removed, not replaced)."""
        try:
            held, there = os.fstat(fd), os.lstat(self.path)
        except OSError:
            return False
        return held.st_nlink > 0 and (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)

    def verify(self) -> None:
        """Raise :class:`LockLostError` if the held lock file was removed or replaced."""
        if self._fd is not None and not self._same(self._fd):
            raise LockLostError(
                f"{self.path}: the machine's lock file was removed or replaced while this "
                "process held it, so another one may drive the machine: stopping. Find who "
                "removed it, then start again")

    def _take(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _read(fd)
            os.close(fd)
            raise MachineBusyError(busy_message(who, self.path)) from None
        except OSError as e:
            os.close(fd)
            raise BadInputError(f"{self.path}: cannot lock: {e.strerror or e}") from None

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


class DeviceLock:
    """An exclusive ``flock`` on the file that is the device (``/dev/gpiochip0``,
    ``/dev/ttyUSB0``) or stands for it, for as long as the device is open: a second
    process is refused (:class:`MachineBusyError`, exit 3) whatever its state folder.
    The file is opened for reading only and never written (a device node takes no
    text); one that cannot be opened takes no lock, and the device's own opening then
    says why. ``create``: make the file if it is missing (a lock file beside a file that
    is replaced as it changes)."""

    def __init__(self, path: str | os.PathLike[str], device: str, *,
                 create: bool = False) -> None:
        self.path = Path(path)
        self.device = device
        self.create = create
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> DeviceLock:
        if self._fd is not None:
            return self
        flags = os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            if self.create:
                make_folder(self.path.parent)
                fd = os.open(self.path, flags | os.O_CREAT, 0o664)
            else:
                fd = os.open(self.path, flags)
        except OSError:
            return self
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise MachineBusyError(
                f"busy: another process drives the {self.device} machine (it holds "
                f"{self.path}), whatever its state folder: ask it through its socket if "
                "it is the service, or wait for it to finish") from None
        except OSError:
            os.close(fd)
            return self
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
