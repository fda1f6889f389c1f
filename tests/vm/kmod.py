"""The kernel's GPIO simulator (gpio-sim, and the irq_sim it needs) for the guest's
kernel: Debian's 6.1 kernel ships neither, so they are built out of tree from
linux-source-6.1 against the pinned linux-headers (tests/vm/image.py KERNEL_ABI).

Nothing of the kernel's source is in this repository: the files are taken from the
distribution's tarball at build time and edited by :data:`EDITS`, our lines only, each
anchored on text that must occur exactly once (a source that moved fails the build,
naming the edit, rather than building something else):

- ``irq_sim.c`` calls ``irq_to_desc``, which a module cannot (not exported since 5.11):
  ``generic_handle_irq`` does the same for a mapped interrupt; and a module needs a
  licence line (irq_sim is otherwise built in).
- ``gpio-sim.c`` gains ``keep_released`` (bool, default off = upstream): a released line
  keeps its level, as a Raspberry Pi's kernel leaves a released output driven, instead of
  returning to its pull. The service's ExecStopPost (shuffler-safe) is what must bring
  the motor low after a kill; upstream's reset would hide a missing one.
"""

from __future__ import annotations

import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests.vm.image import HEADERS, KERNEL_ABI, KERNEL_SOURCE, Steps, cached, key_of

#: the source files, by their path in the tarball (under linux-source-6.1/)
SOURCES = ("drivers/gpio/gpio-sim.c", "drivers/gpio/gpiolib.h", "kernel/irq/irq_sim.c")

_KEEP_RELEASED_PARAM = (
    '#include "gpiolib.h"\n\n'
    "static bool keep_released;\n"
    "module_param(keep_released, bool, 0444);\n"
    'MODULE_PARM_DESC(keep_released, "a released line keeps its level (as a Raspberry Pi\'s "\n'
    '\t\t "kernel does) instead of returning to its pull");\n'
)

_UPSTREAM_FREE = """	mutex_lock(&chip->lock);
	__assign_bit(offset, chip->value_map, !!test_bit(offset, chip->pull_map));
	mutex_unlock(&chip->lock);
"""

#: (file, the text that must occur once, what replaces it)
EDITS: tuple[tuple[str, str, str], ...] = (
    ("irq_sim.c", "handle_simple_irq(irq_to_desc(irqnum));", "generic_handle_irq(irqnum);"),
    ("irq_sim.c", "EXPORT_SYMBOL_GPL(devm_irq_domain_create_sim);\n",
     "EXPORT_SYMBOL_GPL(devm_irq_domain_create_sim);\n\n"
     'MODULE_DESCRIPTION("interrupt simulator (out of tree, for the shuffler\'s VM tests)");\n'
     'MODULE_LICENSE("GPL");\n'),
    ("gpio-sim.c", '#include "gpiolib.h"\n', _KEEP_RELEASED_PARAM),
    ("gpio-sim.c", _UPSTREAM_FREE,
     _UPSTREAM_FREE.replace("\t__assign_bit", "\tif (!keep_released)\n\t\t__assign_bit")),
)
KBUILD = "obj-m := irq_sim.o gpio-sim.o\n"
MODULES = ("irq_sim.ko", "gpio-sim.ko")


@dataclass(frozen=True)
class Modules:
    folder: Path

    @property
    def paths(self) -> list[Path]:
        """In load order: gpio-sim needs irq_sim's symbols."""
        return [self.folder / name for name in MODULES]


def modules_key() -> str:
    source = KERNEL_SOURCE.stat()
    return key_of(KERNEL_ABI, SOURCES, EDITS, KBUILD, source.st_size, int(source.st_mtime),
                  (HEADERS / ".config").read_bytes())


def apply_edits(folder: Path) -> None:
    """Edit the extracted sources in ``folder`` by :data:`EDITS`."""
    for name, old, new in EDITS:
        path = folder / name
        text = path.read_text()
        if text.count(old) != 1:
            raise RuntimeError(f"kmod: {name}: expected exactly one {old.strip()[:60]!r} "
                               f"(found {text.count(old)}): has linux-source changed?")
        path.write_text(text.replace(old, new))


def extract(folder: Path) -> None:
    """The :data:`SOURCES` from the distribution's tarball, flat in ``folder``."""
    wanted = {f"linux-source-6.1/{path}": Path(path).name for path in SOURCES}
    with tarfile.open(KERNEL_SOURCE) as tar:
        for member in tar:
            if member.name in wanted:
                source = tar.extractfile(member)
                assert source is not None
                (folder / wanted.pop(member.name)).write_bytes(source.read())
                if not wanted:
                    return
    raise RuntimeError(f"kmod: {KERNEL_SOURCE} lacks {', '.join(wanted)}")


def build_modules(steps: Steps) -> Modules:
    """The two modules, from the cache or built (``make -C <headers> M=...``)."""
    return Modules(cached("kmod", modules_key(), lambda folder: _build_in(folder, steps), steps))


def _build_in(folder: Path, steps: Steps) -> None:
    with steps.step("kmod: extract sources"):
        extract(folder)
    apply_edits(folder)
    (folder / "Kbuild").write_text(KBUILD)
    with steps.step("kmod: make"):
        subprocess.run(["make", "-s", "-C", str(HEADERS), f"M={folder}", "modules"],
                       check=True, stdout=subprocess.DEVNULL)
    for name in MODULES:
        if not (folder / name).is_file():
            raise RuntimeError(f"kmod: make built no {name}")


if __name__ == "__main__":
    build_modules(Steps())
