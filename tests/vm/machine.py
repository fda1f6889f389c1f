"""What the VM tier's session sets up in a booted guest, in order: the host's disk
mounted, the simulated GPIO chip made (the project's pin map on 54 lines, BCM number =
line offset, as a Pi's gpiochip0), and the project installed and started by
docs/deploy/README.md's Debian block (tests/vm/deploy.py), with the test's own files:
the feeder, and one drop-in (gpiozero refuses to run off a Pi unless /proc/cpuinfo
names a Pi revision, so the unit sees a Pi 4's).

``python -m tests.vm`` runs it all once and prints each step's time.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from shuffler.pinmap import WIRES
from tests.vm import deploy
from tests.vm.guest import DATA, SIM_DEVICE, Guest
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


def line_names() -> dict[int, str]:
    """Each line's name: the pin map's role, else ``GPIO<n>`` as a Pi names it."""
    names = {bcm: f"GPIO{bcm}" for bcm in range(LINES)}
    for role, wire in WIRES.items():
        names[wire.bcm] = role
    return names


def project_files() -> list[str]:
    """The checkout's files and links, as ``git clone`` would give them (with local
    edits)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, capture_output=True).stdout
    return [name for name in out.decode().split("\0")
            if name and ((ROOT / name).is_file() or (ROOT / name).is_symlink())]


def hand_in(folder: Path, modules: Modules, steps: Steps) -> Path:
    """``folder`` filled with what the guest gets at :data:`DATA`: ``wheels/`` (the
    project and every dependency, ``pip wheel '.[pi]'``), ``src/`` (the checkout, with
    its local changes, as a git repository), ``modules/`` (the simulator)."""
    with steps.step("hand-in: pip wheel '.[pi]'"):
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
                        f"{ROOT}[pi]", "-w", str(folder / "wheels")], check=True,
                       stdout=subprocess.DEVNULL)
    for name in project_files():
        target = folder / "src" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        # a link as a link (cli/deploy -> ../docs/deploy: shuffler-setup's files)
        shutil.copy2(ROOT / name, target, follow_symlinks=False)
    # a repository, so the README's `git clone` clones it: the checkout as it is now
    git = ["git", "-C", str(folder / "src"), "-c", "user.name=vm", "-c", "user.email=vm@vm"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the host's checkout"]):
        subprocess.run([*git, *args], check=True)
    (folder / "modules").mkdir()
    for path in modules.paths:
        shutil.copy2(path, folder / "modules" / path.name)
    return folder


def chip_commands() -> list[str]:
    """The shell commands that load irq_sim and gpio-sim (keep_released=1) from the data
    disk and make one chip through configfs, its inputs at their resistors' levels: run
    by :func:`make_chip`, and at boot by the walk's unit (tests/vm/test_vm_walk.py)."""
    configfs = "/sys/kernel/config"
    commands = ["modprobe configfs",
                f"{{ mountpoint -q {configfs} || mount -t configfs none {configfs}; }}",
                f"insmod {DATA}/modules/irq_sim.ko",
                f"insmod {DATA}/modules/gpio-sim.ko keep_released=1",
                f"mkdir {CHIP} {CHIP}/bank0", f"echo {LINES} > {CHIP}/bank0/num_lines"]
    for bcm, name in line_names().items():
        commands += [f"mkdir {CHIP}/bank0/line{bcm}",
                     f"echo {name} > {CHIP}/bank0/line{bcm}/name"]
    commands += [f"echo 1 > {CHIP}/live", "udevadm settle"]
    # nothing attached yet: every input rests at its resistor's level (docs/hardware.md)
    for wire in WIRES.values():
        if wire.direction == "in":
            level = "pull-up" if wire.pull.startswith("up") else "pull-down"
            commands.append(f"echo {level} > {SIM_DEVICE}/gpiochip0/sim_gpio{wire.bcm}/pull")
    return commands


def make_chip(guest: Guest) -> None:
    """:func:`chip_commands`, then checks that the modules and the chip are as a Pi's."""
    guest.run(" && ".join(chip_commands()))
    kept = guest.run("cat /sys/module/gpio_sim/parameters/keep_released").out.strip()
    if kept != "Y":
        raise AssertionError(f"gpio-sim loaded with keep_released={kept}, not Y")
    dev = guest.run(f"cat {CHIP}/dev_name; cat {CHIP}/bank0/chip_name").out.split()
    if dev != ["gpio-sim.0", "gpiochip0"]:
        raise AssertionError(f"the simulated chip is {dev}, not gpio-sim.0's gpiochip0 "
                             "(the lines a Pi's pin library opens)")


def add_test_files(guest: Guest) -> None:
    """What only the test adds: the unit's Pi /proc/cpuinfo, the feeder."""
    cpuinfo = guest.get("/proc/cpuinfo").decode()
    guest.put("/etc/shuffler-vm/cpuinfo", (cpuinfo.rstrip() + f"\n\nHardware\t: BCM2835\n"
              f"Revision\t: {PI_REVISION}\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n").encode())
    guest.put(deploy.DROPIN, CPUINFO_DROPIN.encode())
    guest.put("/usr/local/bin/shuffler-vm-feeder", (ROOT / "tests/vm/feeder.sh").read_bytes(),
              mode=0o755)


def install(guest: Guest, steps: Steps) -> None:
    """The simulated chip (the hardware, there before the builder starts), then
    docs/deploy/README.md's Debian install (tests/vm/deploy.py)."""
    with steps.step("install: simulator chip"):
        make_chip(guest)
    readme = ROOT / "docs/deploy/README.md"
    with steps.step("install: docs/deploy/README.md's Debian block"):
        deploy.run(guest, readme, steps, lambda: add_test_files(guest))
    group = guest.run("stat -c %G /dev/gpiochip0").out.strip()
    if group != "gpio":
        raise AssertionError(f"/dev/gpiochip0 is group {group!r}, not gpio: the udev rule")


def setup(guest: Guest, steps: Steps) -> None:
    guest.run(f"mount -o ro LABEL=shuffler-data {DATA}")
    install(guest, steps)
