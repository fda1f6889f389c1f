"""The VM tier's guest: a Debian bookworm image built with mmdebstrap, and the kernel's
GPIO simulator built for its kernel (tests/vm/kmod.py), each cached under a key that
hashes every input, so a second run finds them built.

``python -m tests.vm.image`` builds (or finds) both and prints each step's time.

The cache (image/cache.py, shared with the Raspberry Pi image): ``$SHUFFLER_VM_CACHE``,
else ``~/.cache/shuffler-vm``; one folder per key (``image-<key>``, ``kmod-<key>``), made
under a temporary name and renamed when whole, so a build cut off is never mistaken for a
cached one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from image.build import DPKG_EXCLUDES, SUITE, mmdebstrap
from image.cache import Steps, cache_dir, cached, key_of

__all__ = ["Image", "Steps", "build_image", "cache_dir", "cached", "image_key", "key_of",
           "missing_host_packages"]

HERE = Path(__file__).resolve().parent

#: The guest's kernel ABI, pinned in this one place: the guest boots Debian's
#: linux-image-<ABI> and the simulator modules are built against the host's
#: linux-headers-<ABI>, so both must be the same. The host is bookworm, so this is the
#: host's headers package (6.1.0-57-amd64 is Debian 6.1.192-3, from bookworm-security).
#: To bump: change it here and in .ci/run's VM_PACKAGES, to an ABI the archive still
#: carries (`apt-cache policy linux-image-<ABI>`); the image and modules rebuild (new key).
KERNEL_ABI = "6.1.0-57-amd64"
KERNEL_SOURCE = Path("/usr/src/linux-source-6.1.tar.xz")
HEADERS = Path(f"/usr/src/linux-headers-{KERNEL_ABI}")
MIRRORS = (
    f"deb http://deb.debian.org/debian {SUITE} main",
    f"deb http://deb.debian.org/debian {SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main",
)
#: what the guest needs: systemd as init, udev for /dev/gpiochip*, python3 and venv for
#: the project, the agent the host drives it through, the pinned kernel and kmod to load
#: the simulator, git for the README's clone; nothing from the network at test time
GUEST_PACKAGES = (
    "systemd-sysv", "udev", "dbus", "kmod", "procps", "python3", "python3-venv",
    "qemu-guest-agent", f"linux-image-{KERNEL_ABI}", "initramfs-tools", "zstd", "git",
)
SETUP_SCRIPT = HERE / "guest-setup.sh"
#: room in the image beyond what mmdebstrap wrote: the venv with the project's wheels,
#: the state folder, the journal
IMAGE_SLACK = 1024 * 1024 * 1024

#: the host's packages the tier needs, each with how to tell it is there
HOST_PACKAGES: dict[str, Callable[[], bool]] = {
    "qemu-system-x86": lambda: shutil.which("qemu-system-x86_64") is not None,
    "qemu-utils": lambda: shutil.which("qemu-img") is not None,
    "mmdebstrap": lambda: shutil.which("mmdebstrap") is not None,
    "linux-source-6.1": KERNEL_SOURCE.is_file,
    f"linux-headers-{KERNEL_ABI}": lambda: (HEADERS / "Makefile").is_file(),
    "e2fsprogs": lambda: shutil.which("mkfs.ext4") is not None,
}


def missing_host_packages() -> list[str]:
    """The host packages the tier needs that this machine lacks (apt names)."""
    return [name for name, present in HOST_PACKAGES.items() if not present()]


@dataclass(frozen=True)
class Image:
    """A built guest: its root filesystem (raw ext4) and the kernel and initrd to boot."""

    disk: Path
    kernel: Path
    initrd: Path


def image_key() -> str:
    return key_of(SUITE, MIRRORS, GUEST_PACKAGES, DPKG_EXCLUDES, KERNEL_ABI, IMAGE_SLACK,
                  SETUP_SCRIPT.read_bytes())


def image_in(folder: Path) -> Image:
    return Image(folder / "root.ext4", folder / "vmlinuz", folder / "initrd.img")


def build_image(steps: Steps) -> Image:
    """The guest image, from the cache or built (needs root: mmdebstrap's chroot mode)."""
    return image_in(cached("image", image_key(), lambda folder: _build_image_in(folder, steps),
                           steps))


def _build_image_in(folder: Path, steps: Steps) -> None:
    """Fills ``folder``: mmdebstrap a tree, take its kernel and initrd, make the ext4."""
    if os.geteuid() != 0:
        raise PermissionError("building the VM image needs root (mmdebstrap in chroot "
                              "mode, then mkfs.ext4 -d keeps the files' owners)")
    tree = folder / "tree"
    with steps.step("image: mmdebstrap"):
        mmdebstrap(tree, GUEST_PACKAGES, f'sh {SETUP_SCRIPT} "$1"', mirrors=MIRRORS)
    image = image_in(folder)
    with steps.step("image: kernel, initrd, mkfs.ext4 -d"):
        shutil.copyfile(tree / "boot" / f"vmlinuz-{KERNEL_ABI}", image.kernel)
        shutil.copyfile(tree / "boot" / f"initrd.img-{KERNEL_ABI}", image.initrd)
        used = int(subprocess.run(["du", "-sxb", str(tree)], check=True,
                                  capture_output=True, text=True).stdout.split()[0])
        size_mib = (used * 5 // 4 + IMAGE_SLACK) // (1024 * 1024)
        subprocess.run(["mkfs.ext4", "-q", "-L", "shuffler-vm", "-d", str(tree),
                        str(image.disk), f"{size_mib}M"], check=True)
        shutil.rmtree(tree)


def main() -> int:
    from tests.vm.kmod import build_modules

    missing = missing_host_packages()
    if missing:
        print(f"vm: missing host packages: {' '.join(missing)}", file=sys.stderr)
        return 2
    steps = Steps()
    with steps.step("image (total)"):
        image = build_image(steps)
    with steps.step("kmod (total)"):
        modules = build_modules(steps)
    print(json.dumps({"image": str(image.disk), "modules": str(modules.folder),
                      "seconds": {k: round(v, 1) for k, v in steps.times.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
