"""``--log-json``: every line ``serve`` writes on stderr is JSON, from the first (the
deploy page's ``journalctl -u shuffler -o cat SYSLOG_IDENTIFIER=shuffler | jq .`` reads
the whole log; issue 35)."""

from __future__ import annotations

import json
import subprocess

from tests.served import SHUFFLER, Service


def every_line_json(text: str) -> list[dict]:
    lines = text.splitlines()
    assert lines, "nothing was logged"
    objects = []
    for number, line in enumerate(lines, 1):
        try:
            objects.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"line {number} is not JSON: {line!r}") from None
        assert isinstance(objects[-1], dict) and "event" in objects[-1], line
    return objects


def test_every_line_of_a_serve_run_is_json(tmp_path):
    """A fresh state folder, a hand that jams, a clear and a stop: the whole log."""
    svc = Service(tmp_path, speed=1e6, faults=("jam:5",)).start()
    try:
        client = svc.client()
        hand = client.request("hand", None, passes=2)
        assert hand["hand"]["fault"]["kind"] == "jam"
        client.request("clear")
        client.close()
    finally:
        assert svc.stop() == 0
    logged = every_line_json(svc.log.read_text())
    assert any(line["event"].startswith("serving the sim machine") for line in logged)


def test_a_serve_that_fails_at_start_logs_json_too(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[hand\n")
    proc = subprocess.run([SHUFFLER, "--log-json", "--config", str(bad), "--socket",
                           str(tmp_path / "s.sock"), "serve"], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    (line,) = every_line_json(proc.stderr)
    assert line["level"] == "error" and "not valid TOML" in line["event"]
    group = tmp_path / "group.toml"
    group.write_text('[service]\ngroup = "no-such-group-here"\n')
    proc = subprocess.run([SHUFFLER, "--log-json", "--config", str(group), "--state-dir",
                           str(tmp_path / "fresh"), "--socket", str(tmp_path / "s.sock"),
                           "serve"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert any("no group called" in line["event"] for line in every_line_json(proc.stderr))
