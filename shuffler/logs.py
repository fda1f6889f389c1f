"""Logging: structlog to stderr only (stdout belongs to ``--json`` output).

Readable key=value lines on a terminal, JSON lines with ``json=True`` (the
service under systemd). Never log a plan.

Under systemd (stderr is the journal's stream: ``JOURNAL_STREAM`` names it) the
default level is info, so the journal gets one ``pass`` line per pass, and every
line starts with its syslog priority (``<6>`` info, ``<4>`` warning, ...), which
journald strips and keeps: ``journalctl -u shuffler -p warning`` shows the faults.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple, cast

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

#: syslog priorities by structlog method name, for journald's ``<N>`` line prefix
PRIORITY = {"debug": 7, "info": 6, "warning": 4, "warn": 4, "error": 3, "exception": 3,
            "critical": 2}


def under_journal(stream=None) -> bool:
    """Whether ``stream`` (stderr) is connected to journald, as systemd says in
    ``JOURNAL_STREAM=device:inode``."""
    stream = stream or sys.stderr
    try:
        device, inode = (int(x) for x in os.environ.get("JOURNAL_STREAM", "").split(":"))
        st = os.fstat(stream.fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (device, inode)


def _journal_priority(logger: Any, method_name: str, rendered: Any) -> str:
    """After the renderer: the line gets journald's ``<N>`` priority prefix."""
    return f"<{PRIORITY.get(method_name, 6)}>{rendered}"


class _Settings(NamedTuple):
    verbosity: int
    json: bool
    journal: bool
    stream: Any
    colors: bool


_pending: _Settings | None = None  # what configure() asked for, not yet applied


def configure(verbosity: int = 0, json: bool = False, colors: bool | None = None) -> None:
    """0: warnings and errors (info under systemd); 1: info; 2 or more: debug.
    Colours: on a terminal unless ``colors`` says otherwise.

    structlog is loaded, and these settings applied, when something first logs (or
    at once if it is loaded already): a command that logs nothing starts without it."""
    global _pending
    journal = under_journal()
    _pending = _Settings(verbosity, json, journal, sys.stderr,
                         sys.stderr.isatty() if colors is None and not journal else bool(colors))
    if "structlog" in sys.modules:
        _apply()


def _apply() -> None:
    global _pending
    settings, _pending = _pending, None
    if settings is None:
        return
    import logging

    import structlog

    quiet = logging.INFO if settings.journal else logging.WARNING
    level = (quiet if settings.verbosity <= 0
             else logging.INFO if settings.verbosity == 1 else logging.DEBUG)
    renderer = (structlog.processors.JSONRenderer() if settings.json
                else structlog.dev.ConsoleRenderer(colors=settings.colors))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
            *([_journal_priority] if settings.journal else []),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=settings.stream),
        cache_logger_on_first_use=False,
    )


class _Logger:
    """A named structlog logger, loaded (with the pending settings) on first use."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if _pending is not None:
            _apply()
        import structlog

        return getattr(structlog.get_logger(self._name), attr)


def get_logger(name: str) -> FilteringBoundLogger:
    return cast("FilteringBoundLogger", _Logger(name))


class Burst:
    """Logs the first of a run of like events at warning, then at most one line every
    ``every`` seconds saying how many there were since: a flood never floods the journal."""

    def __init__(self, logger: Any, what: str, every: float = 10.0) -> None:
        self.logger, self.what, self.every = logger, what, every
        self.count, self.last = 0, -1e9
        self.lock = threading.Lock()

    def note(self, **fields: Any) -> None:
        with self.lock:
            self.count += 1
            now = time.monotonic()
            if now - self.last < self.every:
                return
            count, self.count, self.last = self.count, 0, now
        self.logger.warning(self.what, count=count, **fields)
