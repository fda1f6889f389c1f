"""The installer's reach into the system: accounts (shadow's tools, ``--root`` for a
tree), systemd and udev (only when they run here), SPI on Raspberry Pi OS."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from shuffler.errors import DeviceError


class CommandFailed(DeviceError):
    """A system command the installer ran failed (exit 3): its words and what it said."""

    kind = "file_access"  # the system refused: a command, a file (docs/json.md's kinds)


@dataclass(frozen=True)
class System:
    root: Path

    @property
    def live(self) -> bool:
        """The running system itself (not a tree under another root)."""
        return self.root == Path("/")

    @property
    def systemd(self) -> bool:
        """systemd runs this system (not in a chroot or an image's build)."""
        return self.live and Path("/run/systemd/system").is_dir()

    @property
    def rpi_os(self) -> bool:
        return (self.root / "etc/rpi-issue").exists()

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CommandFailed(f"`{' '.join(argv)}` could not run: {e}") from None
        if check and done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise CommandFailed(f"`{' '.join(argv)}` failed (exit {done.returncode})"
                               + (f": {said[-1]}" if said else ""))
        return done

    def _root_args(self) -> tuple[str, ...]:
        return () if self.live else ("--root", str(self.root))

    # -- accounts (read from the root's own files: a tree's are not this host's) ---------
    def _entries(self, name: str) -> dict[str, list[str]]:
        try:
            lines = (self.root / "etc" / name).read_text().splitlines()
        except FileNotFoundError:
            return {}
        return {f[0]: f for f in (ln.split(":") for ln in lines) if len(f) >= 4}

    def group_exists(self, name: str) -> bool:
        return name in self._entries("group")

    def user_exists(self, name: str) -> bool:
        return name in self._entries("passwd")

    def ids(self, user: str) -> tuple[int, int]:
        entry = self._entries("passwd")[user]
        return int(entry[2]), int(entry[3])

    def members(self, group: str) -> list[str]:
        entry = self._entries("group").get(group)
        return [m for m in entry[3].split(",") if m] if entry else []

    def add_group(self, name: str) -> None:
        self.run("groupadd", *self._root_args(), "--system", name)

    def add_user(self, name: str, home: str, groups: tuple[str, ...]) -> None:
        self.run("useradd", *self._root_args(), "--system", "--gid", name,
                 "--home-dir", home, "--no-create-home", "--shell", "/usr/sbin/nologin",
                 "--groups", ",".join(groups), name)

    def join(self, user: str, group: str) -> None:
        self.run("usermod", *self._root_args(), "-aG", group, user)

    def del_user(self, name: str) -> None:
        self.run("userdel", *self._root_args(), name)

    def del_group(self, name: str) -> None:
        self.run("groupdel", *self._root_args(), name)

    # -- systemd and udev ---------------------------------------------------------------
    def unit_state(self) -> str:
        """``active``, ``inactive``, ``failed``...; ``unknown`` without a running systemd."""
        if not self.systemd:
            return "unknown"
        return self.run("systemctl", "is-active", "shuffler", check=False).stdout.strip()

    def daemon_reload(self) -> None:
        self.run("systemctl", "daemon-reload")

    def restart(self) -> None:
        self.run("systemctl", "restart", "shuffler")

    def stop(self) -> None:
        self.run("systemctl", "stop", "shuffler")

    def udev_reload(self) -> bool:
        if not (self.live and Path("/run/udev/control").exists()):
            return False
        self.run("udevadm", "control", "--reload")
        self.run("udevadm", "trigger", "--subsystem-match=gpio", "--subsystem-match=spidev",
                 "--subsystem-match=tty")
        self.run("udevadm", "settle", check=False)
        return True

    # -- SPI --------------------------------------------------------------------------
    def raspi_config(self) -> str | None:
        found = shutil.which("raspi-config") if self.live else None
        return found if found and os.access(found, os.X_OK) else None
