"""The Raspberry Pi image (docs/image.md): Debian bookworm arm64, Debian's kernel and the
Pi's firmware (raspi-firmware), with the project installed by its own installer
(``shuffler-setup install``) and the page on for the LAN.

``python -m image build`` builds it (as root) and prints where it is. Two layers, each
cached (image/cache.py) under a hash of its inputs, so a new commit rebuilds only the
second, quick one:

- the **base**: mmdebstrap (``--arch=arm64``, through qemu-user and binfmt_misc) of the
  OS, the kernel, the firmware, avahi, Python and the first-boot unit, kept as a tarball;
  its key hashes the package list, the mirrors and the files of this folder it installs;
- the **image**: the base unpacked, the project's wheel and its arm64 dependencies (built
  and downloaded on the host) installed into /opt/shuffler/.venv, then the installer;
  then the two partitions made as files (``mkfs.vfat`` + ``mcopy``, ``mkfs.ext4 -d``) and
  placed in the image at their offsets after ``sfdisk`` wrote its table: no loop device,
  no mount. Its key: the base's and the wheels' contents.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from image.cache import Steps, cache_root, cached, key_of

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SUITE = "bookworm"
#: non-free-firmware: raspi-firmware (the Pi's boot firmware) and the Wi-Fi's firmware
MIRRORS = (
    f"deb http://deb.debian.org/debian {SUITE} main non-free-firmware",
    f"deb http://deb.debian.org/debian {SUITE}-updates main non-free-firmware",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main non-free-firmware",
)
#: docs, manuals and translations are left out of the image (smaller, quicker to build)
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*",
                 "/usr/share/info/*")
#: the base: systemd, the network (networkd and resolved, Wi-Fi through wpa_supplicant
#: and the Pi's firmware-brcm80211), mDNS (avahi answers shuffler.local, libnss-mdns
#: resolves .local names), SSH (off until the boot file gives a key), Python for the venv
#: and the first boot, the tools that grow the root at first boot, Debian's kernel and
#: the Pi's boot firmware; qemu-guest-agent starts only under QEMU (its virtio port)
BASE_PACKAGES = (
    "systemd-sysv", "systemd-resolved", "systemd-timesyncd", "udev", "dbus", "kmod", "procps",
    "iproute2", "wpasupplicant", "firmware-brcm80211", "wireless-regdb",
    "avahi-daemon", "libnss-mdns", "openssh-server", "ca-certificates",
    "python3", "python3-venv", "e2fsprogs", "fdisk", "dosfstools",
    "linux-image-arm64", "initramfs-tools", "zstd", "raspi-firmware", "qemu-guest-agent",
)
BASE_FILES = (HERE / "base-setup.sh", HERE / "firstboot.py", HERE / "shuffler-firstboot.service",
              HERE / "initramfs-hook", HERE / "initramfs.conf")
#: before any package: the firmware's mount point, and the initramfs's module list (its
#: conf.d file and hook, no package's conffiles), there when the kernel's postinst runs
SETUP_HOOK = ('mkdir -p "$1/boot/firmware" && '
              f'install -D -m 0644 {HERE}/initramfs.conf '
              '"$1/etc/initramfs-tools/conf.d/shuffler-image.conf" && '
              f'install -D -m 0755 {HERE}/initramfs-hook '
              '"$1/etc/initramfs-tools/hooks/shuffler-image"')
#: the wheels' platform for pip download: Debian 12's glibc 2.36 on arm64, CPython 3.11
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_34_aarch64",
             "manylinux_2_36_aarch64")
VENV = "/opt/shuffler/.venv"
#: the partitions: the firmware's FAT (the kernel, its initrd and the firmware: ~90 MB)
#: and the root, made with room to spare and grown to the card at the first boot
SECTOR = 512
BOOT_START_MIB = 4
BOOT_MIB = 256
ROOT_SLACK_MIB = 512
BOOT_LABEL = "RASPIFIRM"
ROOT_LABEL = "RASPIROOT"
IMAGE_NAME = "shuffler-pi.img"


@dataclass(frozen=True)
class Built:
    """A built image and what went into it."""

    image: Path
    key: str
    base_key: str


def missing_host_tools() -> list[str]:
    """The Debian packages the build needs that this machine lacks (each named once)."""
    tools = {"mmdebstrap": "mmdebstrap", "mkfs.vfat": "dosfstools", "mcopy": "mtools",
             "sfdisk": "fdisk", "mkfs.ext4": "e2fsprogs", "qemu-aarch64-static": "qemu-user-static"}
    return sorted({package for tool, package in tools.items() if shutil.which(tool) is None})


def binfmt_ready() -> str | None:
    """None when the kernel runs arm64 programs through qemu-user (binfmt_misc), else
    what is wrong and the command that fixes it."""
    folder = Path("/proc/sys/fs/binfmt_misc")
    if not (folder / "status").exists():
        return ("binfmt_misc is not mounted: mount -t binfmt_misc binfmt_misc "
                "/proc/sys/fs/binfmt_misc")
    entry = folder / "qemu-aarch64"
    if not entry.exists() or "enabled" not in entry.read_text():
        return "no qemu-aarch64 binfmt entry: update-binfmts --enable qemu-aarch64"
    return None


def mmdebstrap(target: Path, packages: tuple[str, ...], hook: str, *, suite: str = SUITE,
               mirrors: tuple[str, ...] = MIRRORS, arch: str | None = None,
               setup_hook: str | None = None) -> None:
    """mmdebstrap (root mode, apt variant, no docs) of ``packages`` into ``target`` (a
    folder, or a tarball by its name), ``hook`` its customize hook: the VM tier's guest
    (tests/vm/image.py) and this image's base."""
    subprocess.run(
        ["mmdebstrap", "--quiet", "--variant=apt", "--mode=root",
         *([f"--arch={arch}"] if arch else []),
         "--include=" + ",".join(packages),
         *[f"--dpkgopt=path-exclude={glob}" for glob in DPKG_EXCLUDES],
         *([f"--setup-hook={setup_hook}"] if setup_hook else []),
         f"--customize-hook={hook}", suite, str(target), *mirrors], check=True)


def base_key() -> str:
    # the hook's command without this checkout's path: a clone elsewhere finds the base
    return key_of(SUITE, MIRRORS, BASE_PACKAGES, DPKG_EXCLUDES, SETUP_HOOK.replace(str(HERE), ""),
                  *[path.read_bytes() for path in BASE_FILES])


def build_base(steps: Steps) -> Path:
    """The base's tarball, from the cache or built."""
    def build(folder: Path) -> None:
        with steps.step("base: mmdebstrap --arch=arm64"):
            mmdebstrap(folder / "base.tar", BASE_PACKAGES, f'sh {HERE / "base-setup.sh"} "$1"',
                       arch="arm64", setup_hook=SETUP_HOOK)
    return cached("pi-base", base_key(), build, steps) / "base.tar"


def wheels(folder: Path, steps: Steps) -> Path:
    """``folder`` filled with the project's wheel and every dependency's for arm64."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    with steps.step("wheels: the project's, and its arm64 dependencies"):
        subprocess.run([*pip, "wheel", "--no-deps", str(ROOT), "-w", str(folder)], check=True,
                       stdout=subprocess.DEVNULL)
        (project,) = folder.glob("shuffler-*.whl")
        subprocess.run([*pip, "download", "--only-binary=:all:", "--python-version", "3.11",
                        "--implementation", "cp", "--abi", "cp311",
                        *[f"--platform={tag}" for tag in PLATFORMS],
                        "-d", str(folder), f"{project}[pi]"], check=True)
    return folder


def wheels_digest(folder: Path) -> str:
    """A hash of what the wheels install (each member's name and bytes), not of the zip
    files: a wheel built again from the same commit has new timestamps, the same files."""
    digest = hashlib.sha256()
    for wheel in sorted(folder.glob("*.whl")):
        digest.update(wheel.name.encode() + b"\0")
        with zipfile.ZipFile(wheel) as archive:
            for info in sorted(archive.infolist(), key=lambda i: i.filename):
                digest.update(info.filename.encode() + b"\0" + archive.read(info) + b"\0")
    return digest.hexdigest()


def web_on_lan(config: str) -> str:
    """The config's text with ``[web] enabled`` and ``lan`` true, the rest as it was."""
    match = re.search(r"(?ms)^\[web\][^\n]*\n(.*?)(?=^\[|\Z)", config)
    if match is None:
        return config.rstrip("\n") + "\n\n[web]\nenabled = true\nlan = true\n"
    section = match.group(1)
    for key in ("enabled", "lan"):
        section, found = re.subn(rf"(?m)^{key}\s*=\s*\S+", f"{key} = true", section, count=1)
        if not found:
            section = f"{key} = true\n" + section
    return config[:match.start(1)] + section + config[match.end(1):]


def chroot(tree: Path, *command: str) -> None:
    subprocess.run(["chroot", str(tree), *command], check=True,
                   env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8",
                        "HOME": "/root"})


def install_project(tree: Path) -> None:
    """The project's installer, as a builder runs it on a Pi, in the chroot (no systemd
    running): then the page on for the LAN, and the installer again, which brings the
    network drop-in the page needs."""
    setup = f"{VENV}/bin/shuffler-setup"
    chroot(tree, setup, "install")
    config = tree / "etc/shuffler/config.toml"
    config.write_text(web_on_lan(config.read_text()))
    chroot(tree, setup, "install")


def project_layer(base: Path, wheel_folder: Path, folder: Path, steps: Steps,
                  install: Callable[[Path], None] = install_project) -> None:
    """The image in ``folder``: the base unpacked, the venv, the installer, the disk."""
    tree = folder / "tree"
    tree.mkdir()
    with steps.step("image: unpack the base"):
        subprocess.run(["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-xpf",
                        str(base), "-C", str(tree)], check=True)
    with steps.step("image: the venv and the wheels (arm64, under qemu-user)"):
        inside = "/tmp/shuffler-wheels"
        shutil.copytree(wheel_folder, tree / inside.lstrip("/"))
        chroot(tree, "python3", "-m", "venv", VENV)
        chroot(tree, f"{VENV}/bin/pip", "install", "-q", "--no-cache-dir", "--no-index",
               "--disable-pip-version-check", "--find-links", inside, "shuffler[pi]")
        shutil.rmtree(tree / inside.lstrip("/"))
    with steps.step("image: shuffler-setup install"):
        install(tree)
    with steps.step("image: the partitions and the disk"):
        assemble(tree, folder / IMAGE_NAME, folder)
    shutil.rmtree(tree)


def _mib_used(tree: Path) -> int:
    out = subprocess.run(["du", "-sxm", str(tree)], check=True, capture_output=True, text=True)
    return int(out.stdout.split()[0])


def assemble(tree: Path, image: Path, work: Path) -> None:
    """``image``: an MBR with the firmware's FAT (``tree/boot/firmware``) and the root's
    ext4 (the rest of ``tree``), each made as a file and written at its offset."""
    firmware = tree / "boot/firmware"
    boot_fs, root_fs = work / "boot.vfat", work / "root.ext4"
    subprocess.run(["mkfs.vfat", "-F", "32", "-n", BOOT_LABEL, "-C", str(boot_fs),
                    str(BOOT_MIB * 1024)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["mcopy", "-s", "-p", "-m", "-i", str(boot_fs),
                    *[str(p) for p in sorted(firmware.iterdir())], "::/"], check=True)
    for path in firmware.iterdir():     # on the FAT now; the root's /boot/firmware is its mount
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    root_mib = _mib_used(tree) * 6 // 5 + ROOT_SLACK_MIB
    root_fs.touch()                      # mkfs.ext4 then says nothing of making it
    subprocess.run(["mkfs.ext4", "-q", "-L", ROOT_LABEL, "-d", str(tree), str(root_fs),
                    f"{root_mib}M"], check=True)
    root_start = BOOT_START_MIB + BOOT_MIB
    with open(image, "wb") as out:
        out.truncate((root_start + root_mib) * 1024 * 1024)
    per_mib = 1024 * 1024 // SECTOR
    table = (f"label: dos\n"
             f"start={BOOT_START_MIB * per_mib}, size={BOOT_MIB * per_mib}, type=c, bootable\n"
             f"start={root_start * per_mib}, type=83\n")
    subprocess.run(["sfdisk", "--quiet", str(image)], input=table, text=True, check=True)
    for fs, start in ((boot_fs, BOOT_START_MIB), (root_fs, root_start)):
        subprocess.run(["dd", f"if={fs}", f"of={image}", "bs=1M", f"seek={start}",
                        "conv=notrunc,sparse", "status=none"], check=True)
        fs.unlink()


def build(steps: Steps, install: Callable[[Path], None] = install_project) -> Built:
    """The image, from the cache or built (as root: mmdebstrap, chroot, files' owners)."""
    if os.geteuid() != 0:
        raise PermissionError("building the Raspberry Pi image needs root (mmdebstrap and "
                              "chroot; the image's files keep their owners)")
    problem = binfmt_ready()
    if problem:
        raise RuntimeError(f"arm64 programs cannot run here: {problem}")
    with steps.step("base (total)"):
        base = build_base(steps)
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pi-wheels-", dir=cache_root()) as temporary:
        work = wheels(Path(temporary), steps)
        key = key_of(base.parent.name, wheels_digest(work), (HERE / "build.py").read_bytes())
        with steps.step("image (total)"):
            folder = cached("pi-image", key,
                            lambda folder: project_layer(base, work, folder, steps, install),
                            steps)
    return Built(folder / IMAGE_NAME, key, base.parent.name)


def summary(built: Built, steps: Steps) -> dict[str, object]:
    stat = built.image.stat()
    return {"image": str(built.image), "key": built.key, "base": built.base_key,
            "size_mib": stat.st_size // 2**20, "allocated_mib": stat.st_blocks * 512 // 2**20,
            "seconds": {name: round(took, 1) for name, took in steps.times.items()}}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m image",
                                     description="Build the Raspberry Pi image (docs/image.md)")
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--out", type=Path, help="also put the image here (a copy)")
    args = parser.parse_args(argv)
    missing = missing_host_tools()
    if missing:
        print(f"image: missing host packages: {' '.join(missing)} (apt-get install them)",
              file=sys.stderr)
        return 2
    steps = Steps(prefix="image")
    try:
        with steps.step("build (total)"):
            built = build(steps)
    except (PermissionError, RuntimeError) as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 2
    if args.out:
        subprocess.run(["cp", "--sparse=always", str(built.image), str(args.out)], check=True)
    print(json.dumps(summary(built, steps)))
    return 0
