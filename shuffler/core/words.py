"""Counts in words a person reads: "1 hand", "2 hands", "no pass"."""

from __future__ import annotations


def plural(n: int, one: str, many: str | None = None, *, none: str | None = None) -> str:
    """``n`` and the word for it: ``plural(1, "hand")`` is "1 hand", ``plural(2, "pass",
    "passes")`` "2 passes"; with ``none``, 0 is that ("no pass")."""
    if n == 0 and none is not None:
        return none
    return f"{n} {one if n == 1 else (many or one + 's')}"


def passes(n: int) -> str:
    return plural(n, "pass", "passes")
