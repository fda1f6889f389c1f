"""The CLI as a test runs it, in the test's own state folder with no config and no
service: in-process (:func:`invoke`, conftest's ``run``: the quick way), or as the
installed command in a process of its own (:func:`process`: for a test about the
process, its exit on a signal, its streams, its imports, a timeout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import Result

#: the installed command, beside the interpreter running the tests (the venv's)
SHUFFLER = str(Path(sys.executable).with_name("shuffler"))
#: the simulator at full speed
FAST = ("--sim-speed", "1000000")


def cli_env(folder: Path, state: str = "state") -> dict[str, str]:
    """A test's own state folder (``folder/state``; an absolute ``state`` as it is), no
    config and no service (a socket named that is not there would be an error)."""
    return {"SHUFFLER_STATE_DIR": str(folder / state), "SHUFFLER_CONFIG": "",
            "SHUFFLER_NO_SERVICE": "1"}


def invoke(folder: Path, *args: str, state: str = "state") -> Result:
    """``shuffler --sim-speed 1000000 ARGS`` in this process."""
    from click.testing import CliRunner

    from shuffler_cli.main import cli

    return CliRunner().invoke(cli, [*FAST, *args], env=cli_env(folder, state),
                              catch_exceptions=False)


def process(folder: Path, *args: str, state: str = "state", timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``shuffler --sim-speed 1000000 ARGS`` as a process of its own (no stdin)."""
    return subprocess.run([SHUFFLER, *FAST, *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False,
                          env={**os.environ, **cli_env(folder, state), **(env or {})})
