"""A full or closed stdout/stderr ends the command with its documented code, never a
traceback (#22; cli/streams.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .cli import SHUFFLER


def run(tmp_path: Path, args: list[str], stdout, stderr) -> tuple[int, str]:
    """The command's exit code and what reached a readable stderr (if any)."""
    env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_STATE_DIR": str(tmp_path / "s")}
    log = tmp_path / "stderr"
    with open(log, "w") as spare:
        proc = subprocess.run([SHUFFLER, "--no-service", "--sim-speed", "1e6", *args],
                              stdout=stdout, stderr=spare if stderr == "log" else stderr,
                              env=env, timeout=60, close_fds=True)
    return proc.returncode, log.read_text()


@pytest.mark.parametrize(("args", "code"), [(["--json", "status"], 2), (["status"], 2),
                                            (["--sim-fault", "jam:13", "pass"], 3),
                                            (["--json", "--sim-fault", "jam:13", "pass"], 3)])
def test_a_full_stdout_is_a_clean_exit(tmp_path, args, code):
    with open("/dev/full", "w") as full:
        got, err = run(tmp_path, args, full, "log")
    assert got == code and "Traceback" not in err
    if code == 2:
        assert "cannot write the output: No space left on device" in err


def test_a_full_stderr_keeps_the_jam_exit_3(tmp_path):
    with open("/dev/full", "w") as full:
        got, _ = run(tmp_path, ["--sim-fault", "jam:13", "pass"], subprocess.DEVNULL, full)
    assert got == 3


def test_closed_stdout_and_stderr_are_clean_exits(tmp_path):
    env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_STATE_DIR": str(tmp_path / "s")}
    for command, code in (("status >&-", 2), ("--sim-fault jam:13 pass 2>&- >&-", 3),
                          ("status 2>&-", 0)):
        proc = subprocess.run(f"{SHUFFLER} --no-service --sim-speed 1e6 {command}", shell=True,
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == code, (command, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert not list((tmp_path / "s").glob("*.json.*"))


def test_a_reader_that_leaves_early_is_exit_0(tmp_path):
    env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_STATE_DIR": str(tmp_path / "s")}
    proc = subprocess.run(f"{SHUFFLER} --no-service --sim-speed 1e6 hand | head -c1 >/dev/null;"
                          " echo ${{PIPESTATUS[0]}}".replace("{{", "{").replace("}}", "}"),
                          shell=True, executable="/bin/bash", env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.strip() == "0" and "Traceback" not in proc.stderr
