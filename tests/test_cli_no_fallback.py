"""A CLI that never silently falls back (issue 35): a socket the user named that is not
there is an error, never a hand run on the simulator instead; the simulator's options
beside a service are refused, never run in-process in the user's own state folder."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from shuffler_cli.main import cli
from tests.served import Service


def invoke(env: dict[str, str | None], *args: str):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


@pytest.fixture
def env(tmp_path) -> dict[str, str | None]:
    """No --config, no user config (an empty XDG_CONFIG_HOME), no socket named: the
    default socket is the user's runtime folder's, where nothing listens."""
    return {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_CONFIG": None,
            "SHUFFLER_SOCKET": None, "SHUFFLER_NO_SERVICE": None, "SHUFFLER_SIM_SPEED": None,
            "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_RUNTIME_DIR": str(tmp_path / "run")}


def nothing_ran(tmp_path) -> bool:
    """No hand, no pass, no latched fault: the state folder was never made."""
    return not (tmp_path / "state").exists()


@pytest.mark.parametrize("command", [["hand"], ["pass"], ["status"], ["battery"], ["clear"],
                                     ["score"]])
def test_a_named_socket_that_is_missing_is_exit_3_saying_so(env, tmp_path, command):
    missing = tmp_path / "nowhere.sock"
    result = invoke(env, "--socket", str(missing), *command)
    assert result.exit_code == 3, result.output
    assert str(missing) in result.stderr and "--socket names it" in result.stderr
    assert "--no-service" in result.stderr and result.stdout == ""
    assert nothing_ran(tmp_path)


def test_a_missing_socket_named_in_the_environment_names_the_variable(env, tmp_path):
    missing = tmp_path / "nowhere.sock"
    result = invoke({**env, "SHUFFLER_SOCKET": str(missing)}, "--json", "hand")
    assert result.exit_code == 3
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "service_not_running" and error["exit"] == 3
    assert "SHUFFLER_SOCKET names it" in error["message"] and result.stderr == ""
    assert nothing_ran(tmp_path)


@pytest.mark.parametrize("where", ["--config", "user's config"])
def test_a_missing_socket_named_in_the_users_config_is_exit_3_naming_the_file(
        env, tmp_path, where):
    missing = tmp_path / "nowhere.sock"
    config = (tmp_path / "c.toml" if where == "--config"
              else tmp_path / "cfg" / "shuffler" / "config.toml")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[service]\nsocket = "{missing}"\n')
    args = ["--config", str(config)] if where == "--config" else []
    result = invoke(env, *args, "hand")
    assert result.exit_code == 3, result.output
    assert f"[service] socket in {config} names it" in result.stderr
    assert nothing_ran(tmp_path)


def test_no_socket_named_and_none_there_still_runs_the_simulator_here(env, tmp_path):
    result = invoke(env, "--sim-speed", "1000000", "--json", "pass")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["pass"]["counted"] == 24


def test_no_service_beside_a_missing_named_socket_runs_here(env, tmp_path):
    result = invoke(env, "--socket", str(tmp_path / "nowhere.sock"), "--no-service",
                    "--sim-speed", "1000000", "--sim-fault", "jam:5", "--json", "pass")
    assert result.exit_code == 3  # the jam asked for, in-process, as --no-service says
    assert json.loads(result.stdout)["error"]["kind"] == "jam"


@pytest.mark.parametrize("option", [["--sim-fault", "jam:5:1"], ["--sim-speed", "3"],
                                    ["--sim-seed", "4"], ["--sim-dealer", "taller"],
                                    ["--sim-uptime", "5000"]])
def test_a_simulator_option_beside_a_named_socket_is_refused_naming_both(env, tmp_path,
                                                                        option):
    result = invoke(env, "--socket", str(tmp_path / "nowhere.sock"), *option, "pass")
    assert result.exit_code == 2, result.output
    assert f"{option[0]}: for a simulator this command runs itself" in result.stderr
    assert "--socket names the service's socket" in result.stderr
    assert "--no-service" in result.stderr
    assert nothing_ran(tmp_path)  # no jam latched in the user's own state folder


def test_a_simulator_option_from_the_environment_is_named_as_its_variable(env, tmp_path):
    result = invoke({**env, "SHUFFLER_SIM_FAULT": "jam:5"}, "--socket",
                    str(tmp_path / "nowhere.sock"), "--json", "pass")
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "usage" and error["message"].startswith("SHUFFLER_SIM_FAULT: ")


def test_a_simulator_option_beside_a_running_service_is_refused(env, tmp_path):
    svc = Service(tmp_path, speed=1e6).start()
    try:
        found = {**env, "XDG_RUNTIME_DIR": str(svc.folder)}  # its socket is the default one
        result = invoke(found, "--sim-fault", "jam:5", "--sim-speed", "1000000", "hand")
        assert result.exit_code == 2, result.output
        assert (f"--sim-speed and --sim-fault: for a simulator this command runs itself, "
                f"but a service answers at {svc.socket}") in result.stderr
        assert nothing_ran(tmp_path)
        named = invoke({**env, "SHUFFLER_SOCKET": str(svc.socket)}, "--sim-seed", "3",
                       "--json", "status")
        assert named.exit_code == 2 and "SHUFFLER_SOCKET names" in named.stdout
        served = invoke({**env, "SHUFFLER_SOCKET": str(svc.socket)}, "--json", "status")
        assert served.exit_code == 0 and json.loads(served.stdout)["counters"]["passes"] == 0
        here = invoke(found, "--no-service", "--sim-seed", "3", "--json", "status")
        assert here.exit_code == 0, here.output  # in-process, as asked
    finally:
        svc.stop()


def test_the_refusals_advice_beside_a_running_service_works_as_written(env, tmp_path):
    """Issue 46: beside a running service that holds the machine's lock in the state
    folder this command would use, plain --no-service is refused in turn (busy); the
    refusal names what runs: --no-service with a state folder of its own."""
    svc = Service(tmp_path, speed=1e6).start()
    try:
        shared = {**env, "XDG_RUNTIME_DIR": str(svc.folder), "SHUFFLER_STATE_DIR": str(svc.state)}
        refused = invoke(shared, "--sim-fault", "jam:5", "--json", "pass")
        assert refused.exit_code == 2
        message = json.loads(refused.stdout)["error"]["message"]
        assert "pass --no-service --state-dir DIR to run the simulator here" in message
        busy = invoke(shared, "--no-service", "--sim-fault", "jam:5", "--json", "pass")
        assert json.loads(busy.stdout)["error"]["kind"] == "busy"  # why the advice says more
        own = invoke(shared, "--no-service", "--state-dir", str(tmp_path / "own"),
                     "--sim-fault", "jam:5", "--sim-speed", "1000000", "--json", "pass")
        assert own.exit_code == 3 and json.loads(own.stdout)["error"]["kind"] == "jam"
    finally:
        svc.stop()
