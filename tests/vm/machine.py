"""What the VM tier's session sets up in a booted guest, in order: the host's disk
mounted, the simulated GPIO chip made (the project's pin map on 54 lines, BCM number =
line offset, as a Pi's gpiochip0), and the project installed and started as
docs/deploy/README.md tells a builder (its Debian variant: the gpio group and udev
rule, lgpio from the wheel), with one test-only drop-in: gpiozero refuses to run off a
Pi unless /proc/cpuinfo names a Pi revision, so the unit sees a Pi 4's.

``python -m tests.vm`` runs it all once and prints each step's time.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from shuffler.pinmap import WIRES
from tests.vm.guest import DATA, Guest
from tests.vm.image import Steps
from tests.vm.kmod import Modules

ROOT = Path(__file__).resolve().parents[2]
#: the lines the chip has: a Pi's gpiochip0 (BCM 0-53)
LINES = 54
CHIP = "/sys/kernel/config/gpio-sim/shuffler"
#: the Pi the unit is told it runs on (a Pi 4 Model B 4 GB): gpiozero's lgpio factory
#: then opens gpiochip0, and checks the pins against the Pi 4's header
PI_REVISION = "c03114"
CPUINFO_DROPIN = """# test only (tests/vm/machine.py): the unit sees a Pi's /proc/cpuinfo
[Service]
BindReadOnlyPaths=/etc/shuffler-vm/cpuinfo:/proc/cpuinfo
"""
#: the scenario's config: tests/vm/config.toml (timings for emulation), else the shipped
#: one with the interim changes a pass needs under emulation (no ADC on the guest's
#: absent SPI bus, the motor's PWM slow enough for an emulated CPU)
VM_CONFIG = "tests/vm/config.toml"
SHIPPED_CONFIG = "docs/deploy/config.toml"
INTERIM_GPIO_KEYS = "adc_channel = false\nmotor_pwm_hz = 100\n"
#: and the shipped limits a shell loop under emulation cannot keep (key: the new value)
INTERIM_LIMITS = {"jam_limit_s": "2.0", "misfeed_limit_s": "3.0"}
#: until docs/deploy/ ships Debian's rule: what Raspberry Pi OS's does for /dev/gpiochip*
INTERIM_UDEV_RULE = 'SUBSYSTEM=="gpio", KERNEL=="gpiochip*", GROUP="gpio", MODE="0660"\n'


def line_names() -> dict[int, str]:
    """Each line's name: the pin map's role, else ``GPIO<n>`` as a Pi names it."""
    names = {bcm: f"GPIO{bcm}" for bcm in range(LINES)}
    for role, wire in WIRES.items():
        names[wire.bcm] = role
    return names


def project_files() -> list[str]:
    """The checkout's files, as ``git clone`` would give them (with local edits)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, capture_output=True).stdout
    return [name for name in out.decode().split("\0") if name and (ROOT / name).is_file()]


def hand_in(folder: Path, modules: Modules, steps: Steps) -> Path:
    """``folder`` filled with what the guest gets at :data:`DATA`: ``wheels/`` (the
    project and every dependency, ``pip wheel '.[pi]'``), ``src/`` (the checkout),
    ``modules/`` (the simulator)."""
    with steps.step("hand-in: pip wheel '.[pi]'"):
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
                        f"{ROOT}[pi]", "-w", str(folder / "wheels")], check=True,
                       stdout=subprocess.DEVNULL)
    for name in project_files():
        target = folder / "src" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    (folder / "modules").mkdir()
    for path in modules.paths:
        shutil.copy2(path, folder / "modules" / path.name)
    return folder


def make_chip(guest: Guest) -> None:
    """Load irq_sim and gpio-sim (keep_released=1), then one chip through configfs."""
    guest.run(f"modprobe configfs && {{ mountpoint -q /sys/kernel/config || "
              f"mount -t configfs none /sys/kernel/config; }} && "
              f"insmod {DATA}/modules/irq_sim.ko && "
              f"insmod {DATA}/modules/gpio-sim.ko keep_released=1")
    kept = guest.run("cat /sys/module/gpio_sim/parameters/keep_released").out.strip()
    if kept != "Y":
        raise AssertionError(f"gpio-sim loaded with keep_released={kept}, not Y")
    script = [f"mkdir {CHIP} {CHIP}/bank0", f"echo {LINES} > {CHIP}/bank0/num_lines"]
    for bcm, name in line_names().items():
        script += [f"mkdir {CHIP}/bank0/line{bcm}", f"echo {name} > {CHIP}/bank0/line{bcm}/name"]
    script += [f"echo 1 > {CHIP}/live", "udevadm settle"]
    guest.run(" && ".join(script))
    dev = guest.run(f"cat {CHIP}/dev_name; cat {CHIP}/bank0/chip_name").out.split()
    if dev != ["gpio-sim.0", "gpiochip0"]:
        raise AssertionError(f"the simulated chip is {dev}, not gpio-sim.0's gpiochip0 "
                             "(the lines a Pi's pin library opens)")
    # nothing attached yet: every input rests at its resistor's level (docs/hardware.md)
    for wire in WIRES.values():
        if wire.direction == "in":
            guest.pull(wire.bcm, up=wire.pull.startswith("up"))


def config_text() -> str:
    if (ROOT / VM_CONFIG).is_file():
        return (ROOT / VM_CONFIG).read_text()
    shipped = (ROOT / SHIPPED_CONFIG).read_text()
    if not shipped.split("\n[")[-1].startswith("gpio]"):
        raise AssertionError(f"{SHIPPED_CONFIG} no longer ends with [gpio]: make {VM_CONFIG}")
    for key, value in INTERIM_LIMITS.items():
        shipped, found = re.subn(rf"^{key} = \S+", f"{key} = {value}", shipped, flags=re.M)
        assert found == 1, f"{SHIPPED_CONFIG} has no one {key}: make {VM_CONFIG}"
    return shipped.rstrip() + "\n" + INTERIM_GPIO_KEYS


def install(guest: Guest, steps: Steps) -> None:
    """docs/deploy/README.md's install, Debian variant, from the handed-in files."""
    src = f"{DATA}/src"
    with steps.step("install: groups, udev rule, user"):
        guest.run("groupadd -f --system gpio && groupadd -f --system spi")
        rules = guest.run(f"ls {src}/docs/deploy/*gpio*.rules 2>/dev/null || true").out.split()
        if rules:
            guest.run(f"install -m 0644 {' '.join(rules)} /etc/udev/rules.d/")
        else:
            guest.put("/etc/udev/rules.d/60-gpio.rules", INTERIM_UDEV_RULE.encode())
        guest.run("udevadm control --reload")
        guest.run("useradd --system --home /var/lib/shuffler --groups gpio,spi,dialout shuffler")
    with steps.step("install: simulator chip"):
        make_chip(guest)
        group = guest.run("stat -c %G /dev/gpiochip0").out.strip()
        if group != "gpio":
            raise AssertionError(f"/dev/gpiochip0 is group {group!r}, not gpio: the udev rule")
    with steps.step("install: venv, pip install 'shuffler[pi]' from the wheels"):
        guest.run(f"cp -a {src} /opt/shuffler && cd /opt/shuffler && "
                  "python3 -m venv --system-site-packages .venv && "
                  f".venv/bin/pip install -q --no-index --find-links {DATA}/wheels "
                  "'shuffler[pi]' && "
                  "ln -sf /opt/shuffler/.venv/bin/shuffler /usr/local/bin/shuffler",
                  timeout=600)
        guest.put("/etc/shuffler/config.toml", config_text().encode())
        guest.run("install -D -m 0644 /opt/shuffler/docs/deploy/shuffler.service "
                  "/etc/systemd/system/shuffler.service && "
                  "install -m 0755 /opt/shuffler/tests/vm/feeder.sh "
                  "/usr/local/bin/shuffler-vm-feeder")
        cpuinfo = guest.get("/proc/cpuinfo").decode()
        guest.put("/etc/shuffler-vm/cpuinfo", (cpuinfo.rstrip() + f"\n\nHardware\t: BCM2835\n"
                  f"Revision\t: {PI_REVISION}\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n")
                  .encode())
        guest.put("/etc/systemd/system/shuffler.service.d/vm-pi.conf", CPUINFO_DROPIN.encode())
        guest.run("systemctl daemon-reload && systemctl enable shuffler")
    with steps.step("install: systemctl start shuffler (to ready)"):
        guest.run("systemctl start shuffler", timeout=300)


def setup(guest: Guest, steps: Steps) -> None:
    guest.run(f"mount -o ro LABEL=shuffler-data {DATA}")
    install(guest, steps)
