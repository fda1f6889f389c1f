"""Options where a person types them: after the command, from the environment, -V,
``python -m shuffler``, colour; and one owner of the machine."""

from __future__ import annotations

import ast
import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import shuffler as shuffler_package
from shuffler.store.lock import MachineLock
from shuffler_cli.main import COMMANDS, cli

FAST = ["--sim-speed", "1000000"]


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    # no service: none at the default socket (no socket is named, or its absence is an error)
    return {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_CONFIG": "",
            "XDG_RUNTIME_DIR": str(tmp_path / "run")}


def invoke(env: dict[str, str], *args: str):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def shuffler(env: dict[str, str], *args: str, timeout: float = 60):
    return subprocess.run([sys.executable, "-m", "shuffler", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=timeout)


def test_global_options_work_after_the_command(env):
    after = invoke(env, "status", "--json", "--sim-speed", "1000000")
    assert after.exit_code == 0, after.output
    assert json.loads(after.stdout)["device"]["kind"] == "sim"
    hand = invoke(env, "hand", "--passes", "2", "--json", "--sim-fault=jam:13")
    assert hand.exit_code == 3 and json.loads(hand.stdout)["hand"]["fault"]["kind"] == "jam"


def test_a_command_option_value_is_never_taken_for_a_global_option(env, tmp_path,
                                                                  monkeypatch):
    # "--json" here is the file name --orders writes, not the global flag
    monkeypatch.chdir(tmp_path)
    result = invoke(env, "simulate", "--trials", "10", "--seed", "1", "--orders", "--json")
    assert result.exit_code == 0, result.output
    assert not result.stdout.startswith("{") and (tmp_path / "--json").is_file()


@pytest.mark.parametrize("argv, hoisted", [
    (["hand", "--json", "--passes", "2"], ["--json", "hand", "--passes", "2"]),
    (["hand", "--passes", "2", "--sim-speed", "9", "-vv"],
     ["--sim-speed", "9", "-vv", "hand", "--passes", "2"]),
    (["hand", "--sim-speed=9", "--", "--json"], ["--sim-speed=9", "hand", "--", "--json"]),
    (["--json", "status", "--sim-speed"], ["--json", "--sim-speed", "status"]),  # no value
    (["simulate", "--orders", "--json"], ["simulate", "--orders", "--json"]),  # its value
    (["--sim-speed"], ["--sim-speed"]),  # a value missing before any command: as typed
    (["--json", "--", "hand"], ["--json", "--", "hand"]),
    (["nosuch", "--json", "-x"], ["--json", "nosuch", "-x"]),
])
def test_global_options_are_moved_in_front_of_the_command_and_nothing_else(argv, hoisted):
    from shuffler_cli.main import cli

    assert cli.hoist_global_options(click.Context(cli), argv) == hoisted  # type: ignore[attr-defined]


def test_every_option_reads_its_environment_variable(env):
    result = invoke({**env, "SHUFFLER_DEVICE": "sim-gpio", "SHUFFLER_JSON": "1",
                     "SHUFFLER_SIM_SPEED": "1000000"}, "status")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["device"]["kind"] == "sim-gpio"
    hand = invoke({**env, "SHUFFLER_HAND_PASSES": "2", "SHUFFLER_JSON": "1"}, *FAST, "hand")
    assert len(json.loads(hand.stdout)["hand"]["pass_reports"]) == 2


def test_help_shows_every_environment_variable_and_lists_commands_in_order(env):
    text = invoke(env, "--help").stdout
    for var in ("SHUFFLER_DEVICE", "SHUFFLER_CONFIG", "SHUFFLER_STATE_DIR", "SHUFFLER_SOCKET",
                "SHUFFLER_JSON", "SHUFFLER_SIM_FAULT", "SHUFFLER_NO_SERVICE"):
        assert var in text
    listed = [line.split()[0] for line in text.split("Commands:")[1].splitlines()[1:]
              if line.startswith("  ") and line.split() and line.split()[0] in COMMANDS]
    assert listed == list(COMMANDS)
    assert "SHUFFLER_HAND_PASSES" in invoke(env, "hand", "--help").stdout


def test_help_imports_no_command_module():
    code = ("import sys; from shuffler_cli.main import cli\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('shuffler', "
            "'shuffler_cli', 'hardware_sim', 'firmware_bridge')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60).stdout.strip().splitlines()[-1]
    # the registry alone (its names, for --device), and none of our backends (a backend
    # package installed beside is imported to say its usage: its own modules are not ours)
    assert out == ("['shuffler', 'shuffler.constants', 'shuffler.device', "
                   "'shuffler.device.registry', 'shuffler.errors', 'shuffler.limits', "
                   "'shuffler_cli', 'shuffler_cli.main', 'shuffler_cli.options']")


#: what ``status`` on the simulator has no use for: the logging library (nothing is
#: logged), exact fractions, the plan source and the pass engine (no pass runs), the
#: config parser (no config file), the service and its faces, the other backends, the
#: schema checker
NOT_FOR_STATUS = {"structlog", "logging", "fractions", "decimal", "secrets", "tomllib",
                  "socket", "tempfile", "subprocess", "http.server", "jsonschema", "gpiozero",
                  "serial", "firmware_bridge", "shuffler.core.mixing", "shuffler.core.stats",
                  "shuffler.control.session", "shuffler.service.loop", "shuffler.service.client",
                  "shuffler.service.listening", "shuffler.service.connections",
                  "shuffler.service.protocol", "shuffler.service.systemd", "shuffler.service.hub",
                  "shuffler.faces.web",
                  "shuffler.faces.web_limits", "shuffler.faces.pairing",
                  "shuffler.faces.telemetry", "shuffler.gpio.device", "shuffler.schemas",
                  "shuffler.device.engine",
                  "hardware_sim.bench", "hardware_sim.gpio_rig", "hardware_sim.virtual_mcu",
                  "hardware_sim.study"}


def test_status_imports_only_what_it_needs(env):
    """Start-up (issue 13): what ``shuffler --json status`` loads, in a fresh interpreter.
    benchmarks/bench_startup.py times it; this keeps the heavy modules out of it."""
    code = ("import contextlib, io, sys; from shuffler_cli.main import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    try:\n        main(['--json', 'status'])\n"
            "    except SystemExit as e:\n        code = e.code\n"
            "print(code); print(out.getvalue().strip()); print(sorted(sys.modules))")
    environ = {**os.environ, **env}
    environ.pop("SHUFFLER_CHECK_SCHEMAS", None)  # checking the JSON loads jsonschema
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, timeout=60)
    code_line, status, modules = proc.stdout.strip().splitlines()[-3:]
    assert code_line == "0", proc.stderr
    assert json.loads(status)["device"]["kind"] == "sim"
    loaded = set(ast.literal_eval(modules))
    assert {"shuffler.control.controller", "hardware_sim.device"} <= loaded  # it opened the device
    assert sorted(NOT_FOR_STATUS & loaded) == []


def test_version_and_python_dash_m(env):
    from tests.test_version import LINE

    said = invoke(env, "-V").stdout.strip()
    match = LINE.fullmatch(said)
    assert match and match["release"] == shuffler_package.__version__, said
    proc = shuffler(env, "--version")
    again = LINE.fullmatch(proc.stdout.strip())
    assert proc.returncode == 0 and again, proc.stdout + proc.stderr
    assert again["release"] == match["release"] and again["sha"] == match["sha"]


def test_usage_errors_with_json_are_json_on_stdout(env):
    result = invoke(env, "--json", "pass", "--cards", "0")
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "usage" and error["exit"] == 2 and "--cards" in error["message"]
    bad = invoke(env, "--config", "/no/such.toml", "--json", "status")
    assert bad.exit_code == 2 and json.loads(bad.stdout)["error"]["kind"] == "config"


def _on_a_terminal(env: dict[str, str], *args: str) -> str:
    """Run the CLI with stdout and stderr on a pseudo-terminal; what it wrote there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "shuffler", *FAST, *args],
                            stdout=follower, stderr=follower, env={**os.environ, **env})
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(10)
    os.close(leader)
    return b"".join(chunks).decode()


def test_colour_on_a_terminal_unless_no_color(env):
    jammed = {**env, "SHUFFLER_SIM_FAULT": "jam:13"}
    assert "\x1b[" in _on_a_terminal(jammed, "pass")  # red "shuffler:" on a terminal
    plain = _on_a_terminal({**jammed, "NO_COLOR": "1"}, "pass")
    assert "Jam at card 13" in plain and "\x1b[3" not in plain and "\x1b[1" not in plain
    assert "\x1b[3" not in _on_a_terminal(jammed, "--no-color", "pass")


# -- one owner of the machine ----------------------------------------------------------

def test_a_stale_socket_is_not_running_exit_3_and_the_device_stays_shut(env, tmp_path):
    path = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the file stays, nobody listens: a service that died
    result = invoke({**env, "SHUFFLER_SOCKET": str(path)}, "--json", "status")
    assert result.exit_code == 3
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "service_not_running" and "not running" in error["message"]
    assert "--no-service" in error["message"] and result.stderr == ""  # said once
    assert not (tmp_path / "state" / "state.json").exists()  # nothing was opened
    assert invoke({**env, "SHUFFLER_SOCKET": str(path)}, "--no-service", "status").exit_code == 0


def test_a_socket_that_never_answers_is_not_answering_exit_3(env, tmp_path):
    path = tmp_path / "mute.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))
        s.listen(1)  # accepts, never greets
        start = time.monotonic()
        result = invoke({**env, "SHUFFLER_SOCKET": str(path)}, "--json", "status")
    assert result.exit_code == 3 and time.monotonic() - start < 10
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "service_not_answering" and "did not answer" in error["message"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may connect to any socket")
def test_a_refused_socket_names_the_group_to_join(env, tmp_path):
    path = tmp_path / "private.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))
        s.listen(1)
        path.chmod(0o600)
        os.chmod(path, 0)
        result = invoke({**env, "SHUFFLER_SOCKET": str(path)}, "status")
    assert result.exit_code == 3 and "permission denied" in result.stderr
    assert "join the group" in result.stderr


def test_a_refused_socket_as_root_is_shown_by_the_client_message(tmp_path, monkeypatch):
    """Root passes permission checks, so the refusal itself is simulated at connect()."""
    from shuffler.service import client as client_mod

    path = tmp_path / "private.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))

        def refuse(self, address):
            raise PermissionError(13, "Permission denied", address)

        monkeypatch.setattr(client_mod.socket.socket, "connect", refuse)
        with pytest.raises(client_mod.ServiceUnreachableError) as info:
            client_mod.ServiceClient.reach(path)
    assert info.value.kind == "service_permission" and info.value.exit_code == 3
    assert "join the group" in str(info.value)


def test_a_held_lock_refuses_a_second_driver_with_exit_3(env, tmp_path):
    lock = MachineLock(tmp_path / "state").acquire("shuffler serve")
    try:
        result = invoke(env, *FAST, "--json", "--no-service", "pass")
    finally:
        lock.release()
    assert result.exit_code == 3
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "busy" and f"shuffler serve (pid {os.getpid()})" in error["message"]
    assert invoke(env, *FAST, "pass").exit_code == 0  # free again


@pytest.mark.slow
def test_two_clis_never_drive_one_device_at_once(env, tmp_path):
    """Two hands started together on one state folder: one runs, the other is refused
    at once with exit 3; the audit log shows passes of one hand only, never interleaved."""
    slow = {**env, "SHUFFLER_SIM_SPEED": "10"}
    procs = [subprocess.Popen([sys.executable, "-m", "shuffler", "--json", "hand", "--passes",
                               "6"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **slow}) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 3], outs
    refused = next(json.loads(o) for (o, _), p in zip(outs, procs, strict=True)
                   if p.returncode == 3)
    assert refused["error"]["kind"] == "busy"
    # the holder is named by its command, not by the global option typed first
    assert "shuffler hand (pid" in refused["error"]["message"], refused
    audit = [json.loads(line) for line in
             (tmp_path / "state" / "audit.jsonl").read_text().splitlines()]
    assert [e["pass"] for e in audit] == [1, 2, 3, 4, 5, 6]


def test_a_bad_state_folder_is_exit_2_named(env):
    result = invoke(env, *FAST, "--state-dir", "/proc/x", "pass")
    assert result.exit_code == 2 and "/proc/x" in result.stderr


@pytest.mark.parametrize(("args", "option"), [
    (["--sim-fault", "jam:²", "pass"], "--sim-fault"),
    (["--sim-fault", "jam:99", "pass"], "--sim-fault"),
    (["--sim-speed", "nan", "pass"], "--sim-speed"),
    (["--sim-speed", "inf", "pass"], "--sim-speed"),
    (["mixing", "--target", "nan"], "--target"),
    (["simulate", "--trials", "10", "--orders", "/proc/x/orders.txt"], "--orders"),
    (["--state-dir", "a\0b", "status"], "--state-dir"),
    (["--socket", "/tmp/" + "s" * 5000, "status"], "--socket"),
    (["--config", "x\0y", "status"], "--config"),
])
def test_bad_option_values_are_exit_2_naming_the_option(env, args, option):
    result = invoke(env, *args)
    assert result.exit_code == 2, result.output
    assert option in result.stderr


@pytest.mark.parametrize("command", [["pass"], ["hand", "--passes", "2"], ["battery"],
                                     ["mixing", "--passes", "3", "--trials", "10"],
                                     ["simulate", "--trials", "10"]])
def test_one_card_works_everywhere_it_makes_sense(env, command):
    result = invoke(env, *FAST, command[0], "--cards", "1", *command[1:])
    assert result.exit_code == 0, result.output


def test_constants_kept_in_step_with_the_core():
    from shuffler.device import registry
    from shuffler_cli import options

    assert options.DEFAULT_SIM_SPEED == registry.DEFAULT_SIM_SPEED


def test_the_lock_names_the_command_that_holds_it(env, tmp_path, monkeypatch):
    """The holder recorded for the next one's "busy" message is the command, even when
    global options come first."""
    from shuffler_cli import app as app_mod

    seen: list[str] = []
    real = app_mod.App.lock

    def lock(self, **kw):
        real(self, **kw)
        seen.append((tmp_path / "state" / "machine.lock").read_text())

    monkeypatch.setattr(app_mod.App, "lock", lock)
    assert invoke(env, "--json", *FAST, "--no-service", "pass").exit_code == 0
    assert invoke(env, "--no-service", "battery", "--json").exit_code == 0
    assert [s.split(" (pid")[0] for s in seen] == ["shuffler pass", "shuffler battery"]


def test_the_lock_file_lives_in_the_state_folder(tmp_path):
    with MachineLock(tmp_path) as lock:
        assert lock.held and "pid" in (Path(tmp_path) / "machine.lock").read_text()
