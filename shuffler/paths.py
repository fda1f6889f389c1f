"""Where things are: the deployed machine's config and socket (under the system root),
the user's config, the default socket. Only ``os`` and ``pathlib``: the CLI asks a
running service without importing the config's model when no config file exists."""

from __future__ import annotations

import os
from pathlib import Path

#: where a deployed machine keeps its config and its service's socket, under the system
#: root (docs/deploy/README.md): ``/`` unless SHUFFLER_SYSTEM_ROOT names a throwaway one
#: (tests, a staged image), so nothing but a real deployment is read from /etc or /run
SYSTEM_ROOT_ENV = "SHUFFLER_SYSTEM_ROOT"
SYSTEM_CONFIG = "etc/shuffler/config.toml"
SERVICE_SOCKET = "run/shuffler/shuffler.sock"
SERVICE_UNIT = "etc/systemd/system/shuffler.service"


def system_root() -> Path:
    return Path(os.environ.get(SYSTEM_ROOT_ENV) or "/")


def system_config_path() -> Path:
    """The deployed machine's config: the service's, read by every user's CLI too."""
    return system_root() / SYSTEM_CONFIG


def service_socket_path() -> Path:
    """The socket the deployed service listens on (the shipped config names it)."""
    return system_root() / SERVICE_SOCKET


def service_installed() -> bool:
    """Whether this machine has a deployed service: its config or its systemd unit."""
    root = system_root()
    return (root / SYSTEM_CONFIG).exists() or (root / SERVICE_UNIT).exists()


def default_socket_path() -> Path:
    """Where the service listens and the CLI looks when neither ``--socket`` nor the
    config names a socket: ``$XDG_RUNTIME_DIR/shuffler.sock`` (a folder only its user
    may enter), else ``shuffler.sock`` in the default state folder (created 0750).
    Never a bare name in ``/tmp``, where any local user could create it first; the
    client still checks who owns the socket it finds (:mod:`shuffler.service.client`)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "shuffler.sock"
    from shuffler.files import default_state_dir  # here: `shuffler stop` may never need it

    return default_state_dir() / "shuffler.sock"


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "shuffler" / "config.toml"


def discovered_config_paths() -> list[Path]:
    """Where a CLI given no ``--config`` looks, in order: the system's, the user's."""
    return [system_config_path(), default_config_path()]
