"""An older release's firmware, built from this checkout's history, for the tests that
hold the host to it (tests/test_firmware_duty.py, tests/test_firmware_last_stack.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hardware_sim.sim_avr import FIRMWARE_DIR


def firmware_before(marker: str, root: Path) -> Path:
    """The ELF of the firmware as it was just before the commit that first put ``marker``
    in firmware/protocol_gen.h, built under ``root`` (skips without the history)."""
    repo = FIRMWARE_DIR.resolve().parent
    base = next(iter(subprocess.run(
        ["git", "log", "--reverse", "--format=%H", "-S", marker, "--",
         "firmware/protocol_gen.h"], capture_output=True, text=True, check=False,
        cwd=repo).stdout.split()), "")
    if not base:
        pytest.skip(f"no git history here to build the firmware before {marker!r} from")
    tar = subprocess.run(["git", "archive", f"{base}~1", "firmware"], capture_output=True,
                         check=True, cwd=repo).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=tar, check=True)
    subprocess.run(["make", "-s", "-C", str(root / "firmware"), f"BUILD={root / 'build'}",
                    "all"], check=True, capture_output=True)
    return root / "build" / "shuffler.elf"
