"""``shuffler stop`` through a config broken on disk, found each of the four ways (issue
46), on a real service. Apart from tests/test_cli_stop.py, whose helpers it uses: each
file holds a service dealing at real time for about twenty seconds, and the quick tier
runs a file on one worker (--dist loadfile), so the two run side by side."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.served import SHUFFLER, Service
from tests.test_cli_stop import BROKEN, stop_mid

#: the four ways a config is found (docs/config.md): the file's path for each, given the
#: test's folder, and what the environment or the command line says to find it
NAMINGS = ("--config", "SHUFFLER_CONFIG", "user's", "system's")


def named_config(tmp_path, naming: str) -> tuple[Path, list[str], dict[str, str]]:
    """Where a config named ``naming``'s way lives, the arguments and the environment."""
    root, home = tmp_path / "root", tmp_path / "home"
    env = {"SHUFFLER_SYSTEM_ROOT": str(root), "XDG_CONFIG_HOME": str(home),
           "XDG_RUNTIME_DIR": str(tmp_path / "runtime")}
    if naming == "system's":
        return root / "etc" / "shuffler" / "config.toml", [], env
    if naming == "user's":
        return home / "shuffler" / "config.toml", [], env
    path = tmp_path / "named.toml"
    if naming == "--config":
        return path, ["--config", str(path)], env
    return path, [], {**env, "SHUFFLER_CONFIG": str(path)}


def imported_by(stderr: str) -> set[str]:
    """The modules a process imported, from PYTHONPROFILEIMPORTTIME's lines."""
    return {line.split("|")[-1].strip() for line in stderr.splitlines()
            if line.startswith("import time:")}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_stop_finds_the_service_through_any_broken_config_in_a_card_interval(tmp_path, broken):
    """Issue 46: the config broken on disk (a TOML error, a pin clash, an unknown key),
    found each of the four ways, with and without --socket: ``stop`` exits 0, stops the
    pass that runs (at most the card in flight falls after its answer), prints what it
    always printed, keeps stderr clean, and imports neither click nor structlog nor the
    config's model on the way (the fast path: benchmarks/bench_stop.py times it)."""
    svc = Service(tmp_path, speed=1.0).start()
    try:
        for naming in NAMINGS:
            for with_socket in (False, True):
                where, args, env = named_config(tmp_path, naming)
                where.parent.mkdir(parents=True, exist_ok=True)
                where.write_text(BROKEN[broken] + f'[service]\nsocket = "{svc.socket}"\n')
                env = {**os.environ, "SHUFFLER_CHECK_SCHEMAS": "1",
                       "SHUFFLER_STATE_DIR": str(tmp_path / "cli-state"),
                       "PYTHONPROFILEIMPORTTIME": "1", **env}
                env.pop("SHUFFLER_SOCKET", None)
                if naming != "SHUFFLER_CONFIG":
                    env.pop("SHUFFLER_CONFIG", None)
                sock = ["--socket", str(svc.socket)] if with_socket else []
                case = f"{naming}, {'with' if with_socket else 'without'} --socket"
                cards, report = stop_mid(svc, [SHUFFLER, *args, *sock, "stop"], env)
                result, answered = report["cli"], report["answered"]
                assert result.returncode == 0, (case, result.stderr)
                assert result.stdout == "stopped: the motor is off\n", case
                assert report["hand"]["fault"]["kind"] == "stopped", case
                assert len([t for t in cards if t > answered]) <= 1, (case, "cards fell after")
                modules = imported_by(result.stderr)
                assert "shuffler_cli.quickstop" in modules, case
                assert not modules & {"click", "structlog", "shuffler.config"}, case
                assert [line for line in result.stderr.splitlines()
                        if not line.startswith("import time:")] == [], case
                where.unlink()
    finally:
        svc.stop()
