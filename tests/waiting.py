"""The one way a test waits for something real (a broker, a browser, a process): poll
``check`` until it returns something true, with a generous bound that holds with both
cores busy; the timeout names what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float = 30.0, what: str = "condition", *,
             every: float = 0.02) -> T:
    """``check()``'s first true value; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")
