#!/usr/bin/python3
"""The image's first boot (docs/image.md): run by shuffler-firstboot.service with the
system's Python (no venv, standard library only), at the first boot and at any boot that
finds /boot/firmware/shuffler.toml, before the network, SSH, avahi and the shuffler
service start.

At the first boot: the root filesystem grown to the card. With the boot partition's
``shuffler.toml`` (written on a PC, as Raspberry Pi Imager writes its settings): the host
name, the Wi-Fi, the SSH keys and the shuffler's device, each optional. The whole file is
checked before anything is written (a bad file changes nothing); then it is deleted, so
no passphrase stays on the card (the Wi-Fi's is kept only as its WPA hash), and the
outcome, never a secret, is written to ``shuffler-firstboot.txt`` beside it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

BOOT = Path("/boot/firmware")
SETTINGS = "shuffler.toml"
OUTCOME = "shuffler-firstboot.txt"
#: the stamp of a first boot done (the root grown, the SSH host keys made)
DONE = Path("var/lib/shuffler-image/first-boot-done")
CONFIG = Path("etc/shuffler/config.toml")
WPA_CONF = Path("etc/wpa_supplicant/wpa_supplicant-wlan0.conf")
AUTHORIZED_KEYS = Path("root/.ssh/authorized_keys")
HOSTNAME_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
COUNTRY_RE = re.compile(r"[A-Z]{2}")
KEY_RE = re.compile(r"(ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)|"
                    r"sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/=]+( [^\n]*)?")
DEVICE_RE = re.compile(r"gpio|sim|serial:/dev/[A-Za-z0-9_./-]+")
KNOWN = {"": {"hostname", "wifi", "ssh", "shuffler"}, "wifi": {"ssid", "psk", "country"},
         "ssh": {"authorized_keys"}, "shuffler": {"device"}}


class SettingsError(ValueError):
    """The boot partition's file is not as docs/image.md describes; names the key."""


@dataclass
class Settings:
    hostname: str | None = None
    wifi: tuple[str, str, str] | None = None       # ssid, WPA hash of the passphrase, country
    keys: list[str] = field(default_factory=list)
    device: str | None = None


def _string(table: dict[str, object], name: str, where: str) -> str:
    value = table.get(name)
    if not isinstance(value, str):
        raise SettingsError(f"{where}{name}: must be a string (in quotes)")
    return value


def parse(text: str) -> Settings:
    """The settings in ``text`` (the boot partition's TOML), all checked: a
    :class:`SettingsError` names the first key that is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"not TOML: {exc}") from None
    for table, known in KNOWN.items():
        section = data if not table else data.get(table, {})
        if not isinstance(section, dict):
            raise SettingsError(f"{table}: must be a table ([{table}])")
        unknown = sorted(set(section) - known)
        if unknown:
            raise SettingsError(f"{table + '.' if table else ''}{unknown[0]}: unknown key "
                                f"(known: {', '.join(sorted(known))})")
    settings = Settings()
    if "hostname" in data:
        settings.hostname = _string(data, "hostname", "")
        if not HOSTNAME_RE.fullmatch(settings.hostname):
            raise SettingsError("hostname: letters a-z, digits and '-', 1 to 63, "
                                "not starting or ending with '-'")
    if "wifi" in data:
        wifi = data["wifi"]
        ssid, psk = _string(wifi, "ssid", "wifi."), _string(wifi, "psk", "wifi.")
        country = _string(wifi, "country", "wifi.")
        if not 1 <= len(ssid.encode()) <= 32 or any(c in ssid for c in '"\n\0'):
            raise SettingsError("wifi.ssid: 1 to 32 bytes, no quote, newline or NUL")
        if not (8 <= len(psk) <= 63 and psk.isascii() and psk.isprintable()):
            raise SettingsError("wifi.psk: the passphrase, 8 to 63 printable ASCII characters")
        if not COUNTRY_RE.fullmatch(country):
            raise SettingsError("wifi.country: the two capital letters of the country's "
                                "ISO code (GB, US, DE, ...): the radio's legal channels")
        hashed = hashlib.pbkdf2_hmac("sha1", psk.encode(), ssid.encode(), 4096, 32).hex()
        settings.wifi = (ssid, hashed, country)
    if "ssh" in data:
        keys = data["ssh"].get("authorized_keys")
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise SettingsError("ssh.authorized_keys: a list of public keys in quotes")
        for number, key in enumerate(keys, 1):
            if not KEY_RE.fullmatch(key.strip()):
                raise SettingsError(f"ssh.authorized_keys: key {number} is not an OpenSSH "
                                    "public key (ssh-ed25519 AAAA... you@pc)")
        settings.keys = [key.strip() for key in keys]
    if "shuffler" in data and "device" in data["shuffler"]:
        settings.device = _string(data["shuffler"], "device", "shuffler.")
        if not DEVICE_RE.fullmatch(settings.device):
            raise SettingsError('shuffler.device: "gpio", "sim" or "serial:/dev/<port>"')
    return settings


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    """``text`` to ``path`` whole or not at all (a temporary file renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.new")
    temporary.write_text(text)
    temporary.chmod(mode)
    os.replace(temporary, path)


def write(settings: Settings, root: Path) -> list[str]:
    """The files ``settings`` make, under ``root`` (``/`` on the machine); what was set,
    for the outcome file (no secret in it)."""
    done = []
    if settings.hostname:
        _write(root / "etc/hostname", settings.hostname + "\n")
        _write(root / "etc/hosts", f"127.0.0.1\tlocalhost\n127.0.1.1\t{settings.hostname}\n"
               "::1\t\tlocalhost ip6-localhost ip6-loopback\n")
        done.append(f"host name {settings.hostname} ({settings.hostname}.local)")
    if settings.wifi:
        ssid, hashed, country = settings.wifi
        _write(root / WPA_CONF, f"ctrl_interface=DIR=/run/wpa_supplicant GROUP=netdev\n"
               f"country={country}\nnetwork={{\n\tssid=\"{ssid}\"\n\tpsk={hashed}\n}}\n",
               0o600)
        done.append(f"Wi-Fi {ssid!r} ({country})")
    if settings.keys:
        (root / AUTHORIZED_KEYS).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write(root / AUTHORIZED_KEYS, "".join(key + "\n" for key in settings.keys), 0o600)
        done.append(f"SSH for root with {len(settings.keys)} key(s)")
    if settings.device:
        config = root / CONFIG
        text = config.read_text()
        line = f'device = "{settings.device}"'
        text, count = re.subn(r"(?m)^device\s*=.*$", line, text, count=1)
        _write(config, text if count else f"{line}\n{text}")
        done.append(f"device {settings.device}")
    return done


def _run(*command: str) -> None:
    subprocess.run(command, check=True)


def grow_root() -> str:
    """The root partition grown to the end of the card, then its ext4."""
    source = subprocess.run(["findmnt", "-no", "SOURCE", "/"], check=True,
                            capture_output=True, text=True).stdout.strip()
    name = Path(source).name
    disk = "/dev/" + Path(os.path.realpath(f"/sys/class/block/{name}/..")).name
    number = (Path("/sys/class/block") / name / "partition").read_text().strip()
    subprocess.run(["sfdisk", "--quiet", "--no-reread", "--no-tell-kernel", "-N", number, disk],
                   input=", +\n", text=True, check=True)
    _run("partx", "-u", "--nr", number, disk)
    _run("resize2fs", source)
    return f"root filesystem grown to the card ({source})"


def system(settings: Settings) -> None:
    """What the running system does with ``settings``: the host name now, the services."""
    if settings.hostname:
        _run("hostname", settings.hostname)
    if settings.wifi:
        _run("systemctl", "enable", "wpa_supplicant@wlan0.service")
        _run("systemctl", "start", "--no-block", "wpa_supplicant@wlan0.service")
    if settings.keys:
        _run("ssh-keygen", "-A")
        _run("systemctl", "enable", "ssh.service")
        _run("systemctl", "start", "--no-block", "ssh.service")
    if settings.device:
        _run("systemctl", "try-restart", "--no-block", "shuffler.service")


def main(boot: Path = BOOT, root: Path = Path("/")) -> int:
    lines: list[str] = []
    status = 0
    if not (root / DONE).exists():
        try:
            lines.append(grow_root())
        except (OSError, subprocess.CalledProcessError) as exc:
            lines.append(f"root filesystem not grown: {exc}")
        (root / DONE).parent.mkdir(parents=True, exist_ok=True)
        (root / DONE).touch()
    file = boot / SETTINGS
    if file.exists():
        try:
            settings = parse(file.read_text(errors="replace"))
        except SettingsError as exc:
            lines.append(f"{file}: {exc}: nothing applied, the file deleted (its secrets "
                         "with it); fix it and put it back")
            status = 2
        else:
            lines += write(settings, root)
            system(settings)
        file.unlink()
    if lines:
        _write(boot / OUTCOME, "".join(line + "\n" for line in lines))
        print("\n".join(lines), file=sys.stderr if status else sys.stdout)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
