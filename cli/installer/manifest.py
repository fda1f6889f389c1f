"""The installer's record of what it made, under the root at
``/var/lib/shuffler-setup/manifest.json``: each entry is written *before* the thing it
names is made, so an install cut off half-way leaves a manifest that names everything
it may have made (``uninstall`` skips what is not there; ``install`` again finishes)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shuffler.errors import BadInputError
from shuffler.files import atomic_write

MANIFEST_PATH = "var/lib/shuffler-setup/manifest.json"
VERSION = 1


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Manifest:
    """Entries by key (``file:/etc/...``, ``user:shuffler``, ``line:/boot/...``), each a
    dict with ``kind`` and what undoing it needs."""

    path: Path
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the folders the manifest itself needed made (its own, /var/lib on a bare tree)
    folders: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, root: Path) -> Manifest:
        path = root / MANIFEST_PATH
        if not path.exists():
            return cls(path)
        try:
            doc = json.loads(path.read_text())
            entries = {str(e["key"]): dict(e) for e in doc["made"]}
            folders = [str(f) for f in doc.get("folders", [])]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise BadInputError(f"{path}: the installer's manifest cannot be read ({e}); "
                                f"move it away and run `shuffler-setup install` again") from None
        return cls(path, entries, folders)

    def note(self, key: str, **entry: Any) -> None:
        """Record ``key`` (before it is made) and save."""
        self.entries[key] = {"key": key, **entry}
        self.save()

    def forget(self, key: str) -> None:
        if self.entries.pop(key, None) is not None:
            self.save()

    def save(self) -> None:
        here = self.path.parent
        while not here.exists():
            self.folders.append(str(here))
            here = here.parent
        self.path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        body = {"version": VERSION, "made": list(self.entries.values()),
                "folders": self.folders}
        atomic_write(self.path, (json.dumps(body, indent=1) + "\n").encode(), mode=0o644)

    def remove(self) -> None:
        """The manifest and the folders made for it (those still empty)."""
        self.path.unlink(missing_ok=True)
        for folder in [str(self.path.parent), *self.folders]:
            with contextlib.suppress(OSError):
                Path(folder).rmdir()
