"""``shuffler-safe``'s command line is ``shuffler``'s kind: click's help with each option's
variable, ``-h``, ``-V``/``--version`` in the same words, a usage error exit 2 naming the
option and no traceback. Run as the installed console script, as systemd runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import shuffler

BIN = Path(sys.executable).parent


def command(name: str, *args: str) -> subprocess.CompletedProcess:
    script = BIN / name
    if not script.exists():
        pytest.fail(f"{name} is not installed: pip install -e '.[test]' again")
    env = {**os.environ, "SHUFFLER_CONFIG": "", "COLUMNS": "100"}
    return subprocess.run([str(script), *args], capture_output=True, text=True, env=env,
                          timeout=60)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_the_version_is_said_as_shuffler_says_it(flag):
    safe, ours = command("shuffler-safe", flag), command("shuffler", flag)
    assert (safe.returncode, ours.returncode) == (0, 0), safe.stderr + ours.stderr
    assert ours.stdout.startswith(f"shuffler {shuffler.__version__}")  # then any commit
    assert safe.stdout == ours.stdout.replace("shuffler ", "shuffler-safe ", 1)
    assert safe.stderr == ""


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_the_help_is_in_shufflers_style(flag):
    safe, ours = command("shuffler-safe", flag), command("shuffler", flag)
    assert safe.returncode == 0 and safe.stderr == ""
    assert safe.stdout.startswith("Usage: shuffler-safe [OPTIONS]\n")
    assert ours.stdout.startswith("Usage: shuffler [OPTIONS]")
    for said in (safe.stdout, ours.stdout):
        assert "\nOptions:\n" in said and "-V, --version" in said and "-h, --help" in said
    flat = " ".join(safe.stdout.split())
    assert "[env var: SHUFFLER_CONFIG]" in flat and "[env var: SHUFFLER_STATE_DIR]" in flat
    assert "Exit codes: 0 done" in flat and "3 the pins cannot be opened" in flat


def test_a_usage_error_is_exit_2_naming_the_option():
    out = command("shuffler-safe", "--devcie", "gpio")
    assert out.returncode == 2 and out.stdout == ""
    assert "Error: No such option '--devcie'" in out.stderr and "--device" in out.stderr
    assert "Traceback" not in out.stderr
