"""What the service tells systemd (``Type=notify``): ready, its status line, stopping,
and the watchdog's pings (``WatchdogSec`` arrives as ``WATCHDOG_USEC``). Each is a no-op
outside systemd. Whether stderr is the journal (``JOURNAL_STREAM``) is for the log
format of every process, so :mod:`shuffler.logs` reads it."""

from __future__ import annotations

import os
import socket


def sd_notify(message: str) -> bool:
    """Tell systemd (Type=notify) something; a no-op outside systemd."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return False
    if path.startswith("@"):
        path = "\0" + path[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(path)
            s.sendall(message.encode())
        return True
    except OSError:
        return False


def watchdog_interval() -> float | None:
    """Half of WATCHDOG_USEC, if systemd asked for a watchdog for this process."""
    usec, pid = os.environ.get("WATCHDOG_USEC"), os.environ.get("WATCHDOG_PID")
    if not usec or (pid and int(pid) != os.getpid()):
        return None
    return int(usec) / 2e6
