"""The ``sim-avr`` backend: the firmware's own ELF in simavr, reached over its serial
line. Imported only when chosen (it alone starts programs)."""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from shuffler.core.mechanics import Feed
from shuffler.device.contract import FaultLimits, ShufflerDevice
from shuffler.errors import DeviceError

if TYPE_CHECKING:
    from firmware_bridge.device import Timings

FIRMWARE_DIR = Path(__file__).resolve().parents[1] / "firmware"
AVR_PACKAGES = "gcc-avr avr-libc simavr libsimavr-dev"


def build_firmware() -> None:
    """``make -C firmware all sim`` (quick when up to date); DeviceError if it cannot."""
    try:
        build = subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), "all", "sim"],
                               capture_output=True, text=True, check=False)
        why = (build.stderr.strip()[-300:] or f"make exited {build.returncode}"
               if build.returncode else "")
    except OSError as e:
        why = str(e)
    if why:
        raise DeviceError(f"cannot build the firmware for sim-avr (it needs make, gcc and the "
                          f"packages {AVR_PACKAGES}): {why}")


def serial_on(chip: SimAvr, limits: FaultLimits | None = None, feed: Feed = Feed.TOP,
              card_rate: float = 5.0, timings: Timings | None = None) -> ShufflerDevice:
    """SerialDevice on the chip's pseudo-terminal; closing it stops the chip. Without
    ``timings``, the default ones quickened tenfold, for chips whose cards come ten
    times faster than the machine's five a second (the tests' --card-rate=50)."""
    from firmware_bridge.device import SerialDevice, Timings

    timings = timings or Timings().quickened(0.1)

    try:
        device = SerialDevice(chip.path, limits=limits, feed=feed, card_rate=card_rate,
                              timings=timings)
    except BaseException:
        chip.close()
        raise
    device.on_close = chip.close
    device._info = replace(device.info, kind="sim-avr", accepts_seed=True)
    return device


class SimAvr:
    """The firmware's own ELF on a simulated ATmega328P (firmware/build/simavr-harness),
    its UART on a pseudo-terminal (:attr:`path`), the machine played on its pins. The
    harness's lines (``motor ...``, ``state ...``) land in :attr:`lines`."""

    def __init__(self, *args: str) -> None:
        build_firmware()
        self.proc = subprocess.Popen(
            [str(FIRMWARE_DIR / "build" / "simavr-harness"), *args,
             str(FIRMWARE_DIR / "build" / "shuffler.elf")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().split()
        if first[:1] != ["pty"]:
            self.close()
            raise DeviceError("the simavr harness did not start")
        self.path = first[1]
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True, name="simavr-lines")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        motor_log = os.environ.get("SHUFFLER_MOTOR_LOG")  # tests: the chip's motor line
        for line in self.proc.stdout:
            self.lines.put(line.strip())
            if motor_log and line.startswith("motor "):
                from .kept_pins import log_motor_line

                log_motor_line(motor_log, not line.startswith("motor off"))

    def command(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def state(self, timeout: float = 5.0) -> dict[str, str]:
        """The harness's ``state`` line as a dict (``tray``, ``left``, ``motor``, ...)."""
        self.command("state")
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            line = self.lines.get(timeout=left)
            if line.startswith("state "):
                return dict(item.partition("=")[::2] for item in line.split()[1:])
        raise DeviceError("the simavr harness did not answer")

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # type: ignore[union-attr]  # the harness quits
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        reader = getattr(self, "_reader", None)
        if reader is not None and reader is not threading.current_thread():
            reader.join(1)  # its last lines (the motor going off) are read


#: the harness's fastest card rate: a card still blocks the beam 4 ms, twice the
#: firmware's default glitch filter (min_blocked)
SIM_AVR_MAX_RATE = 100.0
