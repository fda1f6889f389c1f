"""``shuffler-setup`` (cli/installer/) under a throwaway root, by its console script: what
install makes, install twice, the drop-ins following the config, uninstall leaving the
tree as it found it, and the adversarial cases (an install cut off half-way, a config
that does not parse, uninstall twice, a drop-in of the admin's own, an edited unit, a
corrupt backup, a restore while the machine is held). The same command under real
systemd: tests/vm/test_vm_walk.py."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from shuffler.store.lock import MachineLock
from tests.test_deploy_page import system_files

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="the installer's useradd --root needs root")

SETUP = str(Path(sys.executable).parent / "shuffler-setup")
UNIT = "etc/systemd/system/shuffler.service"
DROPINS = "etc/systemd/system/shuffler.service.d"
CONFIG = "etc/shuffler/config.toml"


def setup(root: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([SETUP, "--root", str(root), *args], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == code, done
    assert "Traceback" not in done.stderr, done.stderr
    return done


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` with what it is (a file's hash, a link's target)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A Debian system's account files, nothing else (as a bare tree)."""
    root = tmp_path / "root"
    system_files(root, rpi_os=False)
    return root


def groups(root: Path) -> dict[str, list[str]]:
    lines = (root / "etc/group").read_text().splitlines()
    return {ln.split(":")[0]: [m for m in ln.split(":")[3].split(",") if m] for ln in lines}


def set_config(root: Path, extra: str) -> None:
    path = root / CONFIG
    path.write_text(path.read_text() + "\n" + extra + "\n")


def test_install_makes_what_the_service_needs_and_twice_changes_nothing(root):
    said = setup(root, "install").stdout
    assert "made the account shuffler" in said
    assert {"gpio", "spi", "shuffler"} <= set(groups(root))
    assert all("shuffler" in groups(root)[g] for g in ("gpio", "spi", "dialout"))
    unit = (root / UNIT).read_text()
    assert f"ExecStart={sys.prefix}/bin/shuffler --config" in unit  # its own venv
    assert "RestartPreventExitStatus=2" in unit
    assert (root / "etc/udev/rules.d/60-gpiochip.rules").exists()  # not Raspberry Pi OS
    assert (root / CONFIG).read_bytes() == (Path("docs/deploy/config.toml")).read_bytes()
    state = root / "var/lib/shuffler"
    assert oct(state.stat().st_mode & 0o777) == "0o750"
    assert state.stat().st_uid == int((root / "etc/passwd").read_text().split(
        "shuffler:x:")[1].split(":")[0])
    assert os.readlink(root / "etc/systemd/system/multi-user.target.wants/shuffler.service") \
        == "/etc/systemd/system/shuffler.service"
    assert "no running systemd here" in said
    assert not (root / DROPINS).exists()  # the page and MQTT are off
    before = tree(root)
    again = setup(root, "install").stdout
    assert "nothing to change" in again
    assert tree(root) == before
    status = setup(root, "status").stdout
    assert "status: as installed" in status and "edited" not in status


def test_the_drop_ins_follow_the_config(root):
    setup(root, "install")
    set_config(root, "[web]\nenabled = true")
    said = setup(root, "install").stdout
    assert "installed /etc/systemd/system/shuffler.service.d/network.conf" in said
    assert (root / DROPINS / "network.conf").read_bytes() == \
        Path("docs/deploy/network.conf").read_bytes()
    text = (root / CONFIG).read_text().replace("[web]\nenabled = true", "[web]\nenabled = false")
    text = text.replace('device = "gpio"', 'device = "serial:/dev/shuffler"')
    (root / CONFIG).write_text(text)
    said = setup(root, "install").stdout
    assert "removed /etc/systemd/system/shuffler.service.d/network.conf" in said
    assert not (root / DROPINS / "network.conf").exists()
    assert (root / DROPINS / "serial.conf").exists()


def test_uninstall_leaves_the_tree_as_it_was_but_the_config_and_state_then_purge(root):
    before = tree(root)
    setup(root, "install")
    (root / "var/lib/shuffler/score.json").write_text("{}")
    said = setup(root, "uninstall").stdout
    assert "kept /var/lib/shuffler/" in said and "kept /etc/shuffler/config.toml" in said
    left = set(tree(root)) - set(before)
    assert left == {"etc/shuffler", CONFIG, "var", "var/lib", "var/lib/shuffler",
                    "var/lib/shuffler/score.json", "var/lib/shuffler-setup",
                    "var/lib/shuffler-setup/manifest.json"}, left
    assert "shuffler" not in groups(root) and "gpio" not in groups(root)
    setup(root, "uninstall", "--purge")
    assert tree(root).keys() == before.keys()
    twice = setup(root, "uninstall").stdout  # uninstall twice: nothing to do, exit 0
    assert "nothing installed" in twice


def test_an_install_cut_off_half_way_is_finished_by_running_it_again(root):
    before = tree(root)
    (root / "etc/udev").write_text("in the way")  # the rules cannot be written
    cut = setup(root, "install", code=3)
    assert "etc/udev" in cut.stderr and "run it again" in cut.stderr, cut.stderr
    assert (root / UNIT).exists()  # made before the failure, and recorded
    (root / "etc/udev").unlink()
    setup(root, "install")
    assert (root / "etc/udev/rules.d/99-shuffler.rules").exists()
    assert "nothing to change" in setup(root, "install").stdout
    setup(root, "uninstall", "--purge")
    assert tree(root).keys() == before.keys()  # everything the cut-off run made, too


def test_a_config_that_does_not_parse_is_named_and_nothing_changes(root):
    (root / "etc/shuffler").mkdir()
    (root / CONFIG).write_text("[web\nenabled = true\n")
    before = tree(root)
    refused = setup(root, "install", code=2)
    assert str(root / CONFIG) in refused.stderr, refused.stderr
    assert tree(root) == before


def test_an_admins_drop_in_is_never_removed_and_an_edited_unit_kept_until_upgrade(root):
    (root / DROPINS).mkdir(parents=True)
    (root / DROPINS / "mine.conf").write_text("[Service]\nNice=5\n")
    (root / DROPINS / "network.conf").write_text("# my own network settings\n")
    setup(root, "install")
    set_config(root, "[mqtt]\nhost = \"broker.local\"")
    said = setup(root, "install").stdout
    assert "kept /etc/systemd/system/shuffler.service.d/network.conf: a drop-in of your own" \
        in said
    assert (root / DROPINS / "network.conf").read_text() == "# my own network settings\n"
    (root / UNIT).write_text((root / UNIT).read_text() + "# edited\n")
    assert "kept /etc/systemd/system/shuffler.service: edited" in setup(root, "install").stdout
    status = setup(root, "status", code=3).stdout
    assert "edited since installed: /etc/systemd/system/shuffler.service" in status
    assert "updated /etc/systemd/system/shuffler.service" in setup(root, "upgrade").stdout
    assert "# edited" not in (root / UNIT).read_text()
    setup(root, "uninstall", "--purge")
    assert sorted(p.name for p in (root / DROPINS).iterdir()) == ["mine.conf", "network.conf"]
    assert not (root / UNIT).exists()


def test_backup_and_restore_carry_the_state_whole(root, tmp_path):
    setup(root, "install")
    state = root / "var/lib/shuffler"
    (state / "score.json").write_text('{"score": [3, 5]}')
    (state / "pairing").mkdir()
    (state / "pairing" / "tokens.json").write_text("[]")
    backup = tmp_path / "state.tar.gz"
    assert "backed up 2 file(s)" in setup(root, "backup", str(backup)).stdout
    (state / "score.json").write_text('{"score": [0, 0]}')
    (state / "new.json").write_text("{}")
    setup(root, "restore", str(backup))
    assert (state / "score.json").read_text() == '{"score": [3, 5]}'
    assert not (state / "new.json").exists()
    assert (state / "pairing" / "tokens.json").read_text() == "[]"
    assert oct(state.stat().st_mode & 0o777) == "0o750"


def corrupt_backups(good: bytes) -> dict[str, bytes]:
    """A truncated file, a member changed after the index, a path escaping the folder, an
    index of the wrong shape (refused by a check, not an assert: ``python -O`` drops those)."""
    def remade(change) -> bytes:
        out = io.BytesIO()
        with tarfile.open(fileobj=io.BytesIO(good), mode="r:gz") as src, \
                tarfile.open(fileobj=out, mode="w:gz") as dst:
            for member in src.getmembers():
                data = src.extractfile(member).read()
                member, data = change(member, data)
                member.size = len(data)
                dst.addfile(member, io.BytesIO(data))
        return out.getvalue()

    def tamper(member, data):
        return member, (b'{"score": [9, 9]}' if member.name == "state/score.json" else data)

    def escape(member, data):
        if member.name == "state/score.json":
            member.name = "state/../../etc/evil.json"
        return member, data

    def index_as(text: bytes):
        def change(member, data):
            ours = member.isfile() and member.name == "shuffler-backup.json"
            return member, (text if ours else data)
        return change

    return {"truncated": good[: len(good) // 2], "tampered": remade(tamper),
            "escaping": remade(escape), "not a tar": gzip.compress(b"hello"),
            "index a list": remade(index_as(b"[1, 2]")),
            "index entry not an object": remade(index_as(
                b'{"format": "shuffler-backup/1", "files": {"score.json": "abc"}}'))}


def test_a_corrupt_backup_is_refused_and_the_state_untouched(root, tmp_path):
    setup(root, "install")
    state = root / "var/lib/shuffler"
    (state / "score.json").write_text('{"score": [3, 5]}')
    good = tmp_path / "good.tar.gz"
    setup(root, "backup", str(good))
    (state / "score.json").write_text('{"score": [4, 4]}')
    before = tree(root)
    for why, data in corrupt_backups(good.read_bytes()).items():
        bad = tmp_path / f"{why}.tar.gz"
        bad.write_bytes(data)
        refused = setup(root, "restore", str(bad), code=2)
        assert "not a usable shuffler backup" in refused.stderr, (why, refused.stderr)
        assert "nothing was changed" in refused.stderr
        assert tree(root) == before, why
    assert not (tmp_path / "etc").exists()


def test_restore_is_refused_while_the_service_holds_the_machine(root, tmp_path):
    setup(root, "install")
    backup = tmp_path / "b.tar.gz"
    setup(root, "backup", str(backup))
    held = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from shuffler.store.lock import MachineLock; "
        f"MachineLock({str(root / 'var/lib/shuffler')!r}).acquire('shuffler serve'); "
        "print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout.readline().strip() == "held"
        refused = setup(root, "restore", str(backup), code=3)
        assert "systemctl stop shuffler" in refused.stderr, refused.stderr
    finally:
        held.kill()
        held.wait()
    MachineLock(root / "var/lib/shuffler").acquire("check").release()  # free again
    setup(root, "restore", str(backup))


def test_every_command_has_help_naming_the_exit_codes(root):
    for command in ("install", "upgrade", "uninstall", "status", "backup", "restore"):
        shown = setup(root, command, "--help").stdout
        assert "Exit codes: 0" in shown, command
    assert "Usage" in setup(root, "frobnicate", code=2).stderr
    missing = setup(root, "restore", str(root / "nowhere.tar.gz"), code=2)
    assert "nowhere.tar.gz" in missing.stderr


def test_the_manifest_names_only_what_it_made(root):
    (root / "etc/group").write_text((root / "etc/group").read_text() + "gpio:x:990:\n")
    setup(root, "install")
    made = json.loads((root / "var/lib/shuffler-setup/manifest.json").read_text())["made"]
    keys = {entry["key"] for entry in made}
    assert "group:spi" in keys and "group:gpio" not in keys  # gpio was there already
    setup(root, "uninstall", "--purge")
    assert "gpio" in groups(root) and "spi" not in groups(root)
