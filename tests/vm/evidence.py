"""Issue 46: a VM scenario that fails leaves the guest's evidence on the host, saved at
once (before the next scenario's restore changes it): the journal of this boot, the
line's state (the simulated chip's lines, who holds each: debugfs's gpio table, what
``gpioinfo`` prints), the service's working folder with lgpio's notification FIFOs
(/run/shuffler), the unit as systemd sees it, and the process list. The folder is printed
in the failure's report (``SHUFFLER_VM_EVIDENCE`` picks where; a temporary folder
otherwise)."""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

from tests.vm.guest import SIM_DEVICE, Guest

#: file name -> the shell command whose output it holds
COMMANDS = {
    "journal.txt": "journalctl -b --no-pager -o short-monotonic | tail -n 20000",
    "lines.txt": (f"for d in {SIM_DEVICE}/gpiochip*/sim_gpio*; do "
                  "echo \"$(basename $d) value=$(cat $d/value) pull=$(cat $d/pull)\"; done; "
                  "mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug; "
                  "cat /sys/kernel/debug/gpio"),
    "run-shuffler.txt": "ls -la /run/shuffler; for f in /run/shuffler/.lgd-nfy* "
                        "/run/shuffler/*; do stat \"$f\"; done; ls -la /proc/$(systemctl show "
                        "-p MainPID --value shuffler)/fd",
    "unit.txt": "systemctl status shuffler --no-pager -l; systemctl show shuffler",
    "processes.txt": "ps -eo pid,ppid,stat,etimes,wchan:24,args --forest",
}


def save(guest: Guest, test: str) -> Path:
    """Every :data:`COMMANDS`' output (what it printed on stderr too) in a new folder."""
    base = Path(os.environ.get("SHUFFLER_VM_EVIDENCE") or tempfile.gettempdir())
    folder = base / f"shuffler-vm-evidence-{time.strftime('%Y%m%d-%H%M%S')}-" \
                    f"{re.sub(r'[^A-Za-z0-9_.-]', '_', test)[:80]}"
    folder.mkdir(parents=True, exist_ok=True)
    for name, command in COMMANDS.items():
        try:
            done = guest.run(command, check=False, timeout=120)
            text = done.out + (f"\n--- stderr (exit {done.rc})\n{done.err}" if done.err else "")
        except Exception as e:  # the guest may be what failed: say so, save the rest
            text = f"could not run {command!r}: {type(e).__name__}: {e}"
        (folder / name).write_text(text)
    return folder
