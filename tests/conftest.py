"""Shared fixtures: every device backend behind one harness interface."""

from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

import pytest

from firmware_bridge.device import SerialDevice
from hardware_sim import SimDevice, parse_fault_specs
from hardware_sim.dealer import DealerHabit
from hardware_sim.gpio_rig import GpioRig
from hardware_sim.sim_avr import AVR_PACKAGES, SimAvr, build_firmware, serial_on
from hardware_sim.virtual_mcu import VirtualMCU
from shuffler.control.signals import ENDINGS
from shuffler.device.clock import ScaledClock, VirtualClock
from shuffler.device.contract import ShufflerDevice
from shuffler.errors import DeviceError
from shuffler.gpio.device import GpioDevice
from tests.cli import invoke


def dealer(spec: str) -> dict:
    """``HABIT`` or ``HABIT:ignores``: the simulated dealer's keywords."""
    habit, _, ignores = spec.partition(":")
    return {"habit": DealerHabit(habit), "listens": ignores != "ignores"}

# every JSON object the CLI prints and the socket client reads, in this process and in
# the ones it starts, is checked against shuffler/schemas (docs/json.md)
os.environ.setdefault("SHUFFLER_CHECK_SCHEMAS", "1")
# the CLI reads the machine's config under /etc and looks for its service under /run:
# in the tests, under an empty throwaway root (tests/test_cli_discovery.py fills one),
# made once by the first process of a run (xdist's workers and the processes the tests
# start inherit it) and removed when that process ends
if "SHUFFLER_SYSTEM_ROOT" not in os.environ:
    os.environ["SHUFFLER_SYSTEM_ROOT"] = tempfile.mkdtemp(prefix="shuffler-root-")
    atexit.register(shutil.rmtree, os.environ["SHUFFLER_SYSTEM_ROOT"], ignore_errors=True)
# a suite started in the background of a script (``pytest &``, nohup) inherits SIGINT and
# SIGQUIT ignored, and so would every CLI it starts: the CLI rightly leaves an ignored
# signal alone (shuffler/control/signals.py), so the signal tests would see nothing
# happen. The CLIs here start with every ending signal at its default.
for _sig in ENDINGS:
    if signal.getsignal(_sig) is signal.SIG_IGN:
        signal.signal(_sig, signal.default_int_handler if _sig == signal.SIGINT
                      else signal.SIG_DFL)


@dataclass
class SimHarness:
    """Builds simulated devices on a virtual clock and reads the real card order."""

    name = "sim"
    card_rate = 5.0

    def make(self, cards: int = 24, faults: Iterable[str] = (), habit: str = "instructed",
             seed: int = 7) -> ShufflerDevice:
        return SimDevice.for_cards(cards, faults=parse_fault_specs(faults),
                                   rng=random.Random(seed), **dealer(habit),
                                   clock=VirtualClock())

    def pack(self, device: ShufflerDevice) -> list:
        """The cards in the tray, top first: what the machine really holds."""
        return list(device.mechanism.tray)

    def piles(self, device: ShufflerDevice) -> tuple[list, list]:
        return device.mechanism.piles

    def settle(self, device: ShufflerDevice) -> None:
        """Let the simulated dealer finish what the LED asked (instant here)."""


class GpioHarness:
    """The real GpioDevice on gpiozero's mock pins, driven by the simulated mechanism
    on the rig's device time: the Lotus's card rate and the default limits, instantly."""

    name = "gpio"
    card_rate = 5.0

    def __init__(self) -> None:
        self.rigs: dict[int, GpioRig] = {}

    def make(self, cards: int = 24, faults: Iterable[str] = (), habit: str = "instructed",
             seed: int = 7) -> ShufflerDevice:
        rig = GpioRig.for_cards(cards, card_rate=self.card_rate,
                                faults=parse_fault_specs(faults), **dealer(habit),
                                rng=random.Random(seed))
        dev = GpioDevice(rig.gpio, pin_factory=rig.factory, clock=rig.clock)
        rig.start()
        self.rigs[id(dev)] = rig
        self._open.append((rig, dev))
        return dev

    def pack(self, device: ShufflerDevice) -> list:
        return list(self.rigs[id(device)].mechanism.tray)

    def piles(self, device: ShufflerDevice) -> tuple[list, list]:
        return self.rigs[id(device)].mechanism.piles

    def settle(self, device: ShufflerDevice, timeout: float = 5.0) -> None:
        """Let the rig's dealer act on what the LED shows, in the rig's time."""
        rig = self.rigs[id(device)]
        deadline = rig.clock.now() + timeout
        while not rig.settled() and rig.clock.now() < deadline:
            rig.clock.sleep(0.01)

    def close(self) -> None:
        for rig, dev in self._open:
            rig.stop()
            dev.close()

    _open: list


class SerialHarness:
    """SerialDevice on a real pseudo-terminal, talking to the virtual microcontroller,
    whose simulated machine runs fifty times faster than real time."""

    name = "serial"
    card_rate = 5.0  # in the machine's own time, which its reports use

    def __init__(self) -> None:
        self.mcus: dict[int, VirtualMCU] = {}

    def make(self, cards: int = 24, faults: Iterable[str] = (), habit: str = "instructed",
             seed: int = 7) -> ShufflerDevice:
        sim = SimDevice.for_cards(cards, faults=parse_fault_specs(faults),
                                  rng=random.Random(seed), **dealer(habit),
                                  clock=ScaledClock(50))
        mcu = VirtualMCU(sim, seed=seed)
        dev = SerialDevice(mcu.path)
        self.mcus[id(dev)] = mcu
        self._open.append((mcu, dev))
        return dev

    def pack(self, device: ShufflerDevice) -> list:
        return list(self.mcus[id(device)].sim.mechanism.tray)

    def piles(self, device: ShufflerDevice) -> tuple[list, list]:
        return self.mcus[id(device)].sim.mechanism.piles

    def settle(self, device: ShufflerDevice) -> None:
        """Wait for the microcontroller's simulated dealer to free the throat."""
        assert self.mcus[id(device)].settle()

    def close(self) -> None:
        for mcu, dev in self._open:
            dev.close()
            mcu.close()

    _open: list


class AvrHarness:
    """SerialDevice on the firmware's own ELF in simavr (firmware/harness): the real
    binary, its pins playing the machine in real time at a fast card rate."""

    name = "sim-avr"
    card_rate = 50.0
    _missing: str | None = None

    def __init__(self) -> None:
        if AvrHarness._missing is None:
            try:
                build_firmware()
                AvrHarness._missing = ""
            except DeviceError as e:
                AvrHarness._missing = f"needs the packages {AVR_PACKAGES} ({e})"
        if AvrHarness._missing:
            pytest.skip(AvrHarness._missing)
        self.chips: dict[int, SimAvr] = {}

    def make(self, cards: int = 24, faults: Iterable[str] = (), habit: str = "instructed",
             seed: int = 7) -> ShufflerDevice:
        # the flap and its servo frame quickened with the card rate (a tenth of real)
        chip = SimAvr(f"--cards={cards}", f"--card-rate={self.card_rate}", "--spinup=0.01",
                      "--flap-travel=0.01", "--frame-scale=0.1",
                      f"--dealer={habit.partition(':')[0]}",  # it never hears a warning
                      f"--seed={seed}", *(f"--fault={f}" for f in faults))
        dev = serial_on(chip)
        self.chips[id(dev)] = chip
        self._open.append(dev)
        return dev

    def _cards(self, device: ShufflerDevice, key: str) -> list:
        return [int(c) for c in self.chips[id(device)].state()[key].split(",") if c]

    def pack(self, device: ShufflerDevice) -> list:
        return self._cards(device, "tray")

    def piles(self, device: ShufflerDevice) -> tuple[list, list]:
        return self._cards(device, "left"), self._cards(device, "right")

    def settle(self, device: ShufflerDevice, timeout: float = 3.0) -> None:
        """Wait for the simulated dealer (it acts on the LED the firmware shows)."""
        chip = self.chips[id(device)]
        deadline = time.monotonic() + timeout
        while chip.state()["settled"] != "1" and time.monotonic() < deadline:
            time.sleep(0.02)

    def close(self) -> None:
        for dev in self._open:
            dev.close()

    _open: list


BACKENDS = {"sim": SimHarness, "gpio": GpioHarness, "serial": SerialHarness,
            "sim-avr": AvrHarness}


#: a test says its own tier: ``pytestmark = pytest.mark.slow`` in its file, or
#: ``@pytest.mark.slow`` on it, when it needs a broker, a browser, the firmware in simavr,
#: systemd, the VM or seconds of real time (README, CONTRIBUTING.md "Tests, in tiers").
#: One rule is by parameter, as no test can say it for one case of a fixture: a parameter
#: that runs the firmware in simavr (the contract suite's ``harness``, the ``name``/``backend``
#: of the per-backend tests, test_mcu_parity's ``chip_path``) is slow.
SLOW_BACKENDS = frozenset({"sim-avr", "simavr"})
#: the programs that are a real part: a test not marked slow that starts one (itself or
#: through a fixture, in this process) fails, naming it (tests/test_tiers.py)
REAL_PARTS = {
    "simavr-harness": "the firmware in simavr", "mosquitto": "a broker",
    "chromedriver": "a browser", "chromium": "a browser",
    "qemu-system-x86_64": "the VM", "systemd-analyze": "systemd", "systemctl": "systemd",
}


def _on_a_slow_backend(item: pytest.Item) -> bool:
    params = getattr(item, "callspec", None)
    return params is not None and any(
        isinstance(value, str) and value in SLOW_BACKENDS for value in params.params.values())


#: every test collected in this process, before ``-m`` deselects any (tests/test_tiers.py)
COLLECTED = pytest.StashKey[list[pytest.Item]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _on_a_slow_backend(item):
            item.add_marker(pytest.mark.slow)
    config.stash[COLLECTED] = list(items)


def real_part(argv: object) -> str | None:
    """The real part a new process's argv starts (``None``: none of them): the program
    itself, or the CLI told ``--device sim-avr``."""
    words = [argv] if isinstance(argv, str | bytes | os.PathLike) else (
        list(argv) if isinstance(argv, list | tuple) else [])
    words = [os.fsdecode(w) for w in words if isinstance(w, str | bytes | os.PathLike)]
    if not words:
        return None
    if "sim-avr" in words or "--device=sim-avr" in words:
        return REAL_PARTS["simavr-harness"]
    return REAL_PARTS.get(os.path.basename(words[0]))


class _Watch:
    """What the running quick-tier test started: the audit hook sees every process this
    one starts, in any thread, and a hook cannot be removed, so it looks at a flag."""

    on = False
    started: ClassVar[list[str]] = []

    @classmethod
    def audit(cls, event: str, args: tuple) -> None:
        if cls.on and event == "subprocess.Popen" and (part := real_part(args[1])):
            cls.started.append(part)


sys.addaudithook(_Watch.audit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    _Watch.started.clear()
    _Watch.on = item.get_closest_marker("slow") is None
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    try:
        result = yield
    finally:
        _Watch.on = False
    if _Watch.started:
        pytest.fail(f"{item.nodeid} starts {', '.join(sorted(set(_Watch.started)))} but is "
                    "not marked slow: add @pytest.mark.slow (CONTRIBUTING.md, tiers)",
                    pytrace=False)
    return result


@pytest.fixture(params=sorted(BACKENDS))
def harness(request):
    """One harness per backend; the contract tests run against each."""
    h = BACKENDS[request.param]()
    h._open = []
    yield h
    if hasattr(h, "close"):
        h.close()


@pytest.fixture
def sim() -> SimHarness:
    return SimHarness()


@pytest.fixture
def run(tmp_path):
    """``shuffler`` in-process on the simulator at full speed, in this test's own state
    folder (``state="b"``: another one), with no config and no service:
    ``run("--json", "pass")``. As a process of its own: ``tests/cli.py``'s ``process``."""

    def invoke_here(*args: str, state: str = "state"):
        return invoke(tmp_path, *args, state=state)

    return invoke_here
