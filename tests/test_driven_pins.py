"""``driven-pins.json`` (what ``shuffler-safe`` drives low after the service) lives in the
runtime folder, else in the state folder the command was given (``--state-dir``), never
the default one behind its back; ``shuffler-safe --state-dir`` finds it there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shuffler.gpio.safe_pins import DRIVEN, driven_pins_path
from tests.kept import kept_pins_env


def env_without_runtime(tmp: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "SHUFFLER_CONFIG": "", "XDG_STATE_HOME": str(tmp / "xdg-state"),
           "XDG_CONFIG_HOME": str(tmp / "config"), "SHUFFLER_KEPT_PINS": str(tmp / "pins.json")}
    for key in ("XDG_RUNTIME_DIR", "RUNTIME_DIRECTORY", "NOTIFY_SOCKET", "WATCHDOG_USEC",
                "GPIOZERO_PIN_FACTORY", "SHUFFLER_STATE_DIR"):
        env.pop(key, None)
    return {**env, **extra}


def test_the_path_follows_the_state_folder_given_when_no_runtime_folder_is_set(tmp_path,
                                                                              monkeypatch):
    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert driven_pins_path(tmp_path / "mine") == tmp_path / "mine" / DRIVEN
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert driven_pins_path(tmp_path / "mine") == tmp_path / "run" / "shuffler" / DRIVEN


def test_an_in_process_pass_records_its_pins_in_its_state_folder(run, tmp_path, monkeypatch):
    for key, value in env_without_runtime(tmp_path).items():
        monkeypatch.setenv(key, value)
    for key in ("XDG_RUNTIME_DIR", "RUNTIME_DIRECTORY"):
        monkeypatch.delenv(key, raising=False)
    out = run("--device", "sim-gpio", "pass")
    assert out.exit_code == 0, out.output
    assert json.loads((tmp_path / "state" / DRIVEN).read_text())["pins"]["motor"] == 12
    assert not (tmp_path / "xdg-state" / "shuffler" / DRIVEN).exists()


@pytest.mark.slow
def test_a_pass_with_a_state_dir_records_its_pins_there_and_the_backstop_finds_them(tmp_path):
    state = tmp_path / "elsewhere"
    env = env_without_runtime(tmp_path)
    out = subprocess.run([sys.executable, "-m", "shuffler", "--device", "sim-gpio",
                          "--sim-speed", "200", "--state-dir", str(state), "pass"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads((state / DRIVEN).read_text())["pins"]["motor"] == 12
    assert not (tmp_path / "xdg-state" / "shuffler" / DRIVEN).exists()
    safe = subprocess.run([sys.executable, "-m", "shuffler_cli.safe", "--state-dir",
                           str(state), "--device", "gpio"],
                          env=kept_pins_env(env),
                          capture_output=True, text=True, timeout=60)
    assert safe.returncode == 0, safe.stderr
    assert f"the pins the service drove ({state / DRIVEN})" in safe.stderr
