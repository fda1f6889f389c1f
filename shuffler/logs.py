"""Logging: structlog to stderr only (stdout belongs to ``--json`` output).

Readable key=value lines on a terminal, JSON lines with ``json=True`` (the
service under systemd). Never log a plan.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure(verbosity: int = 0, json: bool = False, colors: bool | None = None) -> None:
    """0: warnings and errors; 1: info; 2 or more: debug. Colours: on a terminal unless
    ``colors`` says otherwise."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    renderer = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty() if colors is None else colors)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)
