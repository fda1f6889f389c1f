"""Build outputs cached under a hash of their inputs: the VM tier's guest and simulator
modules (tests/vm/image.py) and the Raspberry Pi image (image/build.py) share it.

The cache: ``$SHUFFLER_VM_CACHE``, else ``~/.cache/shuffler-vm``; one folder per kind and
key (``<kind>-<key>``), made under a temporary name and renamed when whole, so a build cut
off is never mistaken for a cached one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


def cache_root() -> Path:
    root = os.environ.get("SHUFFLER_VM_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "shuffler-vm"


def key_of(*parts: object) -> str:
    """A short hash of the parts (strings, tuples, bytes): the cache key."""
    digest = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else json.dumps(part).encode()
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()[:16]


class Steps:
    """Times each step and prints it (to stderr, so pytest -s and the script show it),
    each line led by ``prefix``."""

    def __init__(self, out: TextIO = sys.stderr, prefix: str = "vm") -> None:
        self.out = out
        self.prefix = prefix
        self.times: dict[str, float] = {}

    def say(self, text: str) -> None:
        print(f"{self.prefix}: {text}", file=self.out, flush=True)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        self.say(f"{name} ...")
        try:
            yield
        finally:
            self.times[name] = elapsed = time.monotonic() - start
            self.say(f"{name}: {elapsed:.1f} s")


def cache_dir(kind: str, key: str) -> Path:
    return cache_root() / f"{kind}-{key}"


def cached(kind: str, key: str, build: Callable[[Path], None], steps: Steps) -> Path:
    """The folder :func:`cache_dir` names, found, or made by ``build(folder)`` in a
    temporary folder renamed to it once the build returned."""
    final = cache_dir(kind, key)
    if final.is_dir():
        steps.say(f"{kind} cached in {final}")
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{kind}-{key}-", dir=final.parent))
    try:
        build(work)
        work.rename(final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return final
