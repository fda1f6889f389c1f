"""The audit log: one JSON line per pass, appended and flushed to disk. Never a plan.

    >>> import tempfile, pathlib
    >>> log = AuditLog(pathlib.Path(tempfile.mkdtemp()) / "audit.jsonl")
    >>> log.append({"id": 1, "counted": 24})
    >>> log.append({"id": 1, "interrupted": True})["counted"]  # one record per pass id
    24
    >>> [(line["id"], line["seq"]) for line in log.read()]
    [(1, 1)]

Every record carries ``seq``, one more than the record before it in this log: the order
the records were written, which a wall clock stepped back (a Pi without a real-time
clock, before NTP) cannot reverse as it reverses ``time``. A pass id is recorded once:
an append for an id already in the log writes nothing and returns the record there, so
two processes that each believe they own the machine (a lock file removed mid-pass)
can never log one pass twice. Both are decided under an exclusive ``flock`` on the log
itself, so two appenders never pick the same ``seq`` or both miss the other's record.

A power cut in the middle of an append leaves a torn last line. The next append
starts on a fresh line, so it is never glued to the torn one; reading skips a torn
line and reports it once (a warning naming the line). The file is never opened
through a symlink. Every failure to read or write it is a :class:`FileAccessError`
naming the path.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shuffler.errors import FileAccessError
from shuffler.files import (
    Reserve,
    make_folder,
    open_kept,
    read_limited,
    retry_with_reserve,
    symlink_refusal,
)
from shuffler.logs import get_logger

#: a pass does not start with less free space than this where the log and state live
MIN_FREE_BYTES = 64 * 1024
#: the most of the log read at once (about a million passes)
MAX_LOG_BYTES = 256 << 20
log = get_logger("shuffler.audit")


class AuditLog:
    def __init__(self, path: Path, reserve: Reserve | None = None) -> None:
        self.path = Path(path)
        self.reserve = reserve
        #: the torn lines already reported (by line number), so each is reported once
        self.reported: set[int] = set()

    def _open(self) -> int:
        make_folder(self.path.parent)
        return open_kept(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)

    def check_writable(self) -> None:
        """Raise unless a record could be appended now (the file opens for appending and
        its disk has room, the reserve included), so a pass never runs that its log
        cannot record."""
        try:
            os.close(self._open())
            free = os.statvfs(self.path.parent)
        except OSError as e:
            raise FileAccessError(f"{self.path}: cannot write the audit log: "
                                  f"{symlink_refusal(e)}; nothing was started") from None
        full = FileAccessError(f"{self.path}: cannot write the audit log: the disk is "
                               "full; nothing was started")
        if free.f_bavail * free.f_frsize < MIN_FREE_BYTES:
            raise full
        if self.reserve is None:
            return
        try:
            self.reserve.ensure()
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise full from None
            raise FileAccessError(f"{self.reserve.path}: cannot make the reserve that keeps "
                                  f"a fault recordable: {symlink_refusal(e)}; nothing was "
                                  "started") from None

    def append(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        """One record, with the next ``seq``, on a line of its own even after a torn one,
        flushed to disk; a failed write is tried once more after releasing the reserve.
        Returns None when written; the record already there when the log holds one for
        ``entry``'s pass id (nothing written: see the module notes)."""
        there: list[dict[str, Any]] = []
        try:
            retry_with_reserve(self.reserve, lambda: self._append(entry, there))
        except OSError as e:
            raise FileAccessError(f"{self.path}: cannot write the audit log: "
                                  f"{symlink_refusal(e)}") from None
        return there[0] if there else None

    def _append(self, entry: dict[str, Any], there: list[dict[str, Any]]) -> None:
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # one appender at a time: seq and the id check
            size = os.fstat(fd).st_size
            with _mapped(fd, size) as raw:
                pass_id = entry.get("id")
                found = _record_of(raw, pass_id) if type(pass_id) is int else None
                if found is not None:
                    if {k: v for k, v in found.items() if k != "seq"} != entry:
                        there.append(found)  # another process recorded this pass
                    os.fsync(fd)  # else a retry after a failed fsync: ours is there
                    return
                line = (json.dumps({**entry, "seq": _last_seq(raw) + 1}, sort_keys=True)
                        + "\n").encode()
                if size and raw[size - 1:size] != b"\n":
                    line = b"\n" + line  # the last append was torn: never glue onto it
            if os.write(fd, line) != len(line):
                raise OSError(0, "short write (disk full?)")
            os.fsync(fd)
        finally:
            os.close(fd)  # and the flock with it

    def read(self) -> Iterator[dict[str, Any]]:
        """Every whole record; a torn or undecodable line (a crash mid-write) is skipped
        and reported once."""
        raw = read_limited(self.path, "audit log", limit=MAX_LOG_BYTES, follow=False)
        if raw is None:
            return
        for number, line in enumerate(raw.split(b"\n"), 1):
            if not line:
                continue
            try:
                entry = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                entry = None
            if isinstance(entry, dict):
                yield entry
            elif number not in self.reported:
                self.reported.add(number)
                log.warning("a torn audit line skipped", path=str(self.path), line=number,
                            bytes=len(line))

    def has(self, pass_id: int) -> dict[str, Any] | None:
        return next((e for e in self.read() if e.get("id") == pass_id), None)


@contextlib.contextmanager
def _mapped(fd: int, size: int) -> Iterator[bytes | mmap.mmap]:
    """The log's bytes, mapped (not read: a long log costs no memory), empty if empty."""
    if not size:
        yield b""
        return
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as raw:
        yield raw


def _record_of(raw: bytes | mmap.mmap, pass_id: int) -> dict[str, Any] | None:
    """The whole record of ``pass_id`` in the log's bytes, if there is one."""
    needle = f'"id": {pass_id}'.encode()
    at = raw.find(needle)
    while at >= 0:
        start = raw.rfind(b"\n", 0, at) + 1
        end = raw.find(b"\n", at)
        record = _parsed(raw[start:end if end >= 0 else len(raw)])
        if record is not None and record.get("id") == pass_id:
            return record
        at = raw.find(needle, at + len(needle))
    return None


def _last_seq(raw: bytes | mmap.mmap) -> int:
    """The ``seq`` of the last whole record that has one; a log written before there was
    a ``seq`` counts its lines, so the sequence still only grows."""
    end = len(raw)
    for _ in range(64):  # past a torn tail or two, not through the whole log
        start = raw.rfind(b"\n", 0, max(0, end - 1)) + 1
        record = _parsed(raw[start:end])
        if record is not None and type(record.get("seq")) is int:
            return record["seq"]
        if start == 0:
            break
        end = start
    return raw.count(b"\n") if isinstance(raw, bytes) else _lines(raw)


def _lines(raw: mmap.mmap) -> int:
    count, at = 0, raw.find(b"\n")
    while at >= 0:
        count, at = count + 1, raw.find(b"\n", at + 1)
    return count


def _parsed(line: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(line.strip().decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return entry if isinstance(entry, dict) else None


def counters(entries: list[dict[str, Any]]) -> dict[str, int]:
    """The state's counters rebuilt from whole audit records (after the state file was
    lost or damaged): passes, cards, faults, jams, interrupted, the next pass id."""
    out = {"passes": 0, "cards": 0, "faults": 0, "jams": 0, "interrupted": 0}
    ids = [0]
    for e in entries:
        if type(e.get("id")) is int and e["id"] > 0:
            ids.append(e["id"])
        if e.get("interrupted"):
            out["interrupted"] += 1
            continue
        counted = e.get("counted")
        if type(counted) is not int or counted < 0:
            continue
        out["passes"] += 1
        out["cards"] += counted
        fault = e.get("fault")
        if isinstance(fault, dict):
            out["faults"] += 1
            out["jams"] += fault.get("kind") == "jam"
    cap = 10**15
    return {**{k: min(v, cap) for k, v in out.items()}, "next_pass_id": min(max(ids) + 1, cap)}
