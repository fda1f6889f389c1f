"""Who may own the service's socket, in the few lines the fast ``stop`` needs too
(:mod:`shuffler_cli.quickstop` imports this, not the client): root, the user running
the command, and ``[service] user``. :mod:`shuffler.service.client` says the rest."""

from __future__ import annotations

import os
import socket
import struct


def trusted_uids(user: str | None = None) -> frozenset[int]:
    """Who may own the service's socket: root, this user, and ``user`` (a name or uid)."""
    uids = {0, os.getuid()}
    if user:
        import pwd

        try:
            uids.add(int(user) if user.isdigit() else pwd.getpwnam(user).pw_uid)
        except KeyError:  # no such account: only root and this user
            return frozenset(uids)
    return frozenset(uids)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    return struct.unpack("3i", creds)[1]
