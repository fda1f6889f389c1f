"""The VM tier (``pytest -m vm``): one guest for the whole session, booted once
(minutes under emulation), set up as tests/vm/machine.py says, shared by every
scenario. Each scenario leaves the service running and idle (or restarts it).

Every test under tests/vm/ is marked ``vm`` and ``slow``. The tier skips, naming each
missing piece and its Debian package, on a machine that cannot build or boot the guest.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.vm.guest import Guest, attach, boot, data_disk, shut_down_after
from tests.vm.image import (
    HOST_PACKAGES,
    Image,
    Steps,
    build_image,
    cache_dir,
    image_key,
    missing_host_packages,
)
from tests.vm.kmod import Modules, build_modules
from tests.vm.machine import hand_in, setup

HERE = Path(__file__).resolve().parent
#: what each host package gives the tier, for the skip reason
WHAT = {
    "qemu-system-x86": "qemu-system-x86_64 (boots the guest)",
    "qemu-utils": "qemu-img (the guest's throwaway overlay)",
    "mmdebstrap": "mmdebstrap (builds the guest image)",
    "linux-source-6.1": "the kernel source (gpio-sim and irq_sim are built from it)",
    "e2fsprogs": "mkfs.ext4 (the guest's disks)",
}
assert set(WHAT) | {name for name in HOST_PACKAGES if name.startswith("linux-headers")} \
    == set(HOST_PACKAGES)
#: the step times of this session's guest, for the summary at the end
TIMES: dict[str, float] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.vm)
            item.add_marker(pytest.mark.slow)


def skip_reasons() -> list[str]:
    """Why this machine cannot run the tier, one reason a missing piece (empty: it can)."""
    reasons = [f"{WHAT.get(name, 'the kernel headers the modules are built against')} "
               f"not found (apt install {name})" for name in missing_host_packages()]
    if not cache_dir("image", image_key()).is_dir() and os.geteuid() != 0:
        reasons.append("the guest image is not cached and building it needs root "
                       "(mmdebstrap's chroot mode)")
    return reasons


@dataclass(frozen=True)
class Built:
    """The session's image and modules (cached, or built now) and the step times."""

    image: Image
    modules: Modules
    steps: Steps


@pytest.fixture(scope="session")
def built() -> Built:
    reasons = skip_reasons()
    if reasons:
        pytest.skip("VM tier: " + "; ".join(reasons))
    steps = Steps()
    with steps.step("image (cached or built)"):
        image = build_image(steps)
    with steps.step("kmod (cached or built)"):
        modules = build_modules(steps)
    TIMES.update(steps.times)
    return Built(image, modules, steps)


@pytest.fixture(scope="session")
def guest(request: pytest.FixtureRequest) -> Iterator[Guest]:
    """The session's guest, set up and the service ready; with ``SHUFFLER_VM_ATTACH`` set
    to the run folder ``python -m tests.vm --keep`` printed, that guest instead (a
    quicker loop while writing a scenario: no boot, no setup)."""
    running = os.environ.get("SHUFFLER_VM_ATTACH")
    if running:
        yield attach(Path(running) / "guest")
        return
    yield from booted(request.getfixturevalue("built"))


def booted(built: Built) -> Iterator[Guest]:
    steps, image, modules = built.steps, built.image, built.modules
    run = Path(tempfile.mkdtemp(prefix="shuffler-vm-"))
    with steps.step("hand-in disk"):
        disk = data_disk(hand_in(run / "data", modules, steps), run / "data.ext4")
    with steps.step("boot to agent"):
        machine = boot(image, disk, run / "guest")
    with shut_down_after(machine, run, "vm"):
        with steps.step("guest: systemd up"):
            machine.run("systemctl is-system-running --wait", check=False, timeout=900)
        with steps.step("guest: setup to the service ready"):
            setup(machine, steps)
        TIMES.update(steps.times)
        yield machine


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed scenario's guest evidence saved at once (tests/vm/evidence.py)."""
    outcome = yield
    report = outcome.get_result()
    guest = getattr(item, "funcargs", {}).get("guest")
    if report.when == "call" and report.failed and isinstance(guest, Guest) \
            and HERE in item.path.parents:
        from tests.vm.evidence import save

        folder = save(guest, item.name)
        report.sections.append(("VM evidence", f"the guest's journal, lines, /run/shuffler, "
                                               f"unit and processes: {folder}"))


def pytest_terminal_summary(terminalreporter) -> None:
    if TIMES:
        terminalreporter.write_sep("-", "VM tier: seconds per step")
        for name, seconds in TIMES.items():
            terminalreporter.write_line(f"{seconds:8.1f}  {name}")
