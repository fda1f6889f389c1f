"""``python -m tests.vm``: the VM tier's session once, outside pytest, each step timed:
the image and modules (built or cached), the hand-in disk, the boot, the setup in the
guest (tests/vm/machine.py); then the guest is shut down. ``--keep`` leaves it running
for a look (its agent socket and console are in the printed run folder), and for
``SHUFFLER_VM_ATTACH=<run folder> pytest -m vm`` to run the scenarios in it."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tests.vm.guest import boot, data_disk
from tests.vm.image import Steps, build_image, missing_host_packages
from tests.vm.kmod import build_modules
from tests.vm.machine import hand_in, setup


def main(argv: list[str]) -> int:
    missing = missing_host_packages()
    if missing:
        print(f"vm: missing host packages: {' '.join(missing)}", file=sys.stderr)
        return 2
    steps = Steps()
    run = Path(tempfile.mkdtemp(prefix="shuffler-vm-"))
    with steps.step("image"):
        image = build_image(steps)
    with steps.step("kmod"):
        modules = build_modules(steps)
    with steps.step("hand-in disk"):
        disk = data_disk(hand_in(run / "data", modules, steps), run / "data.ext4")
    with steps.step("boot to agent"):
        guest = boot(image, disk, run / "guest")
    try:
        with steps.step("guest: systemd up"):
            guest.run("systemctl is-system-running --wait", check=False, timeout=600)
        with steps.step("guest: setup"):
            setup(guest, steps)
        print(guest.run("systemctl status shuffler --no-pager", check=False).out)
    finally:
        if "--keep" not in argv:
            guest.shutdown()
    seconds = {name: round(value, 1) for name, value in steps.times.items()}
    print(json.dumps({"run": str(run), "seconds": seconds}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
