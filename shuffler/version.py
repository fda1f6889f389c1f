"""What ``shuffler --version`` says: the release (:data:`shuffler.__version__`) and, where
it can be known, the commit it was built from, so that an upgrade from a checkout tells
itself apart even when the release number has not moved.

Only ``--version`` imports this module (no command pays for it). Where the commit comes
from, first that holds:

1. the checkout the package runs from (an editable install, ``PYTHONPATH``): ``git
   status`` says the commit and whether tracked files changed; without git (or where
   git refuses the checkout, as one owned by another user) the commit is read from the
   ``.git`` files and whether it changed is not known;
2. the record a build from a checkout left in the package (:data:`RECORD`, written by
   ``build_commit.py`` at the project's root: a wheel, ``pip install .``, an sdist);
3. nothing: the release alone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from shuffler import __version__

#: the record a build leaves beside this module: {"commit": "<40 hex>", "dirty": bool|None}
RECORD = "_build.json"
#: how long ``--version`` waits for ``git status`` before reading the files itself
GIT_SECONDS = 5.0
_SHA = re.compile(r"[0-9a-f]{40}")
#: what would make git look at another repository than the package's own
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
            "GIT_OBJECT_DIRECTORY")


@dataclass(frozen=True)
class Commit:
    """The commit the running code is: ``dirty`` None where it could not be checked."""

    sha: str
    dirty: bool | None
    source: str  # "checkout" or "build"

    def words(self) -> str:
        """``git 1a2b3c4``, then ``, dirty`` or ``, changes not checked`` when so."""
        said = f"git {self.sha[:7]}"
        if self.dirty is None:
            return f"{said}, changes not checked"
        return f"{said}, dirty" if self.dirty else said


def package_root() -> Path:
    """The folder that holds the ``shuffler`` package (a checkout's root, or
    site-packages)."""
    return Path(__file__).resolve().parent.parent


def checkout_of(root: Path) -> bool:
    """Whether ``root`` is a checkout of this project (not a site-packages folder, not a
    repository the package merely sits somewhere inside)."""
    return (root / ".git").exists() and (root / "pyproject.toml").is_file() \
        and (root / "shuffler" / "__init__.py").is_file()


def commit(root: Path | None = None) -> Commit | None:
    """The commit the package runs from (module docstring), or None."""
    root = package_root() if root is None else root
    if checkout_of(root):
        return _from_git(root) or _from_files(root)
    return recorded(Path(__file__).resolve().with_name(RECORD))


def describe(root: Path | None = None) -> str:
    """``0.2.0``, or ``0.2.0 (git 1a2b3c4, dirty)``: what ``--version`` prints after the
    command's name."""
    found = commit(root)
    return __version__ if found is None else f"{__version__} ({found.words()})"


def as_json(root: Path | None = None) -> dict[str, object]:
    """``--json --version``'s keys after ``schema`` (shuffler/schemas/version.json)."""
    found = commit(root)
    out: dict[str, object] = {"version": __version__}
    if found is not None:
        out["commit"] = {"sha": found.sha, "dirty": found.dirty, "from": found.source}
    return out


def recorded(path: Path) -> Commit | None:
    """The commit a build recorded at ``path``; None when there is none or it is not one
    (a record is never trusted to be well formed)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    sha, dirty = record.get("commit"), record.get("dirty")
    if not (isinstance(sha, str) and _SHA.fullmatch(sha)) or "dirty" not in record \
            or not (dirty is None or isinstance(dirty, bool)):
        return None
    return Commit(sha, dirty, "build")


def _from_git(root: Path) -> Commit | None:
    """``git status`` of the checkout: the commit and whether a tracked file changed
    (untracked files do not count). None when git is not there, refuses or is slow."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # a read: no index lock in a checkout we may not write
    try:
        proc = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v2", "--branch",
                               "--untracked-files=no"], capture_output=True, text=True,
                              env=env, timeout=GIT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    lines = proc.stdout.splitlines()
    sha = next((ln.split()[2] for ln in lines if ln.startswith("# branch.oid ")), "")
    if not _SHA.fullmatch(sha):
        return None  # "(initial)": no commit yet
    return Commit(sha, any(not ln.startswith("#") for ln in lines), "checkout")


def _from_files(root: Path) -> Commit | None:
    """The checked-out commit read from ``.git`` itself (HEAD, the branch's ref file or
    packed-refs; a worktree's ``.git`` file and its common folder), whether it changed
    unknown. None when the files do not say."""
    try:
        git_dir = _git_dir(root / ".git")
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            sha = head
        else:
            ref = head.removeprefix("ref:").strip()
            common = git_dir
            if (git_dir / "commondir").is_file():
                common = git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()
            sha = _ref(ref, git_dir, common)
    except (OSError, UnicodeDecodeError):
        return None
    return Commit(sha, None, "checkout") if _SHA.fullmatch(sha) else None


def _git_dir(dot_git: Path) -> Path:
    """``.git`` itself, or where a worktree's (or submodule's) ``.git`` file points."""
    if dot_git.is_dir():
        return dot_git
    text = dot_git.read_text(encoding="utf-8").strip()
    if not text.startswith("gitdir:"):
        raise OSError(f"{dot_git} names no gitdir")
    return dot_git.parent / text.removeprefix("gitdir:").strip()


def _ref(ref: str, git_dir: Path, common: Path) -> str:
    """The commit a ref names: its loose file (the worktree's own, then the common one),
    else its line in packed-refs; "" when it names none (a branch with no commit)."""
    for base in (git_dir, common):
        loose = base / ref
        if loose.is_file():
            return loose.read_text(encoding="utf-8").strip()
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            sha, _, name = line.partition(" ")
            if name.strip() == ref:
                return sha
    return ""
