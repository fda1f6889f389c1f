"""The audit log: one JSON line per pass, appended and flushed to disk. Never a plan.

    >>> import tempfile, pathlib
    >>> log = AuditLog(pathlib.Path(tempfile.mkdtemp()) / "audit.jsonl")
    >>> log.append({"id": 1, "counted": 24})
    >>> [line["id"] for line in log.read()]
    [1]
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def append(self, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self) -> Iterator[dict[str, Any]]:
        """Every whole line; a torn last line (a crash mid-write) is skipped."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry

    def has(self, pass_id: int) -> dict[str, Any] | None:
        return next((e for e in self.read() if e.get("id") == pass_id), None)
