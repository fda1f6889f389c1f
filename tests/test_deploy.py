"""The shipped systemd unit and what the service tells journald."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shuffler.service.client import ServiceClient

pytestmark = pytest.mark.slow

DEPLOY = Path(__file__).resolve().parent.parent / "docs" / "deploy"
BIN = Path(sys.executable).parent


def unit_here(tmp: Path, drop_in: bool) -> Path:
    """The shipped unit with its commands pointing at this checkout's installed ones
    (verify checks that they exist), and the serial and network drop-ins if asked."""
    text = (DEPLOY / "shuffler.service").read_text().replace("/opt/shuffler/.venv/bin",
                                                               str(BIN))
    (tmp / "shuffler.service").write_text(text)
    if drop_in:
        (tmp / "shuffler.service.loop.d").mkdir()
        for name in ("serial.conf", "network.conf"):
            shutil.copy(DEPLOY / name, tmp / "shuffler.service.loop.d" / name)
    return tmp


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is missing: apt-get install systemd")
@pytest.mark.parametrize("drop_in", [False, True], ids=["gpio", "drop-ins"])
def test_systemd_analyze_verifies_the_unit(tmp_path, drop_in):
    if not (BIN / "shuffler-safe").exists():
        pytest.fail("shuffler-safe is not installed: pip install -e '.[test]' again")
    folder = unit_here(tmp_path, drop_in)
    env = {**os.environ, "SYSTEMD_UNIT_PATH": f"{folder}:"}  # ours first, then the system's
    out = subprocess.run(["systemd-analyze", "verify", "shuffler.service"], cwd=folder,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr


def section(text: str, name: str) -> str:
    return text.split(f"[{name}]", 1)[1].split("\n[", 1)[0]


def test_a_gpio_build_waits_for_no_device_and_lgpio_can_write():
    unit = (DEPLOY / "shuffler.service").read_text()
    lines = [ln for ln in section(unit, "Unit").splitlines() if not ln.startswith("#")]
    assert not any(".device" in ln for ln in lines)  # no 90 s wait for a serial port
    assert "Wants=dev-shuffler.device" in (DEPLOY / "serial.conf").read_text()
    service = section(unit, "Service")
    assert "WorkingDirectory=/run/shuffler" in service and "RuntimeDirectory=shuffler" in service
    assert "ExecStopPost=/opt/shuffler/.venv/bin/shuffler-safe" in service


def journal_run(tmp: Path, *args: str) -> list[str]:
    """Run the CLI with stderr on a file that JOURNAL_STREAM names, as systemd does."""
    log = tmp / "journal.txt"
    with log.open("w") as err:
        st = os.fstat(err.fileno())
        env = {**os.environ, "SHUFFLER_CONFIG": "", "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        subprocess.run([sys.executable, "-m", "shuffler", "--log-json", "--no-service",
                        "--state-dir", str(tmp / "s"), *args], stdout=subprocess.DEVNULL,
                       stderr=err, env=env, timeout=120)
    return log.read_text().splitlines()


def test_under_journald_each_pass_is_one_info_line_with_its_priority(tmp_path):
    lines = journal_run(tmp_path, "pass")
    passes = [ln for ln in lines if ln.startswith("<6>") and json.loads(ln[3:])["event"] == "pass"]
    assert len(passes) == 1
    assert json.loads(passes[0][3:])["counted"] == 24


def test_without_the_journal_the_cli_stays_quiet(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shuffler", "--no-service", "--state-dir",
                          str(tmp_path / "s"), "pass"], capture_output=True, text=True,
                         env={**os.environ, "SHUFFLER_CONFIG": "", "JOURNAL_STREAM": "1:2"},
                         timeout=120)
    assert out.returncode == 0 and '"pass"' not in out.stderr and "<6>" not in out.stderr


def test_the_service_logs_each_pass_at_info_and_a_fault_at_warning(tmp_path):
    sock, log = tmp_path / "s.sock", tmp_path / "journal.txt"
    with log.open("w") as err:
        st = os.fstat(err.fileno())
        env = {**os.environ, "SHUFFLER_CONFIG": "", "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        env.pop("NOTIFY_SOCKET", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "shuffler", "--log-json", "--sim-fault", "jam:5", "--state-dir",
             str(tmp_path / "s"), "--socket", str(sock), "serve"],
            stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        deadline = time.monotonic() + 30
        while (client := ServiceClient.connect(sock)) is None:
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.05)
        result = client.request("pass")
        assert result["pass"]["fault"]["kind"] == "jam"
        client.close()
    finally:
        proc.terminate()
        proc.wait(20)
    entries = [(int(ln[1]), json.loads(ln[3:])) for ln in log.read_text().splitlines()
               if ln.startswith("<")]
    assert [p for p, e in entries if e["event"] == "pass"] == [6]
    assert [p for p, e in entries if e["event"] == "fault"] == [4]
