"""What the service tells systemd (``Type=notify``): ready, its status line, stopping,
and the watchdog's pings (``WatchdogSec`` arrives as ``WATCHDOG_USEC``), given only
while the machine makes progress (:class:`Watchdog`). Each is a no-op outside systemd.
Whether stderr is the journal (``JOURNAL_STREAM``) is for the log format of every
process, so :mod:`shuffler.logs` reads it."""

from __future__ import annotations

import contextlib
import math
import os
import socket

from shuffler.device.clock import Clock
from shuffler.device.contract import ShufflerDevice
from shuffler.logs import get_logger

log = get_logger("shuffler.service")


def sd_notify(message: str) -> None:
    """Tell systemd (Type=notify) something; a no-op outside systemd (or if it is gone)."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return
    if path.startswith("@"):
        path = "\0" + path[1:]
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.connect(path)
        s.sendall(message.encode())


def watchdog_interval() -> float | None:
    """Half of WATCHDOG_USEC, if systemd asked for a watchdog for this process."""
    usec, pid = os.environ.get("WATCHDOG_USEC"), os.environ.get("WATCHDOG_PID")
    if not usec or (pid and int(pid) != os.getpid()):
        return None
    return int(usec) / 2e6


class Watchdog:
    """systemd's watchdog, pinged every ``interval`` seconds of ``clock`` (None: no
    watchdog) while the loop and ``device`` make progress (:meth:`tick`)."""

    def __init__(self, interval: float | None, clock: Clock, device: ShufflerDevice) -> None:
        self.interval, self.clock, self.device = interval, clock, device
        self._last_ping = -1e9
        self._pinged_at_device = -math.inf  # the device's time at the last ping

    def tick(self, health: bool = False) -> None:
        """Ping when it is due, from the deciding loop only: between
        jobs (and only while the device answers its health check, so a hung device gets
        restarted), and from inside a pass or a hand's wait for a touch through
        ``on_tick``. A loop wedged anywhere stops the pings, and so does one that spins
        without getting anywhere: inside a job a ping needs the device's clock to have
        moved since the last one (a pass or a wait that goes on calling ``on_tick`` while
        its machine's time stands still proves nothing); between jobs the loop's turn and
        the device's health check are the progress (an idle simulator's clock rests)."""
        if not self.interval or self.clock.now() - self._last_ping < self.interval:
            return
        moved = self.device.now()
        if not health and moved <= self._pinged_at_device:  # inside a job: on_tick
            log.error("no progress since the last watchdog ping: not pinging", device_time=moved)
            return
        if health:
            try:
                self.device.health()
            except Exception:
                log.error("device health check failed: not pinging the watchdog")
                return
        sd_notify("WATCHDOG=1")
        self._last_ping, self._pinged_at_device = self.clock.now(), moved
