"""``backup`` and ``restore`` of the state folder (the score, the pairings, the battery's
history, the counters and the audit log): a gzipped tar whose first member,
``shuffler-backup.json``, lists every file with its size and SHA-256.

A restore reads and checks the whole archive before it changes anything, refuses while
the service holds the machine, builds the new folder beside the old one and swaps the
two by renames: the state is the old one or the restored one, never a mix."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath

from shuffler.errors import BadInputError, DeviceError
from shuffler.files import atomic_write
from shuffler.store.lock import MachineBusyError, MachineLock

from . import plan as p
from .manifest import digest
from .system import System

INDEX = "shuffler-backup.json"
FORMAT = "shuffler-backup/1"
#: never carried: the lock (held by whoever runs) and the disk reserve (made again)
SKIP = {"machine.lock", ".reserve"}
MAX_BYTES = 256 << 20


def state_folder(system: System) -> Path:
    from .apply import read_config

    config, _ = read_config(system.root)
    folder = str(config.state_dir or p.STATE)
    return system.root / folder.lstrip("/")


def backup(system: System, target: Path) -> list[str]:
    folder = state_folder(system)
    if not folder.is_dir():
        raise BadInputError(f"{folder}: no state folder to back up")
    files = {path.relative_to(folder).as_posix(): path.read_bytes()
             for path in sorted(folder.rglob("*")) if path.is_file() and not path.is_symlink()
             and path.name not in SKIP and not path.name.startswith(".state.json.")}
    index = {"format": FORMAT, "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "files": {rel: {"size": len(data), "sha256": digest(data)}
                       for rel, data in files.items()}}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in [(INDEX, json.dumps(index, indent=1).encode()),
                           *((f"state/{rel}", data) for rel, data in files.items())]:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o640, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    atomic_write(target, out.getvalue(), mode=0o600)
    return list(files)


def read_backup(source: Path) -> dict[str, bytes]:
    """Every file of the backup, checked against its index; a bad one raises, naming it."""
    def bad(why: str) -> BadInputError:
        return BadInputError(f"{source}: not a usable shuffler backup ({why}); nothing "
                             f"was changed")

    try:
        with tarfile.open(source, mode="r:gz") as tar:
            members = tar.getmembers()
            if not members or members[0].name != INDEX:
                raise bad(f"its first member is not {INDEX}")
            files: dict[str, bytes] = {}
            total = 0
            for member in members:
                total += member.size
                if total > MAX_BYTES:
                    raise bad("larger than 256 MiB")
                if not member.isfile():
                    raise bad(f"{member.name} is not a regular file")
                got = tar.extractfile(member)
                files[member.name] = got.read() if got else b""
    except (OSError, tarfile.TarError, EOFError) as e:
        raise bad(str(e) or type(e).__name__) from None
    try:
        index = json.loads(files.pop(INDEX))
    except ValueError:
        index = None
    # checked, not asserted: ``python -O`` drops asserts, and a bad backup must be refused
    ours = isinstance(index, dict) and index.get("format") == FORMAT
    listed = index.get("files") if ours else None
    if not isinstance(listed, dict) or not all(isinstance(v, dict) for v in listed.values()):
        raise bad(f"{INDEX} is not a backup index")
    state = {}
    for name, data in files.items():
        rel = PurePosixPath(name).relative_to("state") if name.startswith("state/") else None
        if rel is None or ".." in rel.parts or rel.is_absolute() or str(rel) not in listed:
            raise bad(f"{name} is not in its index")
        if digest(data) != listed[str(rel)].get("sha256"):
            raise bad(f"{name} does not match its checksum")
        state[str(rel)] = data
    if missing := sorted(set(listed) - set(state)):
        raise bad(f"{missing[0]} is listed but missing")
    return state


def restore(system: System, source: Path) -> list[str]:
    files = read_backup(source)  # checked whole before anything changes
    folder = state_folder(system)
    if system.unit_state() in ("active", "activating", "reloading"):
        raise DeviceError("the service is running: `sudo systemctl stop shuffler` first, "
                          "then restore, then start it; nothing was changed")
    if folder.is_dir():
        try:
            MachineLock(folder).acquire("shuffler-setup restore").release()
        except MachineBusyError as e:
            raise DeviceError(f"{e}: stop it first (`sudo systemctl stop shuffler`); "
                              f"nothing was changed") from None
    owner = system.ids(p.ACCOUNT) if system.user_exists(p.ACCOUNT) else None
    folder.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=".shuffler-restore-", dir=folder.parent))
    old = folder.parent / f".shuffler-replaced-{os.getpid()}"
    try:
        for rel, data in files.items():
            path = new / rel
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
            path.write_bytes(data)
        for path in [new, *new.rglob("*")]:
            path.chmod(0o750 if path.is_dir() else 0o640)
            if owner:
                os.chown(path, *owner)
        if folder.exists():
            folder.rename(old)
        new.rename(folder)
    except BaseException:
        if old.exists() and not folder.exists():
            old.rename(folder)  # the old state back: never half of each
        shutil.rmtree(new, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return sorted(files)
