"""``shuffler stop``: the service's stop from a terminal, mid-pass, on a real service."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.served import SHUFFLER, Service


def stop_cli(socket, tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SHUFFLER_CHECK_SCHEMAS": "1",
           "SHUFFLER_CONFIG": str(tmp_path / "none.toml"),
           "SHUFFLER_STATE_DIR": str(tmp_path / "cli-state")}
    (tmp_path / "none.toml").write_text("")
    return subprocess.run([SHUFFLER, "--socket", str(socket), *args, "stop"], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def interval_service(tmp_path_factory) -> Iterator[Service]:
    """One service at the machine's own card rate, its page on (``svc.port``), for the
    tests that use it: none changes its config or socket, and each stops the pass or
    hand it starts."""
    from tests.mqtt_broker import free_port

    port = free_port()
    svc = Service(tmp_path_factory.mktemp("interval"), f"[web]\nenabled = true\nport = {port}\n",
                  speed=1.0).start()
    svc.port = port
    try:
        yield svc
    finally:
        svc.stop()


def test_stop_mid_pass_stops_it_and_a_second_stop_finds_nothing(interval_service, tmp_path):
    svc = interval_service
    dealing, answer = threading.Event(), {}

    def deal() -> None:
        client = svc.client()
        answer.update(client.request("pass", lambda ev: ev.get("event") == "card"
                                     and dealing.set(), cards=24))

    runner = threading.Thread(target=deal)
    runner.start()
    assert dealing.wait(30), "the pass never counted a card"
    first = stop_cli(svc.socket, tmp_path, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"schema": 1, "stopped": True}
    runner.join(30)
    report = answer["pass"]
    assert report["fault"]["kind"] == "stopped" and report["counted"] < 24, report
    again = stop_cli(svc.socket, tmp_path)
    assert (again.returncode, again.stdout.strip()) == (
        0, "nothing to stop: no pass or hand was running (the motor is off)")


def test_stop_without_a_service_says_so_exit_3(tmp_path):
    result = stop_cli(tmp_path / "absent.sock", tmp_path, "--json")
    assert result.returncode == 3, result
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "service_not_running" and "Ctrl-C" in error["message"]


#: a config broken on disk three ways after the service read it (issue 33)
BROKEN = {"toml": "[hand\ncards = 24\n",
          "pin_clash": "[pins]\ntouch = 17\nmotor = 17\n",
          "unknown_key": "[hand]\nbogus = 1\n"}


#: the config the deployed service starts on, and each test leaves on disk
GOOD = "[hand]\ncards = 24\n"


@pytest.fixture(scope="module")
def deployed_service(tmp_path_factory) -> Iterator[tuple[Service, Path]]:
    """The deployed layout under a system root (the service and its system root): its
    config /etc/shuffler/config.toml (the service's and the CLI's), its socket
    /run/shuffler/shuffler.sock, at the machine's own card rate. The service reads its
    config once, at its start (and on SIGHUP, never sent here): a test breaks it on disk
    while a pass runs and mends it for the next."""
    folder = tmp_path_factory.mktemp("deployed")
    root = folder / "r"
    etc, run = root / "etc" / "shuffler", root / "run" / "shuffler"
    etc.mkdir(parents=True)
    run.mkdir(parents=True)
    svc = Service(folder, speed=1.0)
    svc.config, svc.socket = etc / "config.toml", run / "shuffler.sock"
    svc.config.write_text(GOOD)
    svc.start()
    try:
        yield svc, root
    finally:
        svc.stop()


#: every broken config, found through --socket or the system socket: the quick tier keeps
#: each config once and both ways of finding, the slow tier the rest
MID_PASS = [(broken, named) for broken in sorted(BROKEN) for named in (True, False)]
QUICK_MID_PASS = {(broken, i % 2 == 0) for i, broken in enumerate(sorted(BROKEN))}


@pytest.mark.parametrize(("broken", "named"), [
    pytest.param(*case, marks=() if case in QUICK_MID_PASS else pytest.mark.slow,
                 id=f"{case[0]}-{'socket' if case[1] else 'found'}") for case in MID_PASS])
def test_stop_with_the_config_broken_mid_pass_stops_it(deployed_service, tmp_path, broken,
                                                       named):
    """The deployed layout under a system root: /etc/shuffler/config.toml (the service's
    and the CLI's), the service on /run/shuffler/shuffler.sock; the config breaks while a
    pass runs. ``stop`` (with --socket, or finding the system socket) exits 0, with
    --json on stdout only, and no card falls after its answer: the motor is off."""
    svc, root = deployed_service
    try:
        env = {**os.environ, "SHUFFLER_SYSTEM_ROOT": str(root), "SHUFFLER_CHECK_SCHEMAS": "1",
               "SHUFFLER_STATE_DIR": str(tmp_path / "cli-state")}
        for name in ("SHUFFLER_CONFIG", "SHUFFLER_SOCKET", "XDG_RUNTIME_DIR"):
            env.pop(name, None)
        cards, answer = stop_mid(
            svc, [SHUFFLER, *(["--socket", str(svc.socket)] if named else []), "--json", "stop"],
            env, "pass", lambda: svc.config.write_text(BROKEN[broken]), cards=24)
    finally:
        svc.config.write_text(GOOD)
    result, answered = answer["cli"], answer["answered"]
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"schema": 1, "stopped": True}
    assert result.stderr == ""  # --json: stdout only
    report = answer["pass"]
    assert report["fault"]["kind"] == "stopped" and report["counted"] < 24, report
    assert len([t for t in cards if t > answered]) <= 1, "cards fell after the stop"


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_status_with_a_broken_config_asks_the_service(interval_service, tmp_path, broken):
    """The broken config's ``[service] socket`` is where the CLI asks (a file with a TOML
    error is scanned for its line); the dealer is told the config does not load, and
    with --json stderr stays clean (stdout holds the status)."""
    svc = interval_service
    config = tmp_path / "config.toml"
    config.write_text(BROKEN[broken] + f'[service]\nsocket = "{svc.socket}"\n')
    env = {**os.environ, "SHUFFLER_CONFIG": str(config),
           "SHUFFLER_STATE_DIR": str(tmp_path / "cli-state")}
    env.pop("SHUFFLER_SOCKET", None)
    for as_json in (True, False):
        result = subprocess.run([SHUFFLER, *(["--json"] if as_json else []), "status"],
                                env=env, capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 0, result.stderr
        if as_json:
            assert json.loads(result.stdout)["device"]["name"] == "simulated shuffler"
            assert result.stderr == ""
        else:
            assert "device: simulated shuffler" in result.stdout
            assert "the config does not load" in result.stderr


def test_status_in_process_with_a_broken_config_is_its_error(tmp_path):
    (tmp_path / "c.toml").write_text(BROKEN["unknown_key"])
    env = {**os.environ, "SHUFFLER_CONFIG": str(tmp_path / "c.toml"),
           "SHUFFLER_STATE_DIR": str(tmp_path / "state")}
    result = subprocess.run([SHUFFLER, "--no-service", "status"], env=env,
                            capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and "bogus: unknown key" in result.stderr, result
    assert "asking the service" not in result.stderr


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


#: each broken config found each of the four ways, with and without --socket (24 cases).
#: Without --socket the finding is the path (where the config is, and the socket in it);
#: with it the socket is the one named, whichever way the config is found. The quick tier
#: keeps the four findings without --socket, each config at least once, and one case with
#: --socket; the slow tier the rest
FINDINGS = [(broken, naming, with_socket) for broken in sorted(BROKEN) for naming in NAMINGS
            for with_socket in (False, True)]
QUICK_FINDINGS = {*((sorted(BROKEN)[i % len(BROKEN)], naming, False)
                    for i, naming in enumerate(NAMINGS)),
                  (sorted(BROKEN)[len(NAMINGS) % len(BROKEN)], NAMINGS[0], True)}


@pytest.mark.parametrize(("broken", "naming", "with_socket"), [
    pytest.param(*case, marks=() if case in QUICK_FINDINGS else pytest.mark.slow,
                 id=f"{case[0]}-{case[1]}-{'socket' if case[2] else 'found'}")
    for case in FINDINGS])
def test_stop_finds_the_service_through_any_broken_config_in_a_card_interval(
        interval_service, tmp_path, broken, naming, with_socket):
    """Issue 46: the config broken on disk (a TOML error, a pin clash, an unknown key),
    found each of the four ways, with and without --socket: ``stop`` exits 0, stops the
    pass that runs (at most the card in flight falls after its answer), prints what it
    always printed, keeps stderr clean, and imports neither click nor structlog nor the
    config's model on the way (the fast path: benchmarks/bench_stop.py times it)."""
    svc = interval_service
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
    cards, report = stop_mid(svc, [SHUFFLER, *args, *sock, "stop"], env)
    result, answered = report["cli"], report["answered"]
    assert result.returncode == 0, result.stderr
    assert result.stdout == "stopped: the motor is off\n"
    assert report["hand"]["fault"]["kind"] == "stopped"
    assert len([t for t in cards if t > answered]) <= 1, "cards fell after the stop"
    modules = imported_by(result.stderr)
    assert "shuffler_cli.quickstop" in modules
    assert not modules & {"click", "structlog", "shuffler.config"}
    assert [line for line in result.stderr.splitlines()
            if not line.startswith("import time:")] == []


def test_the_quick_tier_finds_the_service_every_way_through_every_broken_config():
    """The quick tier's cases above: every finding without --socket, every broken config,
    and --socket; the slow tier's the whole cross."""
    assert {n for _, n, w in QUICK_FINDINGS if not w} == set(NAMINGS)
    assert {b for b, _, _ in QUICK_FINDINGS} == set(BROKEN)
    assert any(w for _, _, w in QUICK_FINDINGS)
    assert len(FINDINGS) == len(set(FINDINGS)) == len(BROKEN) * len(NAMINGS) * 2


def stop_mid(svc: Service, command: list[str], env: dict[str, str], cmd: str = "hand",
             meanwhile: Callable[[], object] = lambda: None, **args: object):
    """``cmd`` (a one-pass hand) on the service; once a card has fallen, ``meanwhile()``,
    then ``command`` runs (if any). The times cards fell, and the request's answer with the CLI's
    result (``cli``) and the time it ended (``answered``)."""
    dealing, cards, report = threading.Event(), [], {}

    def on_event(event: dict) -> None:
        if event.get("event") == "card":
            cards.append(time.monotonic())
            dealing.set()

    def deal() -> None:
        report.update(svc.client().request(cmd, on_event, **(args or {"passes": 1})))

    runner = threading.Thread(target=deal)
    runner.start()
    try:
        assert dealing.wait(30), f"the {cmd} never counted a card"
        meanwhile()
        if command:
            report["cli"] = subprocess.run(command, env=env, capture_output=True, text=True,
                                           timeout=60, stdin=subprocess.DEVNULL)
            report["answered"] = time.monotonic()
    finally:
        runner.join(30)
    return cards, report


def test_the_pages_stop_stops_the_pass_at_once(interval_service):
    """The page's Stop (POST /api/stop, as the page sends it from loopback) is the
    socket's stop: answered once the motor is off, and no card after the card in flight."""
    import http.client

    svc, port = interval_service, interval_service.port

    def page_stop() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/api/stop", b"{}", {
            "Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}"})
        reply = conn.getresponse()
        answer["page"] = (reply.status, json.loads(reply.read()))
        answer["at"] = time.monotonic()
        conn.close()

    answer: dict = {}
    cards, report = stop_mid(svc, [], {}, meanwhile=page_stop)
    stopped = answer["at"]
    assert answer["page"] == (200, {"ok": True, "result": {"stopped": True}}), answer
    assert report["hand"]["fault"]["kind"] == "stopped", report
    assert len([t for t in cards if t > stopped]) <= 1, "cards fell after the page's stop"
