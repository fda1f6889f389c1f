"""The build's record of the commit it was made from, so that an installed shuffler's
``--version`` names it (``shuffler 0.2.0 (git 1a2b3c4)``; shuffler/version.py reads it).

setuptools runs these commands in place of its own (``[tool.setuptools.cmdclass]`` in
pyproject.toml). Built from a git checkout of this project, the wheel and the sdist carry
``shuffler/_build.json``: ``{"commit": "<40 hex>", "dirty": <a tracked file changed>}``
(``null`` where git was not there to say).
A wheel built from that sdist (``python -m build`` makes it so) carries the sdist's
record. Built from anything else (a copy without ``.git``), there is no record and
``--version`` says the release alone. An editable install records nothing: it runs from
the checkout, which ``--version`` asks itself. Git runs here, at build time, never when a
command starts. Not part of the installed package.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

RECORD = Path("shuffler") / "_build.json"
#: the tree being built (a checkout, an unpacked sdist): where this file is
ROOT = Path(__file__).resolve().parent


def record_of(root: Path) -> str | None:
    """The record for the tree at ``root``, found as ``--version`` finds a commit (the
    tree's own shuffler/version.py, loaded from it): git's word when ``root`` is a
    checkout (the files' without git, whether it changed then unknown), else the record
    the tree already carries (an unpacked sdist's), else None."""
    spec = importlib.util.spec_from_file_location("_shuffler_build_version",
                                                  root / "shuffler" / "version.py")
    assert spec is not None and spec.loader is not None
    version = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(root))  # its `from shuffler import __version__`
    sys.modules[spec.name] = version  # its dataclass looks its module up
    try:
        spec.loader.exec_module(version)
    finally:
        sys.path.remove(str(root))
        del sys.modules[spec.name]
    found = version.commit(root)
    return None if found is None else json.dumps({"commit": found.sha,
                                                  "dirty": found.dirty}) + "\n"


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
