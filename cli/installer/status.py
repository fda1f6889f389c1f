"""``status``: what the installer made, each thing as it is now (ok, edited, missing, out
of date), what the config calls for that is not there, and the unit's state."""

from __future__ import annotations

from typing import Any

from shuffler.constants import EXIT_FAULT, EXIT_OK
from shuffler.errors import ShufflerError

from . import plan as p
from .apply import Say, read_config
from .manifest import MANIFEST_PATH, Manifest, digest
from .system import System


def check(entry: dict[str, Any], system: System, package: dict[str, bytes]) -> str:
    """One recorded thing's state: ``ok`` or what is wrong with it."""
    kind, at = entry["kind"], system.root / entry.get("path", "/").lstrip("/")
    if kind == "file":
        if not at.exists():
            return "missing"
        now = at.read_bytes()
        if digest(now) != entry["sha256"]:
            return "ok (yours)" if entry.get("keep") else "edited since installed"
        if entry["path"] in package and package[entry["path"]] != now:
            return "out of date: `shuffler-setup upgrade` installs the package's"
        return "ok"
    there = {"link": at.is_symlink, "dir": at.is_dir, "state": at.is_dir,
             "user": lambda: system.user_exists(entry["name"]),
             "group": lambda: system.group_exists(entry["name"]),
             "line": lambda: at.exists() and entry["line"] in at.read_text().splitlines()}
    return "ok" if there.get(kind, lambda: True)() else "missing"


def status(system: System, say: Say) -> int:
    man = Manifest.load(system.root)
    if not man.entries:
        say(f"not installed here (no {MANIFEST_PATH}): run `sudo shuffler-setup install`")
        return EXIT_FAULT
    problems = 0
    package: dict[str, bytes] = {}
    wanted: list[str] = []
    try:
        config, present = read_config(system.root)
        plan = p.make(config, p.venv(system.root), rpi_os=system.rpi_os,
                      config_present=present)
        package = {f.path: f.data for f in plan.files}
        wanted = [f.path for f in plan.files if not f.keep]
    except ShufflerError as e:
        say(f"config: does not load: {e}")
        problems += 1
        plan = None
    for entry in man.entries.values():
        state = check(entry, system, package)
        problems += not state.startswith("ok")
        say(f"{state}: {entry.get('path') or entry['kind'] + ' ' + entry['name']}")
    for path in wanted:
        if f"file:{path}" not in man.entries and not (system.root / path.lstrip("/")).exists():
            problems += 1
            say(f"missing: {path}, which the config calls for (`sudo shuffler-setup install`)")
    for path in plan.unwanted if plan else ():
        if f"file:{path}" in man.entries and (system.root / path.lstrip("/")).exists():
            problems += 1
            say(f"not called for: {path}, which the config no longer needs "
                f"(`sudo shuffler-setup install` removes it)")
    unit = system.unit_state()
    say(f"unit: shuffler.service {unit}" + ("" if system.systemd else
                                            " (no running systemd here)"))
    say("status: as installed" if not problems else
        f"status: {problems} thing(s) differ from the install")
    return EXIT_OK if not problems else EXIT_FAULT
