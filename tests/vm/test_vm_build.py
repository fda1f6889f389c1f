"""The VM tier's build (tests/vm/image.py, tests/vm/kmod.py): the guest boots the pinned
kernel, the simulator modules are built for that kernel with the ``keep_released``
option and, loaded in the guest, keep a released line's level; an edit that no longer
finds its anchor in the kernel's source (or in the README's Debian block) fails the
build rather than building something else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shuffler.pinmap import WIRES
from tests.vm import deploy
from tests.vm.conftest import Built
from tests.vm.guest import Guest
from tests.vm.image import KERNEL_ABI
from tests.vm.kmod import EDITS, apply_edits


def modinfo(path: Path) -> dict[str, list[str]]:
    """A module's ``.modinfo`` strings (``key=value``, NUL-separated), by key."""
    info: dict[str, list[str]] = {}
    for key, value in re.findall(rb"\0(vermagic|parm|parmtype|license|depends|name)=([^\0]*)",
                                 path.read_bytes()):
        info.setdefault(key.decode(), []).append(value.decode())
    return info


def test_the_image_boots_the_pinned_kernel(built: Built) -> None:
    image = built.image
    assert image.disk.stat().st_size > 512 * 1024 * 1024
    # a bzImage names its version in its header (at the offset the header gives)
    kernel = image.kernel.read_bytes()
    offset = int.from_bytes(kernel[0x20E:0x210], "little") + 0x200
    assert kernel[offset:offset + len(KERNEL_ABI)].decode() == KERNEL_ABI
    assert image.initrd.stat().st_size > 1024 * 1024


def test_the_modules_are_built_for_the_pinned_kernel_with_keep_released(built: Built) -> None:
    irq_sim, gpio_sim = built.modules.paths
    for module in (irq_sim, gpio_sim):
        info = modinfo(module)
        assert info["vermagic"][0].split()[0] == KERNEL_ABI, info
        assert info["license"] == ["GPL"], info
    info = modinfo(gpio_sim)
    assert "irq_sim" in info["depends"][0].split(","), info
    assert "keep_released:bool" in info["parmtype"], info
    assert any(parm.startswith("keep_released:a released line keeps its level")
               for parm in info["parm"]), info


@pytest.mark.parametrize("edit", range(len(EDITS)))
def test_an_edit_whose_anchor_is_gone_fails_the_build_naming_it(tmp_path: Path,
                                                                edit: int) -> None:
    name, anchor, _ = EDITS[edit]
    for other, *_ in EDITS:
        (tmp_path / other).write_text("/* a source with every anchor */\n" + "\n".join(
            old for file, old, _ in EDITS if file == other))
    (tmp_path / name).write_text((tmp_path / name).read_text().replace(anchor, "/* moved */"))
    with pytest.raises(RuntimeError, match=rf"{re.escape(name)}: expected exactly one"):
        apply_edits(tmp_path)


def test_the_guest_is_installed_by_the_readme_debian_block_every_edit_matching_one_line(
        ) -> None:
    readme = Path(__file__).resolve().parents[2] / "docs/deploy/README.md"
    lines = deploy.block(readme)
    assert lines, "docs/deploy/README.md has no sh deploy-debian block"
    out = deploy.edited(lines)
    changed = [(old, new) for old, new in zip(lines, out, strict=True) if old != new]
    assert len(changed) == len(deploy.EDITS), changed
    assert not any(line.startswith("apt ") or "~/" in line for line in out), out
    with pytest.raises(AssertionError, match=re.escape('"the host\'s checkout" matches 0 lines')):
        deploy.edited([line for line in lines if not line.startswith("git clone")])


def test_the_loaded_simulator_keeps_a_released_output_at_its_level(guest: Guest) -> None:
    """keep_released=1 in the guest's kernel: an output that lgpio drove high and then
    released stays high, as on a Pi (upstream gpio-sim would drop it to its pull)."""
    spare = 40  # on the chip, in no pin map role
    assert spare not in {wire.bcm for wire in WIRES.values()}
    guest.pull(spare, up=False)
    guest.run("cd /tmp && /opt/shuffler/.venv/bin/python -c 'import lgpio; "
              f"h = lgpio.gpiochip_open(0); lgpio.gpio_claim_output(h, {spare}, 1); "
              "lgpio.gpiochip_close(h)'")
    assert guest.line(spare) == 1
    guest.run(f"cd /tmp && /opt/shuffler/.venv/bin/python -c 'import lgpio; "
              f"h = lgpio.gpiochip_open(0); lgpio.gpio_claim_output(h, {spare}, 0); "
              "lgpio.gpiochip_close(h)'")
    assert guest.line(spare) == 0
