"""The build's record of the commit it was made from, so that an installed shuffler's
``--version`` names it (``shuffler 0.2.0 (git 1a2b3c4)``; shuffler/version.py reads it).

setuptools runs these commands in place of its own (``[tool.setuptools.cmdclass]`` in
pyproject.toml). Built from a git checkout of this project, the wheel and the sdist carry
``shuffler/_build.json``: ``{"commit": "<40 hex>", "dirty": <a tracked file changed>}``.
A wheel built from that sdist (``python -m build`` makes it so) carries the sdist's
record. Built from anything else (a copy without ``.git``), there is no record and
``--version`` says the release alone. An editable install records nothing: it runs from
the checkout, which ``--version`` asks itself. Git runs here, at build time, never when a
command starts. Not part of the installed package.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

RECORD = Path("shuffler") / "_build.json"
#: the tree being built (a checkout, an unpacked sdist): where this file is
ROOT = Path(__file__).resolve().parent
_SHA = re.compile(r"[0-9a-f]{40}")


def record_of(root: Path) -> str | None:
    """The record for a tree at ``root``: from git when ``root`` is the top of a
    checkout, else the record the tree already carries (an unpacked sdist), else None."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, env=env, timeout=60)
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v2",
                                 "--branch", "--untracked-files=no"],
                                capture_output=True, text=True, env=env, timeout=60)
    except (OSError, subprocess.SubprocessError):
        top = status = None
    if top is not None and status is not None and top.returncode == 0 \
            and status.returncode == 0 and Path(top.stdout.strip()).resolve() == root.resolve():
        lines = status.stdout.splitlines()
        sha = next((ln.split()[2] for ln in lines if ln.startswith("# branch.oid ")), "")
        if _SHA.fullmatch(sha):
            dirty = any(not ln.startswith("#") for ln in lines)
            return json.dumps({"commit": sha, "dirty": dirty}) + "\n"
    carried = root / RECORD
    return carried.read_text(encoding="utf-8") if carried.is_file() else None


class BuildPy(build_py):
    """setuptools' build_py, then the record written into the built package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / RECORD
        said = record_of(ROOT)
        if said is None:
            target.unlink(missing_ok=True)  # none left from an earlier build of a checkout
        else:
            target.write_text(said, encoding="utf-8")


class Sdist(sdist):
    """setuptools' sdist, with the record in the tree it packs."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        said = record_of(ROOT)
        if said is not None:
            (Path(base_dir) / RECORD).write_text(said, encoding="utf-8")
