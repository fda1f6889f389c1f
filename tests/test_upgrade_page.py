"""docs/deploy/README.md's "Upgrading" block: a backup of the state first, the same
``'.[pi]'`` as the install, the builder's own checkout (which ``/opt/shuffler`` was cloned
from) brought up to date before the service's checkout pulls from it, the service stopped
around the install, ``shuffler-setup upgrade`` after it. Run as written under a throwaway
root, after the installer's install: a new commit upstream is the version that runs
afterwards, its unit is installed, and the config (edited by the builder) and the state
are kept."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from shuffler import __version__ as shuffler_version
from tests.test_deploy_page import LINES, deploy_lines, system_files, under

ROOT = Path(__file__).resolve().parents[1]
UPGRADE = deploy_lines("upgrade")


def at(prefix: str) -> int:
    found = [i for i, ln in enumerate(UPGRADE) if ln.startswith(prefix)]
    assert len(found) == 1, f"one line starting {prefix!r} in the upgrade block"
    return found[0]


def test_the_upgrade_installs_as_the_install_did_from_an_updated_origin():
    install = next(ln for ln in LINES if ln.startswith("sudo .venv/bin/pip install"))
    assert UPGRADE[at("sudo .venv/bin/pip install")] == install  # '.[pi]', not '.'
    assert "'.[pi]'" in install
    assert at("git -C ~/shuffler pull") < at("sudo git pull")  # the origin first
    assert at("sudo shuffler-setup backup") < at("sudo systemctl stop shuffler") \
        < at("sudo .venv/bin/pip install") < at("sudo .venv/bin/shuffler-setup upgrade")
    assert not any("/etc/shuffler/config.toml" in ln for ln in UPGRADE)  # the builder's


def git(*args: str, cwd: Path) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"git {args}: {out.stderr}"
    return out.stdout


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout to clone")
@pytest.mark.skipif(os.geteuid() != 0, reason="the installer's useradd --root needs root")
def test_the_upgrade_block_runs_as_written_and_the_new_version_runs(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    upstream = tmp_path / "upstream"  # the project (or the builder's fork)
    git("clone", "-q", str(ROOT), str(upstream), cwd=tmp_path)
    home.mkdir()
    git("clone", "-q", str(upstream), str(home / "shuffler"), cwd=tmp_path)
    opt = root / "opt" / "shuffler"
    git("clone", "-q", str(home / "shuffler"), str(opt), cwd=tmp_path)  # as installed
    subprocess.run([sys.executable, "-m", "venv", str(opt / ".venv")], check=True, timeout=300)
    site = next((opt / ".venv" / "lib").glob("python3*")) / "site-packages"
    # the Pi's packages (lgpio and the rest) stand here for the venv's: no network
    (site / "tests-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [str(opt / ".venv/bin/pip"), "install", "-q", "--no-deps", "."]
    subprocess.run(pip, cwd=opt, check=True, capture_output=True, timeout=600)
    shuffler = opt / ".venv" / "bin" / "shuffler"
    system_files(root, rpi_os=False)
    env = {**os.environ, "SHUFFLER_SYSTEM_ROOT": str(root)}

    def setup(*args: str) -> str:
        done = subprocess.run([str(opt / ".venv/bin/shuffler-setup"), *args], env=env,
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done
        return done.stdout

    setup("install")
    config = root / "etc/shuffler/config.toml"
    config.write_text(config.read_text() + "\n[web]\nenabled = true\n")  # the builder's
    setup("install")  # the page on: the network drop-in
    score = root / "var/lib/shuffler/score.json"
    score.write_text('{"the": "state"}\n')
    kept = (config.read_bytes(), score.read_bytes())

    def version() -> str:
        return subprocess.run([str(shuffler), "--version"], capture_output=True, text=True,
                              check=True, cwd=tmp_path, timeout=60).stdout.strip()

    before = version()
    installed = git("rev-parse", "HEAD", cwd=opt).strip()
    # the install from the clone names its commit (recorded by the build: build_commit.py)
    assert before == f"shuffler {shuffler_version} (git {installed[:7]})"
    # a release upstream: a new version number
    init = upstream / "shuffler" / "__init__.py"
    init.write_text(init.read_text().replace(shuffler_version, "99.0.0"))
    unit = upstream / "docs/deploy/shuffler.service"  # and a changed unit, to install
    unit.write_text(unit.read_text().replace("TimeoutStopSec=10", "TimeoutStopSec=11"))
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "release",
        cwd=upstream)
    released = git("rev-parse", "HEAD", cwd=upstream).strip()
    after = f"shuffler 99.0.0 (git {released[:7]})"
    cwd = tmp_path
    for line in UPGRADE:
        words = [w.replace("~", str(home), 1) if w.startswith("~") else w
                 for w in shlex.split(line)]
        if words[0] == "sudo":
            words = words[1:]
        if words[0] == "systemctl":
            continue  # no systemd here: the order is checked above
        if words[0] in ("shuffler-setup", ".venv/bin/shuffler-setup"):
            said = setup(*words[1:])
            if words[1] == "upgrade":
                assert "updated /etc/systemd/system/shuffler.service" in said, said
            continue
        if words[0] == "cd":
            cwd = Path(under(root, words[1]))
        elif words[0] == "git":
            git(*words[1:], cwd=cwd)
        elif words[0] == ".venv/bin/pip":
            assert words[-1] == ".[pi]"  # lgpio and the hardware PWM exist on a Pi only
            subprocess.run(pip, cwd=cwd, check=True, capture_output=True, timeout=600)
        elif words[0] == "install":
            subprocess.run(["install", *words[1:-1], under(root, words[-1])], cwd=cwd,
                           check=True, timeout=60)
        elif words[0] == "shuffler":
            if words[1:] == ["--version"]:
                assert version() == after
            # `shuffler status` asks the service: tests/test_deploy_page.py runs that
        else:
            pytest.fail(f"a line of the upgrade block this test cannot follow: {line}")
    assert version() == after != before
    assert (root / "etc/systemd/system/shuffler.service").read_text() == \
        (opt / "docs/deploy/shuffler.service").read_text()
    assert (config.read_bytes(), score.read_bytes()) == kept
    assert (root / "etc/systemd/system/shuffler.service.d/network.conf").exists()
    backup = home / "shuffler-state-before-upgrade.tar.gz"
    assert backup.exists() and "score.json" in subprocess.run(
        ["tar", "tzf", str(backup)], capture_output=True, text=True, check=True).stdout
