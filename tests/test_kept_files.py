"""Writes that keep what they replace (issue 35): every atomic replace of an existing
file keeps its mode, owner and group, so root rewriting the service's config (the
self-test's calibration) never locks the ``User=shuffler`` service out of it. Run as
root, the files are given to another uid first; as another user the owner cannot be
given, so the tests that need it skip."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from shuffler.files import atomic_write

#: an account that is not this process's: the service's, say
UID, GID = 4321, 4322
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="only root gives a file away")


def given_away(path: Path, text: str, mode: int = 0o604) -> Path:
    path.write_text(text)
    os.chown(path, UID, GID)
    os.chmod(path, mode)
    return path


def kept(path: Path, mode: int = 0o604) -> tuple[int, int, int]:
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


@root_only
def test_an_atomic_replace_keeps_the_old_files_mode_owner_and_group(tmp_path):
    path = given_away(tmp_path / "f", "old")
    atomic_write(path, b"new")
    assert path.read_bytes() == b"new"
    assert kept(path) == (UID, GID, 0o604)


def test_a_new_file_gets_the_writers_mode(tmp_path):
    atomic_write(tmp_path / "f", b"new", mode=0o600)
    atomic_write(tmp_path / "g", b"new")
    assert kept(tmp_path / "f")[1:] == (os.getegid(), 0o600)
    assert kept(tmp_path / "g")[2] == 0o640


def test_a_symlink_is_replaced_never_its_targets_mode_copied(tmp_path):
    target = tmp_path / "target"
    target.write_text("x")
    target.chmod(0o666)
    (tmp_path / "link").symlink_to(target)
    atomic_write(tmp_path / "link", b"new")
    assert kept(tmp_path / "link")[2] == 0o640 and target.read_text() == "x"


@root_only
def test_the_calibration_keeps_the_service_configs_owner_group_and_mode(tmp_path):
    """The deploy page's ``sudo shuffler selftest`` on /etc/shuffler/config.toml, which
    the service (``User=shuffler``) reads: after the calibration it still can."""
    from shuffler.config import load_config_text
    from shuffler_cli.selftest import write_calibration

    config = given_away(tmp_path / "config.toml", "# the service's\n[hand]\npasses = 5\n",
                        0o640)
    app = SimpleNamespace(options=SimpleNamespace(config_path=str(config)))
    assert write_calibration(app, 4.1234, simulated=False, ask=False) == str(config)
    assert load_config_text(config.read_text()).gpio.divider_ratio == pytest.approx(4.1234)
    assert kept(config) == (UID, GID, 0o640)


@root_only
def test_the_state_file_keeps_its_owner_group_and_mode(tmp_path):
    from shuffler.store.state import State, StateStore

    store = StateStore(tmp_path)
    store.save(State())
    given_away(store.path, store.path.read_text(), 0o660)
    store.save(State(passes=3))
    assert store.load().passes == 3
    assert kept(store.path) == (UID, GID, 0o660)


@root_only
def test_the_driven_pins_record_keeps_its_owner_group_and_mode(tmp_path):
    from shuffler.config import GpioConfig
    from shuffler.gpio.safe_pins import read_driven, record_driven

    path = given_away(tmp_path / "driven-pins.json", "{}\n", 0o644)
    record_driven(GpioConfig(), path)
    assert read_driven(path)
    assert kept(path) == (UID, GID, 0o644)


@root_only
def test_the_pairing_files_keep_the_service_accounts_owner_and_group(tmp_path):
    """``sudo shuffler pair`` in the service's state folder: the code and the phones stay
    the service account's (mode 0600: they hold secrets)."""
    from shuffler.faces.pairing import Pairing

    folder = tmp_path / "state"
    folder.mkdir()
    os.chown(folder, UID, GID)
    pairing = Pairing(folder)
    pairing.new_code()
    code = folder / "pairing-code"
    given_away(code, code.read_text(), 0o600)
    pairing.new_code()
    assert kept(code) == (UID, GID, 0o600)


@root_only
def test_the_simulators_orders_file_keeps_its_owner_group_and_mode(tmp_path):
    from click.testing import CliRunner

    from shuffler_cli.main import cli

    orders = given_away(tmp_path / "orders.txt", "", 0o664)
    result = CliRunner().invoke(cli, ["simulate", "--trials", "3", "--seed", "1",
                                      "--orders", str(orders)],
                                env={"SHUFFLER_CONFIG": "", "SHUFFLER_STATE_DIR":
                                     str(tmp_path / "state")})
    assert result.exit_code == 0, result.output
    assert len(orders.read_text().splitlines()) == 6  # each order, then its label
    assert kept(orders) == (UID, GID, 0o664)
