"""Shared fixtures: every device backend behind one harness interface."""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from firmware_bridge.device import SerialDevice
from hardware_sim import DealerHabit, SimDevice, parse_fault_specs
from hardware_sim.gpio_rig import GpioRig
from hardware_sim.sim_avr import AVR_PACKAGES, SimAvr, build_firmware, serial_on
from hardware_sim.virtual_mcu import VirtualMCU
from shuffler.device.clock import ScaledClock, VirtualClock
from shuffler.device.contract import ShufflerDevice
from shuffler.errors import DeviceError
from shuffler.gpio.backend import GpioDevice

# every JSON object the CLI prints and the socket client reads, in this process and in
# the ones it starts, is checked against shuffler/schemas (docs/json.md)
os.environ.setdefault("SHUFFLER_CHECK_SCHEMAS", "1")
# the CLI reads the machine's config under /etc and looks for its service under /run:
# in the tests, under an empty throwaway root (tests/test_cli_discovery.py fills one)
os.environ.setdefault("SHUFFLER_SYSTEM_ROOT", tempfile.mkdtemp(prefix="shuffler-root-"))


@dataclass
class SimHarness:
    """Builds simulated devices on a virtual clock and reads the real card order."""

    name = "sim"
    card_rate = 5.0

    def make(self, cards: int = 24, faults: Iterable[str] = (), habit: str = "instructed",
             seed: int = 7) -> ShufflerDevice:
        return SimDevice.for_cards(cards, faults=parse_fault_specs(faults),
                                   rng=random.Random(seed), habit=DealerHabit(habit),
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
                                faults=parse_fault_specs(faults), habit=DealerHabit(habit),
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
                                  rng=random.Random(seed), habit=DealerHabit(habit),
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
                      "--flap-travel=0.01", "--frame-scale=0.1", f"--dealer={habit}",
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


#: test files that start a broker, a browser, the firmware in simavr, systemd's analyser,
#: long campaigns or many processes: marked ``slow``, left out of the developer's loop
#: (``pytest -m "not slow"``: the contract, the core and the CLI; README, CONTRIBUTING.md)
SLOW_FILES = frozenset({
    "test_build_docs.py", "test_campaign.py", "test_deploy.py", "test_deploy_page.py",
    "test_docs_runnable.py", "test_durability.py", "test_fault_distances.py",
    "test_firmware.py", "test_firmware_link.py", "test_guessing.py", "test_mqtt_flood.py",
    "test_page.py", "test_pass_differential.py", "test_safety.py", "test_study.py",
    "test_tables.py", "test_telemetry.py", "test_touch_told.py", "test_uptime.py",
    "test_web_lan.py", "test_calibration.py", "test_selftest.py",
})
#: single tests of a few seconds each or more (every parameter), by file and name
SLOW_TESTS = frozenset({
    ("test_planning.py", "test_with_distinct_codes_every_observed_stacking_is_exactly_uniform"),
    ("test_planning.py", "test_a_dealer_who_always_does_the_other_thing_costs_at_most_one_pass"),
    ("test_serial.py", "test_at_5_percent_no_pass_is_reported_complete_that_was_not"),
    ("test_serial.py", "test_the_decoder_survives_100000_random_and_mutated_frames"),
    ("test_serial.py",
     "test_a_silent_virtual_mcu_ends_the_pass_link_lost_within_the_documented_bound"),
    ("test_serial.py",
     "test_the_virtual_mcu_repeats_an_unacknowledged_reply_with_the_same_sequence_number"),
    ("test_races.py",
     "test_a_stop_at_any_moment_after_pass_start_keeps_the_motor_off_after_its_answer"),
    ("test_cli_options.py", "test_two_clis_never_drive_one_device_at_once"),
    ("test_packaging.py", "test_every_package_folder_is_in_the_wheel"),
    # a lint, not a behaviour (ten seconds of CPU without mypy's cache): `mypy` before landing
    ("test_packaging.py", "test_mypy_is_clean_on_the_whole_installed_tree"),
    ("test_cli_fuzz.py", "test_generated_arguments_never_give_a_traceback"),
    ("test_battery.py", "test_battery_and_pass_agree_at_every_voltage"),
    ("test_failure_shape.py", "test_a_clean_hand_reads_the_same_on_every_backend"),
    ("test_service.py", "test_killed_mid_pass_then_restarted_loses_nothing"),
    ("test_service.py", "test_sigterm_stops_cleanly_and_nothing_anywhere_holds_a_plan"),
})
#: parameters that run the firmware in simavr (the contract suite's ``harness``, the
#: ``name``/``backend`` of the per-backend tests, test_mcu_parity's ``chip_path``): slow
SLOW_BACKENDS = frozenset({"sim-avr", "simavr"})


def _on_a_slow_backend(item: pytest.Item) -> bool:
    params = getattr(item, "callspec", None)
    return params is not None and any(
        isinstance(value, str) and value in SLOW_BACKENDS for value in params.params.values())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)
        if item.path.name in SLOW_FILES or (item.path.name, name) in SLOW_TESTS or (
                _on_a_slow_backend(item)):
            item.add_marker(pytest.mark.slow)


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
    ``run("--json", "pass")``."""
    from click.testing import CliRunner

    from shuffler_cli.main import cli

    def invoke(*args: str, state: str = "state"):
        env = {"SHUFFLER_STATE_DIR": str(tmp_path / state), "SHUFFLER_CONFIG": "",
               "SHUFFLER_SOCKET": str(tmp_path / "none.sock")}
        return CliRunner().invoke(cli, ["--sim-speed", "1000000", *args], env=env,
                                  catch_exceptions=False)

    return invoke
