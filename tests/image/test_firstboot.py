"""The image's first boot (image/firstboot.py) on the host: the boot partition's
shuffler.toml checked whole before anything is written, the files it makes, no secret
left behind; and the build's edit of the config (image/build.py web_on_lan). The boot
itself is tests/image/test_pi_image.py's."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest

from image import firstboot
from image.build import web_on_lan
from image.firstboot import SettingsError, parse, write

ROOT = Path(__file__).resolve().parents[2]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3Qga2V5 dealer@laptop"
GOOD = f"""hostname = "card-room"
[wifi]
ssid = "Card room"
psk = "correct horse battery staple"
country = "GB"
[ssh]
authorized_keys = ["{KEY}"]
[shuffler]
device = "sim"
"""


@pytest.fixture
def machine(tmp_path: Path) -> Path:
    """A root with the shipped config, as the image has it."""
    config = tmp_path / "root" / firstboot.CONFIG
    config.parent.mkdir(parents=True)
    config.write_text((ROOT / "docs/deploy/config.toml").read_text())
    return tmp_path / "root"


def test_a_whole_file_writes_each_setting_and_no_passphrase(machine: Path):
    done = write(parse(GOOD), machine)
    assert done == ["host name card-room (card-room.local)", "Wi-Fi 'Card room' (GB)",
                    "SSH for root with 1 key(s)", "device sim"]
    assert (machine / "etc/hostname").read_text() == "card-room\n"
    assert "127.0.1.1\tcard-room\n" in (machine / "etc/hosts").read_text()
    wpa = machine / firstboot.WPA_CONF
    assert wpa.stat().st_mode & 0o777 == 0o600
    psk = hashlib.pbkdf2_hmac("sha1", b"correct horse battery staple", b"Card room", 4096,
                              32).hex()
    assert wpa.read_text().endswith(f'country=GB\nnetwork={{\n\tssid="Card room"\n'
                                    f"\tpsk={psk}\n}}\n")
    for path in machine.rglob("*"):
        if path.is_file():
            assert "battery staple" not in path.read_text(), path
    keys = machine / firstboot.AUTHORIZED_KEYS
    assert keys.read_text() == KEY + "\n" and keys.stat().st_mode & 0o777 == 0o600
    assert keys.parent.stat().st_mode & 0o777 == 0o700
    shipped = tomllib.loads((ROOT / "docs/deploy/config.toml").read_text())
    assert tomllib.loads((machine / firstboot.CONFIG).read_text()) == {**shipped,
                                                                       "device": "sim"}


@pytest.mark.parametrize(("text", "named"), [
    ('hostname = "-bad"', "hostname:"),
    ('hostname = 7', "hostname: must be a string"),
    ('colour = "red"', "colour: unknown key"),
    ('[wifi]\nssid = "x"\npsk = "short"\ncountry = "GB"', "wifi.psk:"),
    ('[wifi]\nssid = "x"\npsk = "long enough"\ncountry = "gb"', "wifi.country:"),
    ('[wifi]\nssid = "a\\"b"\npsk = "long enough"\ncountry = "GB"', "wifi.ssid:"),
    ('[wifi]\nssid = "x"\ncountry = "GB"', "wifi.psk: must be a string"),
    ('[wifi]\nssid = "x"\npsk = "long enough"\ncountry = "GB"\nhidden = true',
     "wifi.hidden: unknown key"),
    ('[ssh]\nauthorized_keys = "ssh-ed25519 AAAA"', "ssh.authorized_keys: a list"),
    ('[ssh]\nauthorized_keys = ["ssh-ed25519 AAAA a\\nb"]', "key 1 is not an OpenSSH"),
    ('[shuffler]\ndevice = "serial:/dev/x; rm -rf /"', "shuffler.device:"),
    ('wifi = "Card room"', "wifi: must be a table"),
    ('[wifi\nssid = "x"', "not TOML"),
])
def test_a_bad_file_names_the_key_and_writes_nothing(machine: Path, text: str, named: str):
    before = {p: p.read_bytes() for p in machine.rglob("*") if p.is_file()}
    with pytest.raises(SettingsError, match=named.replace(".", r"\.")):
        write(parse(text), machine)
    assert {p: p.read_bytes() for p in machine.rglob("*") if p.is_file()} == before


def test_the_boot_file_is_deleted_even_when_bad_and_the_outcome_keeps_no_secret(
        machine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    boot = tmp_path / "boot"
    boot.mkdir()
    (machine / firstboot.DONE).parent.mkdir(parents=True)
    (machine / firstboot.DONE).touch()       # not the first boot: the root is not grown
    (boot / firstboot.SETTINGS).write_text(GOOD.replace('"GB"', '"Great Britain"'))
    assert firstboot.main(boot, machine) == 2
    assert not (boot / firstboot.SETTINGS).exists()
    outcome = (boot / firstboot.OUTCOME).read_text()
    assert "wifi.country:" in outcome and "nothing applied" in outcome
    assert "battery staple" not in outcome
    assert not (machine / firstboot.WPA_CONF).exists()
    ran: list[tuple[str, ...]] = []
    monkeypatch.setattr(firstboot, "_run", lambda *command: ran.append(command))
    (boot / firstboot.SETTINGS).write_text(GOOD)
    assert firstboot.main(boot, machine) == 0
    assert not (boot / firstboot.SETTINGS).exists()
    assert ("systemctl", "enable", "ssh.service") in ran and ("ssh-keygen", "-A") in ran
    assert ("hostname", "card-room") in ran


@pytest.mark.parametrize("config", [
    (ROOT / "docs/deploy/config.toml").read_text(),
    'device = "gpio"\n[web]\nenabled = false   # off\nport = 8081\n\n[mqtt]\nlan = false\n',
    '[web]\nlan = false',
])
def test_web_on_lan_turns_on_only_the_page_keys(config: str):
    edited = web_on_lan(config)
    before, after = tomllib.loads(config), tomllib.loads(edited)
    assert after["web"] == {**before.get("web", {}), "enabled": True, "lan": True}
    assert {k: v for k, v in after.items() if k != "web"} == \
        {k: v for k, v in before.items() if k != "web"}
    assert web_on_lan(edited) == edited
