"""Why a face's socket cannot open, in words a builder can act on: the config key, the
port and the fix. Under the shipped unit without its network drop-in the kernel refuses
the address family (``RestrictAddressFamilies=AF_UNIX``: EAFNOSUPPORT); a port another
process holds is EADDRINUSE, and then the process is named when /proc shows it."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from shuffler.errors import ConfigError

#: the kernel's answers when the unit allows no network (seccomp gives EAFNOSUPPORT;
#: some sandboxes EPERM or EACCES)
REFUSED = (errno.EAFNOSUPPORT, errno.EPERM, errno.EACCES)
DROPIN_FIX = ("the unit allows the network only with its drop-in network.conf: run `sudo "
              "shuffler-setup install` (it installs the drop-in when [web] or [mqtt] is on "
              "in the config, and restarts the service)")


def listener_error(e: OSError, section: str, host: str, port: int) -> ConfigError:
    """The error for a listener of ``[section]`` on ``host:port`` that failed with ``e``
    (``serve`` exits 2 with it)."""
    where = f"[{section}] port = {port} (on {host})"
    if e.errno == errno.EADDRINUSE:
        who = port_holder(port)
        held = f"{who} holds it" if who else \
            f"another process holds it (`sudo ss -ltnp 'sport = :{port}'` names it)"
        return ConfigError(f"{where}: the port is taken ({e.strerror}): {held}; set "
                           f"another [{section}] port in the config, or stop that process")
    if e.errno == errno.EACCES and port < 1024:
        return ConfigError(f"{where}: ports below 1024 need root; set [{section}] port to "
                           f"1024 or more (8080 is the default)")
    if e.errno in REFUSED:
        return ConfigError(f"{where}: the system refuses a network socket ({e.strerror}): "
                           f"{DROPIN_FIX}")
    return ConfigError(f"{where}: cannot listen: {e.strerror or e}")


def check_network(section: str, host: str, port: int) -> None:
    """Raise :func:`listener_error` if no socket of the families ``host`` resolves to may
    be made here (the unit forbids the network), without connecting."""
    try:
        families = {info[0] for info in socket.getaddrinfo(host, port,
                                                           type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        families = {socket.AF_INET, socket.AF_INET6}  # resolved later, by the client
    last: OSError | None = None
    for family in families:
        try:
            socket.socket(family, socket.SOCK_STREAM).close()
            return
        except OSError as e:
            last = e
    if last is not None and last.errno in REFUSED:
        raise listener_error(last, section, host, port)


def port_holder(port: int) -> str | None:
    """``pid N (name)`` of the process listening on TCP ``port``, if /proc shows it."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{f[9]}]")
    for pid in (d for d in os.listdir("/proc") if d.isdigit()) if inodes else ():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                name = Path(f"/proc/{pid}/comm").read_text().strip()
                return f"pid {pid} ({name})"
        except OSError:
            continue
    return None
