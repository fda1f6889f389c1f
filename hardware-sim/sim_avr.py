"""The ``sim-avr`` backend: the firmware's own ELF in simavr, reached over its serial
line. Imported only when chosen (it alone starts programs)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from shuffler.core.mechanics import Feed
from shuffler.device.contract import FaultLimits, ShufflerDevice
from shuffler.errors import DeviceError

from .motor_log import MOTOR_LOG_ENV, log_motor_line

if TYPE_CHECKING:
    from firmware_bridge.device import Timings

#: the firmware's sources: in a checkout a link to its firmware/ folder; in a wheel the
#: sources themselves, shipped as package data, so sim-avr builds them where it runs
FIRMWARE_DIR = Path(__file__).resolve().parent / "firmware"
AVR_PACKAGES = "gcc-avr avr-libc simavr libsimavr-dev"


def build_dir() -> Path:
    """Where the firmware is built: the checkout's ``firmware/build``; from a wheel
    (whose folder may not be the user's to write, and which pip removes whole) the
    user's cache, one folder for each version."""
    if FIRMWARE_DIR.is_symlink():
        return FIRMWARE_DIR.resolve() / "build"
    from shuffler import __version__

    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "shuffler" / f"firmware-{__version__}"


def build_firmware() -> Path:
    """``make -C firmware all sim`` into :func:`build_dir` (quick when up to date); the
    build folder, or DeviceError naming what is missing: the firmware's sources or the
    toolchain. One build at a time (a lock in the build folder): two processes making
    the same objects at once (two CLIs, two test workers) would link a half-written one."""
    if not (FIRMWARE_DIR / "Makefile").is_file():
        raise DeviceError(f"cannot build the firmware for sim-avr: its sources are not "
                          f"installed ({FIRMWARE_DIR / 'Makefile'} is missing; reinstall "
                          f"shuffler from its wheel or a checkout)")
    build = build_dir()
    try:
        build.mkdir(parents=True, exist_ok=True)
        with open(build / ".make.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            made = subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), f"BUILD={build}",
                                   "all", "sim"], capture_output=True, text=True, check=False)
        why = (made.stderr.strip()[-300:] or f"make exited {made.returncode}"
               if made.returncode else "")
    except OSError as e:
        if e.filename is not None and Path(e.filename).is_relative_to(build):
            raise DeviceError(f"cannot build the firmware for sim-avr in {build}: "
                              f"{e.strerror} (set XDG_CACHE_HOME to a folder of yours)"
                              ) from None
        why = str(e)
    if why:
        raise DeviceError(f"cannot build the firmware for sim-avr (it needs make, gcc and the "
                          f"packages {AVR_PACKAGES}): {why}")
    return build


def serial_on(chip: SimAvr, limits: FaultLimits | None = None, feed: Feed = Feed.TOP,
              card_rate: float = 5.0, timings: Timings | None = None) -> ShufflerDevice:
    """SerialDevice on the chip's pseudo-terminal; closing it stops the chip. Without
    ``timings``, the default ones quickened tenfold, for chips whose cards come ten
    times faster than the machine's five a second (the tests' --card-rate=50)."""
    from firmware_bridge.device import SerialDevice, default_timings

    timings = timings or default_timings().quickened(0.1)

    try:
        device = SerialDevice(chip.path, limits=limits, feed=feed, card_rate=card_rate,
                              timings=timings, kind="sim-avr", accepts_seed=True,
                              on_close=chip.close)
    except BaseException:
        chip.close()
        raise
    return device


class SimAvr:
    """The firmware's own ELF on a simulated ATmega328P (build/simavr-harness, :func:`build_dir`),
    its UART on a pseudo-terminal (:attr:`path`), the machine played on its pins. The
    harness's lines (``motor ...``, ``state ...``) land in :attr:`lines`."""

    def __init__(self, *args: str, elf: Path | None = None) -> None:
        """``elf``: another firmware than the one built here (tests: an older release's)."""
        build = build_firmware()
        self.proc = subprocess.Popen(
            [str(build / "simavr-harness"), *args, str(elf or build / "shuffler.elf")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().split()
        if first[:1] != ["pty"]:
            self.close()
            raise DeviceError("the simavr harness did not start")
        self.path = first[1]
        self.lines: queue.Queue[str] = queue.Queue()
        #: the lines of each prefix asked for by :meth:`record`, kept apart from
        #: :attr:`lines` (which :meth:`state` reads through)
        self.recorded: dict[str, list[str]] = {}
        self._reader = threading.Thread(target=self._read, daemon=True, name="simavr-lines")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        motor_log = os.environ.get(MOTOR_LOG_ENV)  # tests: the chip's motor line
        for line in self.proc.stdout:
            self.lines.put(line.strip())
            for prefix, kept in list(self.recorded.items()):
                if line.startswith(prefix):
                    kept.append(line.strip())
            if motor_log and line.startswith("motor "):
                log_motor_line(motor_log, not line.startswith("motor off"))

    def record(self, prefix: str) -> list[str]:
        """From now on, every line starting with ``prefix`` (``"pwm "``: the duty measured
        on the motor pins) is also kept in the list returned."""
        return self.recorded.setdefault(prefix, [])

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

    #: a harness quits within milliseconds of its input's end; one that does not (a frozen
    #: or stopped process) is killed after this, so that the CLI exits promptly
    QUIT_S = 1.0

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # type: ignore[union-attr]  # the harness quits
            try:
                self.proc.wait(self.QUIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        reader = getattr(self, "_reader", None)
        if reader is not None and reader is not threading.current_thread():
            reader.join(1)  # its last lines (the motor going off) are read


#: the harness's fastest card rate: a card still blocks the beam 4 ms, twice the
#: firmware's default glitch filter (min_blocked)
SIM_AVR_MAX_RATE = 100.0
