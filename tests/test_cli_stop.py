"""``shuffler stop``: the service's stop from a terminal, mid-pass, on a real service."""

from __future__ import annotations

import json
import os
import subprocess
import threading

from tests.served import SHUFFLER, Service


def stop_cli(socket, tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SHUFFLER_CHECK_SCHEMAS": "1",
           "SHUFFLER_CONFIG": str(tmp_path / "none.toml"),
           "SHUFFLER_STATE_DIR": str(tmp_path / "cli-state")}
    (tmp_path / "none.toml").write_text("")
    return subprocess.run([SHUFFLER, "--socket", str(socket), *args, "stop"], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_stop_mid_pass_stops_it_and_a_second_stop_finds_nothing(tmp_path):
    svc = Service(tmp_path, speed=1.0).start()
    try:
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
    finally:
        svc.stop()


def test_stop_without_a_service_says_so_exit_3(tmp_path):
    result = stop_cli(tmp_path / "absent.sock", tmp_path, "--json")
    assert result.returncode == 3, result
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "service_not_running" and "Ctrl-C" in error["message"]
