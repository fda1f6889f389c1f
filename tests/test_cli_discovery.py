"""The CLI finds the machine as a user expects: the deployed config under /etc, the
service's socket under /run (both under a throwaway root here: SHUFFLER_SYSTEM_ROOT)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.served import SHUFFLER, Service


def user_env(tmp_path: Path, root: Path) -> dict[str, str]:
    """A user's shell: no SHUFFLER_* option, their own home and runtime folders."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SHUFFLER_", "XDG_")) or k == "SHUFFLER_CHECK_SCHEMAS"}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return env | {"SHUFFLER_SYSTEM_ROOT": str(root), "HOME": str(home),
                  "XDG_RUNTIME_DIR": str(tmp_path / "xdg-run")}


def shuffler(env: dict[str, str], *args: str, timeout: float = 60):
    return subprocess.run([SHUFFLER, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def deploy_config(root: Path, text: str) -> Path:
    path = root / "etc" / "shuffler" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def user_state(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".local" / "state" / "shuffler"


def test_a_plain_status_answers_from_the_deployed_service(tmp_path):
    root = tmp_path / "root"
    service = Service(root / "run", name="shuffler", speed=1e6).start()
    try:
        assert service.socket == root / "run" / "shuffler" / "shuffler.sock"
        env = user_env(tmp_path, root)
        ran = shuffler(env, "pass")  # through the service: its counters, not ours
        assert ran.returncode == 0, ran.stderr
        result = shuffler(env, "--json", "status")
        assert result.returncode == 0, result.stderr
        status = json.loads(result.stdout)
        assert status["counters"]["passes"] == 1
        assert not user_state(tmp_path).exists()  # nothing opened in-process
        assert "simulator" not in result.stderr
    finally:
        service.stop()


def test_a_real_device_with_no_service_is_not_the_simulator(tmp_path):
    root = tmp_path / "root"
    deploy_config(root, 'device = "gpio"\n[service]\nsocket = "%s"\n'
                  % (root / "run" / "shuffler" / "shuffler.sock"))
    result = shuffler(user_env(tmp_path, root), "--json", "status")
    assert result.returncode == 3
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "service_not_running"
    assert "cannot reach the service" in error["message"]
    assert "systemctl start shuffler" in error["message"]
    assert not user_state(tmp_path).exists()


def test_the_default_socket_of_an_installed_service_is_where_it_looks(tmp_path):
    root = tmp_path / "root"
    deploy_config(root, 'device = "gpio"\n')  # no [service] socket: the documented default
    result = shuffler(user_env(tmp_path, root), "status")
    assert result.returncode == 3
    assert str(root / "run" / "shuffler" / "shuffler.sock") in result.stderr


def test_the_simulator_on_a_machine_with_a_service_says_so(tmp_path):
    root = tmp_path / "root"
    deploy_config(root, 'device = "sim"\n')
    result = shuffler(user_env(tmp_path, root), "--sim-speed", "1e6", "status")
    assert result.returncode == 0, result.stderr
    # --sim-speed is no simulator option that forbids the service: it looked, then said so
    assert "running the simulator here" in result.stderr
    assert str(user_state(tmp_path)) in result.stderr


def test_no_service_installed_is_the_quiet_simulator(tmp_path):
    result = shuffler(user_env(tmp_path, tmp_path / "empty-root"), "status")
    assert result.returncode == 0, result.stderr
    assert "simulator" not in result.stderr


def test_the_users_config_goes_over_the_machines(tmp_path):
    root = tmp_path / "root"
    deploy_config(root, 'device = "sim"\n[hand]\ncards = 32\nmode = "coin"\n')
    env = user_env(tmp_path, root)
    user = tmp_path / "home" / ".config" / "shuffler" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("[hand]\ncards = 28\n")
    result = shuffler(env, "--json", "--sim-speed", "1e6", "pass")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)["pass"]
    assert out["expected"] == 28  # the user's key over the machine's


@pytest.mark.parametrize("which", ["system", "user"])
def test_a_bad_discovered_config_names_its_own_file(tmp_path, which):
    root = tmp_path / "root"
    env = user_env(tmp_path, root)
    if which == "system":
        bad = deploy_config(root, "[hand]\npasses = 0\n")
    else:
        deploy_config(root, 'device = "sim"\n')
        bad = tmp_path / "home" / ".config" / "shuffler" / "config.toml"
        bad.parent.mkdir(parents=True)
        bad.write_text("[hand]\npasses = 0\n")
    result = shuffler(env, "status")
    assert result.returncode == 2
    assert f"{bad}: [hand] passes" in result.stderr


def test_serve_names_device_socket_page_and_state_at_start(tmp_path):
    service = Service(tmp_path, speed=1e6).start()
    try:
        deadline = time.monotonic() + 30  # the line follows the socket's first answer
        while "serving the" not in service.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        service.stop()
    log = service.log.read_text()
    line = next(json.loads(x) for x in log.splitlines() if '"serving"' in x)
    assert line["socket"] == str(service.socket)
    assert line["state"] == str(service.state)
    assert line["device"] == "sim"
    assert line["page"].startswith("off")
    assert f"serving the sim machine on {service.socket}" in log


def test_busy_advice_names_the_service_and_the_fix(tmp_path):
    service = Service(tmp_path, speed=1e6).start()
    try:
        env = user_env(tmp_path, tmp_path / "empty-root")
        result = shuffler(env, "--state-dir", str(service.state), "--no-service", "pass")
    finally:
        service.stop()
    assert result.returncode == 3
    assert f"shuffler serve on {service.socket}" in result.stderr
    assert "ask it through its socket" in result.stderr
    assert f"kill {service.proc.pid}" in result.stderr
