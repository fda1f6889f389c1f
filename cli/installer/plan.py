"""What an install puts in place, from the config and the machine: no change made here.

The files are the package's own (``shuffler_cli/deploy``, a link to docs/deploy in a
checkout), the unit's ``ExecStart`` and ``ExecStopPost`` pointed at the venv this
installer runs from (``sys.prefix``: ``/opt/shuffler/.venv`` on the page's install).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from shuffler.config import Config

SHIPPED_VENV = "/opt/shuffler/.venv"
UNIT = "/etc/systemd/system/shuffler.service"
DROPINS = "/etc/systemd/system/shuffler.service.d"
WANTS = "/etc/systemd/system/multi-user.target.wants/shuffler.service"
CONFIG = "/etc/shuffler/config.toml"
STATE = "/var/lib/shuffler"
RULES = "/etc/udev/rules.d"
BOOT_CONFIG = "/boot/firmware/config.txt"
SPI_LINE = "dtparam=spi=on"
#: the line the installer adds to config.txt ends with this, so only it is ever removed
SPI_MARK = "  # shuffler-setup: SPI for the battery monitor"
ACCOUNT = "shuffler"
#: the account's supplementary groups: gpio and spi are made where missing (plain Debian)
GROUPS = ("gpio", "spi", "dialout")
COMMANDS = ("shuffler", "shuffler-setup", "shuffler-safe")


@dataclass(frozen=True)
class File:
    path: str  # under the root
    data: bytes
    why: str
    #: the config: written only if absent, never replaced, kept by uninstall (--purge: gone)
    keep: bool = False


@dataclass(frozen=True)
class Plan:
    files: tuple[File, ...]
    links: dict[str, str]  # path -> target
    spi: bool  # the battery monitor is read over SPI
    #: drop-ins the installer may have made that this config does not call for
    unwanted: tuple[str, ...]


def shipped(name: str) -> bytes:
    return (resources.files("shuffler_cli") / "deploy" / name).read_bytes()


def venv(root: Path) -> str:
    """The venv this installer runs from, as the machine under ``root`` names it."""
    prefix = Path(sys.prefix)
    if root != Path("/") and prefix.is_relative_to(root):
        return "/" + str(prefix.relative_to(root))
    return str(prefix)


def make(config: Config, venv_path: str, *, rpi_os: bool, config_present: bool) -> Plan:
    bin_dir = f"{venv_path.rstrip('/')}/bin/"
    unit = shipped("shuffler.service").decode().replace(f"{SHIPPED_VENV}/bin/", bin_dir)
    files = [File(UNIT, unit.encode(), "the unit"),
             File(f"{RULES}/99-shuffler.rules", shipped("99-shuffler.rules"),
                  "the microcontroller's port as /dev/shuffler")]
    if not rpi_os:
        files.append(File(f"{RULES}/60-gpiochip.rules", shipped("60-gpiochip.rules"),
                          "the GPIO and SPI devices for the gpio and spi groups"))
    dropins = {"network.conf": (config.web.enabled or config.mqtt.enabled,
                                "the network, for [web] or [mqtt] in the config"),
               "serial.conf": (config.device.startswith("serial"),
                               "waits for the serial port (device = serial)")}
    for name, (wanted, why) in dropins.items():
        if wanted:
            files.append(File(f"{DROPINS}/{name}", shipped(name), why))
    if not config_present:
        files.append(File(CONFIG, shipped("config.toml"), "the config", keep=True))
    unwanted = tuple(f"{DROPINS}/{name}" for name, (wanted, _) in dropins.items() if not wanted)
    links = {f"/usr/local/bin/{name}": f"{bin_dir}{name}" for name in COMMANDS}
    links[WANTS] = UNIT
    spi = config.device == "gpio" and config.gpio.adc_channel is not None
    return Plan(tuple(files), links, spi, unwanted)
