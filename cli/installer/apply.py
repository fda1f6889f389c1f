"""``install``, ``upgrade``, ``uninstall`` and ``status``: the plan (:mod:`.plan`) made
true under the root, each change said in one line, each thing made recorded first
(:mod:`.manifest`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shuffler.config import Config, load_config, load_config_text
from shuffler.constants import EXIT_OK

from . import plan as p
from .manifest import Manifest, digest
from .system import System

Say = Callable[[str], None]


def read_config(root: Path) -> tuple[Config, bool]:
    """The machine's config (or the package's, which install puts there), and whether the
    machine has one. One that does not load raises its error, naming the file."""
    path = root / p.CONFIG.lstrip("/")
    if path.exists() or path.is_symlink():
        return load_config(path), True
    return load_config_text(p.shipped("config.toml").decode(), "the package's config.toml"), False


class Installer:
    def __init__(self, system: System, say: Say) -> None:
        self.sys = system
        self.root = system.root
        self.say = say
        self.changed: list[str] = []
        self.man = Manifest.load(self.root)

    def at(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def change(self, what: str) -> None:
        self.changed.append(what)
        self.say(what)

    # -- install and upgrade ------------------------------------------------------------
    def install(self, *, upgrade: bool = False) -> int:
        config, present = read_config(self.root)  # refused here: nothing changed yet
        plan = p.make(config, p.venv(self.root), rpi_os=self.sys.rpi_os, config_present=present)
        self.accounts()
        self.folder(p.CONFIG.rsplit("/", 1)[0], 0o755)
        self.state_folder()
        for file in plan.files:
            self.file(file, replace_edited=upgrade)
        for path in plan.unwanted:
            self.unwanted(path)
        for path, target in plan.links.items():
            self.link(path, target)
        if plan.spi:
            self.spi()
        self.settle(upgrade)
        if not self.changed:
            self.say("nothing to change: the machine is as the package and the config want")
        return EXIT_OK

    def accounts(self) -> None:
        for group in (*p.GROUPS, p.ACCOUNT):
            if not self.sys.group_exists(group):
                self.man.note(f"group:{group}", kind="group", name=group)
                self.sys.add_group(group)
                self.change(f"made the group {group}")
        if not self.sys.user_exists(p.ACCOUNT):
            self.man.note(f"user:{p.ACCOUNT}", kind="user", name=p.ACCOUNT)
            self.sys.add_user(p.ACCOUNT, p.STATE, p.GROUPS)
            self.change(f"made the account {p.ACCOUNT} (groups {', '.join(p.GROUPS)})")
            return
        for group in p.GROUPS:
            if p.ACCOUNT not in self.sys.members(group):
                self.sys.join(p.ACCOUNT, group)
                self.change(f"added {p.ACCOUNT} to the group {group}")

    def folder(self, path: str, mode: int) -> None:
        """``path`` and its missing parents, each recorded (removed by uninstall if empty)."""
        missing = []
        here = self.at(path)
        while not here.exists() and here != self.root:
            missing.append(here)
            here = here.parent
        for made in reversed(missing):
            name = "/" + str(made.relative_to(self.root))
            self.man.note(f"dir:{name}", kind="dir", path=name)
            made.mkdir(mode)
            made.chmod(mode)
            self.change(f"made {name}/")

    def state_folder(self) -> None:
        folder = self.at(p.STATE)
        if folder.exists():
            return
        self.folder(str(Path(p.STATE).parent), 0o755)
        self.man.note(f"state:{p.STATE}", kind="state", path=p.STATE)
        folder.mkdir(0o750)
        os.chown(folder, *self.sys.ids(p.ACCOUNT))
        folder.chmod(0o750)
        self.change(f"made {p.STATE}/ (the state: {p.ACCOUNT}'s, 0750)")

    def file(self, file: p.File, *, replace_edited: bool) -> None:
        path, key = self.at(file.path), f"file:{file.path}"
        ours = self.man.entries.get(key)
        try:
            now: bytes | None = path.read_bytes()
        except FileNotFoundError:
            now = None
        if now == file.data:
            if ours is None and not file.keep:  # the same file, put there by hand: ours now
                self.man.note(key, kind="file", path=file.path, sha256=digest(file.data))
            return
        if now is not None:
            edited = ours is not None and digest(now) != ours["sha256"]
            if ours is None and "/shuffler.service.d/" in file.path:
                self.say(f"kept {file.path}: a drop-in of your own by that name (the "
                         f"package's differs: {file.why})")
                return
            if edited and not replace_edited:
                self.say(f"kept {file.path}: edited since it was installed (`shuffler-setup "
                         f"upgrade` puts the package's back; your own settings belong in a "
                         f"drop-in under {p.DROPINS}/)")
                return
        self.folder(file.path.rsplit("/", 1)[0], 0o755)
        self.man.note(key, kind="file", path=file.path, sha256=digest(file.data),
                      keep=file.keep)
        _write(path, file.data)
        self.change(f"{'installed' if now is None else 'updated'} {file.path} ({file.why})")

    def unwanted(self, path: str) -> None:
        key = f"file:{path}"
        if key in self.man.entries and self.at(path).exists():
            self.at(path).unlink()
            self.change(f"removed {path} (the config no longer calls for it)")
        self.man.forget(key)

    def link(self, path: str, target: str) -> None:
        at = self.at(path)
        if at.is_symlink() and os.readlink(at) == target:
            return
        if at.exists() and not at.is_symlink():
            self.say(f"kept {path}: not a link (the installer links it to {target})")
            return
        self.folder(path.rsplit("/", 1)[0], 0o755)
        self.man.note(f"link:{path}", kind="link", path=path, target=target)
        at.unlink(missing_ok=True)
        at.symlink_to(target)
        self.change(f"linked {path} -> {target}")

    def spi(self) -> None:
        boot = self.at(p.BOOT_CONFIG)
        text = boot.read_text() if boot.exists() else ""
        if any(ln.split("#")[0].strip() == p.SPI_LINE for ln in text.splitlines()):
            return
        tool = self.sys.raspi_config()
        if tool:
            self.sys.run(tool, "nonint", "do_spi", "0")
            self.change("SPI turned on (raspi-config nonint do_spi 0): reboot for it to take "
                        "effect (`sudo reboot`)")
        elif boot.exists():
            self.man.note(f"line:{p.BOOT_CONFIG}", kind="line", path=p.BOOT_CONFIG,
                          line=p.SPI_LINE + p.SPI_MARK)
            _write(boot, (text + ("" if text.endswith("\n") or not text else "\n")
                          + p.SPI_LINE + p.SPI_MARK + "\n").encode())
            self.change(f"SPI turned on ({p.SPI_LINE} in {p.BOOT_CONFIG}): reboot for it to "
                        f"take effect (`sudo reboot`)")
        else:
            self.say(f"SPI: no raspi-config and no {p.BOOT_CONFIG} here: turn SPI on for the "
                     f"battery monitor, or set [gpio] adc_channel = false in {p.CONFIG}")

    def settle(self, upgrade: bool) -> None:
        """systemd and udev told of the changes, the service restarted if it ran (upgrade:
        started if enabled); without a running systemd, said so."""
        units = any(" /etc/systemd/" in c or "removed /etc/systemd/" in c for c in self.changed)
        rules = any(p.RULES in c for c in self.changed)
        if not self.sys.systemd:
            if self.changed or upgrade:
                self.say("no running systemd here (a chroot or an image's tree): nothing "
                         "reloaded or restarted; the unit is enabled and starts at boot")
            return
        if rules and self.sys.udev_reload():
            self.say("udev rules reloaded and the devices triggered")
        if units:
            self.sys.daemon_reload()
        state = self.sys.unit_state()
        if state in ("active", "activating", "failed") and (self.changed or upgrade):
            self.sys.run("systemctl", "reset-failed", "shuffler", check=False)
            self.sys.restart()  # a failed one too: the change may be what it lacked
            self.say(f"restarted shuffler (it was {state})")
        elif upgrade:
            self.sys.restart()
            self.say("started shuffler (systemctl restart shuffler)")
        elif self.changed:
            self.say(f"the service is {state}: start it with `sudo systemctl start shuffler` "
                     f"(after the self-test)")

    # -- uninstall ----------------------------------------------------------------------
    def uninstall(self, *, purge: bool) -> int:
        if not self.man.entries:
            self.say("nothing installed by shuffler-setup here: nothing to remove")
            return EXIT_OK
        if self.sys.systemd and self.sys.unit_state() in ("active", "activating",
                                                            "reloading"):
            self.sys.stop()
            self.say("stopped shuffler")
        for entry in reversed(list(self.man.entries.values())):
            if self.undo(entry, purge):
                self.man.forget(entry["key"])
        if self.sys.systemd:
            self.sys.daemon_reload()
            self.sys.udev_reload()
        if any(e["kind"] != "dir" for e in self.man.entries.values()):
            self.say("run `sudo shuffler-setup uninstall --purge` to remove what was kept")
            return EXIT_OK
        self.man.remove()
        return EXIT_OK

    def undo(self, e: dict[str, Any], purge: bool) -> bool:
        """Undo one entry; False: kept (the manifest keeps it)."""
        kind, at = e["kind"], self.at(e.get("path", "/"))
        if kind == "file":
            if e.get("keep") and not purge and at.exists():
                self.say(f"kept {e['path']} (yours now; --purge removes it)")
                return False
            if at.exists() or at.is_symlink():
                at.unlink()
                self.say(f"removed {e['path']}")
        elif kind == "link":
            if at.is_symlink() and os.readlink(at) == e["target"]:
                at.unlink()
                self.say(f"removed {e['path']}")
        elif kind == "dir":
            if at.is_dir():
                if any(at.iterdir()):
                    self.say(f"kept {e['path']}/: it holds files the installer did not make")
                    return False
                at.rmdir()
                self.say(f"removed {e['path']}/")
        elif kind == "state":
            if not purge:
                self.say(f"kept {e['path']}/ (the score, pairings and counters; --purge "
                         f"removes it)")
                return False
            shutil.rmtree(at, ignore_errors=True)
            self.say(f"removed {e['path']}/ and everything in it (--purge)")
        elif kind == "line" and at.exists():
            lines = at.read_text().splitlines(keepends=True)
            if (kept := [ln for ln in lines if ln.rstrip("\n") != e["line"]]) != lines:
                _write(at, "".join(kept).encode())
                self.say(f"removed {e['line'].split('#')[0].strip()} from "
                         f"{at.relative_to(self.root)} (reboot for it to take effect)")
        elif kind == "user" and self.sys.user_exists(e["name"]):
            self.sys.del_user(e["name"])
            self.say(f"removed the account {e['name']}")
        elif kind == "group" and self.sys.group_exists(e["name"]):
            self.sys.del_group(e["name"])
            self.say(f"removed the group {e['name']}")
        return True


def _write(path: Path, data: bytes) -> None:
    from shuffler.files import atomic_write

    atomic_write(path, data, mode=0o644)
