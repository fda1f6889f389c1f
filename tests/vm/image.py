"""The VM tier's guest: a Debian bookworm image built with mmdebstrap, and the kernel's
GPIO simulator built for its kernel (tests/vm/kmod.py), each cached under a key that
hashes every input, so a second run finds them built.

``python -m tests.vm.image`` builds (or finds) both and prints each step's time.

The cache: ``$SHUFFLER_VM_CACHE``, else ``~/.cache/shuffler-vm``; one folder per key
(``image-<key>``, ``kmod-<key>``), made under a temporary name and renamed when whole,
so a build cut off is never mistaken for a cached one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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
SUITE = "bookworm"
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
#: docs, manuals and translations are left out of the image (smaller, quicker to build)
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*",
                 "/usr/share/info/*")
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


def cache_root() -> Path:
    root = os.environ.get("SHUFFLER_VM_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "shuffler-vm"


def key_of(*parts: object) -> str:
    """A short hash of the parts (strings, tuples, bytes): the cache key."""
    digest = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else json.dumps(part).encode()
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()[:16]


class Steps:
    """Times each step and prints it (to stderr, so pytest -s and the script show it)."""

    def __init__(self, out=sys.stderr) -> None:
        self.out = out
        self.times: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        print(f"vm: {name} ...", file=self.out, flush=True)
        try:
            yield
        finally:
            self.times[name] = elapsed = time.monotonic() - start
            print(f"vm: {name}: {elapsed:.1f} s", file=self.out, flush=True)


def cache_dir(kind: str, key: str) -> Path:
    return cache_root() / f"{kind}-{key}"


def cached(kind: str, key: str, build: Callable[[Path], None], steps: Steps) -> Path:
    """The folder :func:`cache_dir` names, found, or made by ``build(folder)`` in a
    temporary folder renamed to it once the build returned."""
    final = cache_dir(kind, key)
    if final.is_dir():
        print(f"vm: {kind} cached in {final}", file=steps.out)
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{kind}-{key}-", dir=final.parent))
    try:
        build(work)
        work.rename(final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return final


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
        subprocess.run(
            ["mmdebstrap", "--quiet", "--variant=apt", "--mode=root",
             "--include=" + ",".join(GUEST_PACKAGES),
             *[f"--dpkgopt=path-exclude={glob}" for glob in DPKG_EXCLUDES],
             f"--customize-hook=sh {SETUP_SCRIPT} \"$1\"",
             SUITE, str(tree), *MIRRORS], check=True)
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
