"""The machine lock is keyed by the device too (#33): a second command with another
``--state-dir`` used to drive the same pins. Whoever opens a machine others can open
(the GPIO chip, a serial port, simulated pins kept in a file) holds a lock on what is
that machine, so the second is refused, exit 3, naming it."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shuffler.device.registry import device_identity
from shuffler.store.lock import DeviceLock, MachineBusyError
from tests.waiting import wait_for


def test_what_identifies_each_machine(tmp_path, monkeypatch):
    monkeypatch.delenv("SHUFFLER_KEPT_PINS", raising=False)
    assert device_identity("sim") is None and device_identity("sim-gpio") is None
    port = tmp_path / "ttyUSB0"
    port.write_text("")
    (tmp_path / "shuffler").symlink_to(port)  # a udev name is the same port
    assert device_identity(f"serial:{tmp_path / 'shuffler'}") == (port, False)
    monkeypatch.setenv("SHUFFLER_KEPT_PINS", str(tmp_path / "pins.json"))
    assert device_identity("sim-gpio") == (tmp_path / "pins.json.lock", True)


def test_a_backend_names_its_own_machine_and_the_registry_knows_none_by_name(tmp_path):
    """Each backend carries its identity (#37): the registry holds no list of names, so
    a backend from another package locks its own machine the same way."""
    from shuffler.device.registry import Backend, register, unregister

    node = tmp_path / "bench0"
    register(Backend("bench", lambda o: None, "a test bench",  # type: ignore[arg-type,return-value]
                     identity=lambda arg: (node, True)))
    register(Backend("plain", lambda o: None, "no identity", argument="PATH"))  # type: ignore[arg-type,return-value]
    try:
        assert device_identity("bench") == (node, True)
        assert device_identity(f"plain:{node}") == (node, False)  # the argument's path
    finally:
        unregister("bench")
        unregister("plain")


def test_a_second_holder_is_refused_and_a_missing_node_takes_no_lock(tmp_path):
    first = DeviceLock(tmp_path / "pins.lock", "sim-gpio", create=True).acquire()
    with pytest.raises(MachineBusyError, match="another process drives the sim-gpio machine"):
        DeviceLock(tmp_path / "pins.lock", "sim-gpio", create=True).acquire()
    first.release()
    DeviceLock(tmp_path / "pins.lock", "sim-gpio").acquire().release()
    assert not DeviceLock(tmp_path / "no-such-node", "gpio").acquire().held


def test_a_second_state_dir_cannot_drive_simulated_pins_another_command_drives(
        run, tmp_path, monkeypatch):
    kept = tmp_path / "pins.json"
    monkeypatch.setenv("SHUFFLER_KEPT_PINS", str(kept))
    holder = DeviceLock(Path(f"{kept}.lock"), "sim-gpio", create=True).acquire()
    try:
        out = run("--device", "sim-gpio", "pass", state="other")
    finally:
        holder.release()
    assert out.exit_code == 3
    assert "busy: another process drives the sim-gpio machine" in out.output
    assert run("--device", "sim-gpio", "pass", state="other").exit_code == 0


def test_a_serial_port_another_process_holds_is_refused(tmp_path):
    """A real pty as the port, held as the first command would hold it."""
    leader, follower = os.openpty()
    port = os.ttyname(follower)
    fd = os.open(port, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "shuffler", "--device", f"serial:{port}", "--state-dir",
             str(tmp_path / "b"), "pass"],
            env={**os.environ, "SHUFFLER_CONFIG": ""}, capture_output=True, text=True,
            timeout=60)
    finally:
        for f in (fd, follower, leader):
            os.close(f)
    assert out.returncode == 3, out.stderr
    assert f"another process drives the serial:{port} machine" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_two_real_commands_with_two_state_dirs_on_the_same_kept_pins(tmp_path):
    env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_KEPT_PINS": str(tmp_path / "p.json")}
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC"):
        env.pop(key, None)

    def command(state: str, speed: str) -> list[str]:
        return [sys.executable, "-m", "shuffler", "--device", "sim-gpio", "--sim-speed",
                speed, "--state-dir", str(tmp_path / state), "pass"]

    first = subprocess.Popen(command("a", "1"), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (tmp_path / "a" / "audit.jsonl").exists()
                 or (tmp_path / "a" / "state.json").exists(), what="the first pass")
        time.sleep(0.2)
        second = subprocess.run(command("b", "50"), env=env, capture_output=True, text=True,
                                timeout=60)
    finally:
        _, err = first.communicate(timeout=60)
    assert second.returncode == 3 and "drives the sim-gpio machine" in second.stderr
    assert first.returncode == 0, err


def test_the_registry_names_no_backend():
    """No ``if backend.name == "gpio"`` comes back into the registry: what a backend is
    lives beside it (its ``identity``), not in a list of names here."""
    import ast

    import shuffler.device.registry as registry
    from shuffler.device.registry import builtin

    names = {b.name for b in builtin()}
    tree = ast.parse(Path(registry.__file__).read_text())
    found = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names}
    assert not found, f"shuffler/device/registry.py names backends: {sorted(found)}"
