"""The audit log: one JSON line per pass, appended and flushed to disk. Never a plan.

    >>> import tempfile, pathlib
    >>> log = AuditLog(pathlib.Path(tempfile.mkdtemp()) / "audit.jsonl")
    >>> log.append({"id": 1, "counted": 24})
    >>> [line["id"] for line in log.read()]
    [1]

Every failure to read or write it is a :class:`FileAccessError` naming the path.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import FileAccessError
from .files import why

#: a pass does not start with less free space than this where the log and state live
MIN_FREE_BYTES = 64 * 1024


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
                     | os.O_CLOEXEC | os.O_NOCTTY, 0o640)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(0, "not a regular file")
        return fd

    def check_writable(self) -> None:
        """Raise unless a record could be appended now (the file opens for appending and
        its disk has room), so a pass never runs that its log cannot record."""
        try:
            os.close(self._open())
            free = os.statvfs(self.path.parent)
        except OSError as e:
            raise FileAccessError(f"{self.path}: cannot write the audit log: {why(e)}; "
                                  "nothing was started") from None
        if free.f_bavail * free.f_frsize < MIN_FREE_BYTES:
            raise FileAccessError(f"{self.path}: cannot write the audit log: the disk is "
                                  "full; nothing was started")

    def append(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        try:
            fd = self._open()
            try:
                if os.write(fd, line) != len(line):
                    raise OSError(0, "short write (disk full?)")
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise FileAccessError(f"{self.path}: cannot write the audit log: {why(e)}") from None

    def read(self) -> Iterator[dict[str, Any]]:
        """Every whole line; a torn or undecodable line (a crash mid-write) is skipped."""
        try:
            st = os.stat(self.path)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(0, "not a regular file")
            with open(self.path, "rb") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return
        except OSError as e:
            raise FileAccessError(f"{self.path}: cannot read the audit log: {why(e)}") from None
        for line in lines:
            try:
                entry = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                continue
            if isinstance(entry, dict):
                yield entry

    def has(self, pass_id: int) -> dict[str, Any] | None:
        return next((e for e in self.read() if e.get("id") == pass_id), None)
