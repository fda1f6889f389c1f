"""docs/deploy/README.md's install block, run as written where it can run off a Pi.

Under a throwaway root R (with the account files a system has): the clone, the venv, the
pip install, then the installer (``shuffler-setup install`` with SHUFFLER_SYSTEM_ROOT=R:
the account in the unit's groups, made by useradd --root; the rules for that system; the
unit enabled; the config); the service starts as the unit's ExecStart says (on the
simulator: no pins here); then ``shuffler status`` with only PATH and
SHUFFLER_SYSTEM_ROOT=R answers from it. The Pi-only lines (apt, reboot) are checked for
their order: the installer and the reboot SPI needs before the self-test, the self-test
before the service owns the machine; on Debian lgpio from PyPI's wheel (no system site
packages). Both blocks, Raspberry Pi OS's (``sh deploy``) and Debian's
(``sh deploy-debian``), run the same way.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from shuffler.service.client import ServiceClient

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "deploy" / "README.md"


def deploy_lines(name: str = "deploy") -> list[str]:
    block = re.search(rf"^```sh {name}\n(.*?)^```", PAGE.read_text(), re.M | re.S)
    assert block, f"docs/deploy/README.md has no ```sh {name} block"
    return [ln.strip() for ln in block.group(1).splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]


LINES = deploy_lines()
DEBIAN = deploy_lines("deploy-debian")
BLOCKS = {"deploy": LINES, "deploy-debian": DEBIAN}


def index(prefix: str, lines: list[str] = LINES) -> int:
    found = [i for i, ln in enumerate(lines) if ln.startswith(prefix)]
    assert len(found) == 1, f"one line starting {prefix!r} in the deploy block"
    return found[0]


def test_the_steps_come_in_an_order_that_works():
    at = {p: index(p) for p in ("sudo .venv/bin/pip install", "sudo .venv/bin/shuffler-setup",
                                "sudo reboot", "sudo systemctl start shuffler",
                                "sudo shuffler status")}
    selftest = next(i for i, ln in enumerate(LINES) if ln.endswith(" selftest"))
    # the installer (SPI among it), the reboot SPI needs, the wiring, then the service
    assert list(at.values()) == sorted(at.values()), at
    assert at["sudo reboot"] < selftest < at["sudo systemctl start shuffler"]
    assert "python3-lgpio" in LINES[index("sudo apt install")]
    assert "'.[pi]'" in LINES[at["sudo .venv/bin/pip install"]]
    assert LINES[at["sudo .venv/bin/shuffler-setup"]] == "sudo .venv/bin/shuffler-setup install"
    assert "example.invalid" not in PAGE.read_text()
    # the block's own user is not yet in the group: its last status is root's
    assert LINES[-1] == "sudo shuffler status"


def test_debian_installs_by_the_installer_with_lgpio_from_pypi():
    at = {p: index(p, DEBIAN) for p in (
        "sudo python3 -m venv", "sudo .venv/bin/pip install", "sudo .venv/bin/shuffler-setup",
        "sudo systemctl start shuffler")}
    assert list(at.values()) == sorted(at.values()), at
    assert "--system-site-packages" not in DEBIAN[at["sudo python3 -m venv"]]  # lgpio: PyPI
    assert not any("python3-lgpio" in ln or "raspi-config" in ln for ln in DEBIAN)
    selftest = next(i for i, ln in enumerate(DEBIAN) if ln.endswith(" selftest"))
    assert at["sudo .venv/bin/shuffler-setup"] < selftest < at["sudo systemctl start shuffler"]
    rules = (ROOT / "docs" / "deploy" / "60-gpiochip.rules").read_text()
    assert 'SUBSYSTEM=="gpio", KERNEL=="gpiochip*", GROUP="gpio", MODE="0660"' in rules
    assert 'SUBSYSTEM=="spidev", KERNEL=="spidev*", GROUP="spi", MODE="0660"' in rules


def system_files(root: Path, rpi_os: bool) -> None:
    """The accounts' files a system has (root and dialout; Raspberry Pi OS's gpio and spi
    and /etc/rpi-issue), for the installer's useradd --root."""
    etc = root / "etc"
    etc.mkdir(parents=True)
    groups = ["root:x:0:", "dialout:x:20:"] + (["gpio:x:997:", "spi:x:999:"] if rpi_os else [])
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (etc / "group").write_text("\n".join(groups) + "\n")
    for name in ("shadow", "gshadow", "passwd-", "group-", "shadow-", "gshadow-", ".pwd.lock"):
        (etc / name).touch()
    if rpi_os:
        (etc / "rpi-issue").write_text("Raspberry Pi reference\n")


def installed_as_the_unit_needs(root: Path, rpi_os: bool) -> None:
    """The account in every group the unit names, the rules for this system, the unit
    enabled."""
    unit = (root / "etc/systemd/system/shuffler.service").read_text()
    groups = re.search(r"^SupplementaryGroups=(.*)$", unit, re.M).group(1).split()
    lines = (root / "etc/group").read_text().splitlines()
    members = {ln.split(":")[0]: ln.split(":")[3].split(",") for ln in lines}
    assert all("shuffler" in members[g] for g in groups), members
    rules = root / "etc/udev/rules.d"
    assert (rules / "99-shuffler.rules").read_text().count('"0403"') == 1  # the BOM's Nano
    assert (rules / "60-gpiochip.rules").exists() is not rpi_os  # Debian's, not the Pi's
    assert (root / "etc/systemd/system/multi-user.target.wants/shuffler.service").is_symlink()
    assert not (root / "etc/systemd/system/shuffler.service.d/network.conf").exists()


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{argv}\n{proc.stdout}\n{proc.stderr}"
    return proc


def under(root: Path, path: str) -> str:
    return str(root / path.lstrip("/")) if path.startswith("/") else path


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout to clone")
@pytest.mark.skipif(os.geteuid() != 0, reason="the installer's useradd --root needs root")
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_the_install_block_runs_as_written_under_a_throwaway_root(tmp_path, block):
    root = tmp_path / "root"
    home = tmp_path / "home"
    home.mkdir()
    cwd = tmp_path
    service = None
    system_files(root, rpi_os=block == "deploy")
    user_env = {"PATH": "/usr/bin:/bin", "HOME": str(home),
                "SHUFFLER_SYSTEM_ROOT": str(root), "LANG": "C.UTF-8",
                "SHUFFLER_CHECK_SCHEMAS": "1"}
    try:
        for line in BLOCKS[block]:
            words = shlex.split(line)
            if words[0] == "sudo":
                words = words[1:]
            if words[0] in ("apt", "reboot"):
                continue  # the Pi's own: checked for order above
            if words[:2] == ["git", "clone"]:
                assert words[2] == "~/shuffler"  # the builder's checkout: this one here
                run(["git", "clone", "-q", str(ROOT), under(root, words[3])], tmp_path)
            elif words[0] == "cd":
                cwd = Path(under(root, words[1]))
            elif words[:2] == ["python3", "-m"]:
                run([sys.executable, *words[1:]], cwd)
                # the Pi's site packages (lgpio from apt) stand here for this venv's, so
                # the install below needs no network
                site = next((cwd / ".venv" / "lib").glob("python3*")) / "site-packages"
                (site / "tests-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
            elif words[0] == ".venv/bin/pip":
                assert words[-1] == ".[pi]"  # lgpio and the hardware PWM exist on a Pi only
                run([".venv/bin/pip", "install", "-q", "--no-deps",
                     "."], cwd, timeout=600)
            elif words[0] == ".venv/bin/shuffler-setup":
                assert words[1:] == ["install"]
                said = run(words, cwd, env={**os.environ, "SHUFFLER_SYSTEM_ROOT": str(root)})
                assert "no running systemd here" in said.stdout, said.stdout
                installed_as_the_unit_needs(root, rpi_os=block == "deploy")
                rehome_config(root)
                # the links on PATH name the venv as the Pi sees it: here, under the root
                target = os.readlink(root / "usr/local/bin/shuffler")
                assert target == "/opt/shuffler/.venv/bin/shuffler"
                user_env["PATH"] = f"{under(root, os.path.dirname(target))}:/usr/bin:/bin"
            elif words[0] == "shuffler" and words[-1] == "selftest":
                assert words[1:3] == ["--device", "gpio"]  # here: the mock-pin rig
                run(["shuffler", "--device", "sim-gpio", *map_paths(root, words[3:-1]),
                     "selftest", "--yes"], cwd, env=user_env | {"XDG_STATE_HOME":
                                                                  str(tmp_path / "st")})
            elif words == ["systemctl", "start", "shuffler"]:
                service = start_service(root, tmp_path)
            elif words == ["shuffler", "status"]:
                assert service is not None
                status = run(["shuffler", "--json", "status"], home, env=user_env)
                answer = json.loads(status.stdout)
                assert answer["device"]["kind"] == "sim"  # the service's, started above
                assert not (home / ".local" / "state" / "shuffler").exists()
            else:
                pytest.fail(f"a line of the deploy block this test cannot follow: {line}")
        assert service is not None and (root / "usr/local/bin/shuffler").is_symlink()
    finally:
        if service is not None:
            service.terminate()
            service.wait(20)


def rehome_config(root: Path) -> None:
    """The installed config's own paths under the root; the service's account is this
    user (no `shuffler` account here), no group to give the socket."""
    path = root / "etc" / "shuffler" / "config.toml"
    text = path.read_text()
    text = re.sub(r'"(/(?:var|run)/[^"]+)"', lambda m: f'"{under(root, m.group(1))}"', text)
    text = re.sub(r'^user = "shuffler"', f'user = "{getpass.getuser()}"', text, flags=re.M)
    text = re.sub(r'^group = "shuffler".*$', "", text, flags=re.M)
    path.write_text(text)


def map_paths(root: Path, words: list[str]) -> list[str]:
    return [under(root, w) for w in words]


def start_service(root: Path, tmp: Path) -> subprocess.Popen:
    """The unit's ExecStart, its paths under the root, on the simulator."""
    unit = (root / "etc/systemd/system/shuffler.service").read_text()
    start = shlex.split(re.search(r"^ExecStart=(.*)$", unit, re.M).group(1))
    argv = [under(root, w) for w in start]
    argv[1:1] = ["--device", "sim", "--sim-speed", "1e6"]
    env = {**os.environ, "SHUFFLER_SYSTEM_ROOT": str(root)}
    env.pop("NOTIFY_SOCKET", None)
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=open(tmp / "svc.log", "wb"))  # noqa: SIM115
    sock = root / "run" / "shuffler" / "shuffler.sock"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, (tmp / "svc.log").read_text()
        if sock.exists() and (client := ServiceClient.connect(sock)) is not None:
            client.close()
            return proc
        time.sleep(0.1)
    proc.terminate()
    raise AssertionError("the service did not start: " + (tmp / "svc.log").read_text())
