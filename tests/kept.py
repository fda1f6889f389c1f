"""The tests' pin factory, ``GPIOZERO_PIN_FACTORY=shuffler-kept``, for the processes a
test starts: mock pins whose levels outlive the process (``hardware_sim.kept_pins``),
as a Pi kernel keeps a released line at its last level.

gpiozero finds a factory by name only through the entry points of the group
``gpiozero_pin_factories``, so the name must be registered, but not by every install
of the project: ``tests/pins/`` holds a distribution's metadata (no code) whose
``entry_points.txt`` names it, and a process with that folder on ``PYTHONPATH`` (what
:func:`kept_pins_env` gives) sees it, as it would see an installed package.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: the folder put on PYTHONPATH: it holds shuffler_test_pins-0.dist-info
PINS = Path(__file__).resolve().parent / "pins"
FACTORY = "shuffler-kept"


def kept_pins_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the kept pin factory chosen and registered (PYTHONPATH)."""
    path = [str(PINS), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "GPIOZERO_PIN_FACTORY": FACTORY, "PYTHONPATH": os.pathsep.join(path)}
