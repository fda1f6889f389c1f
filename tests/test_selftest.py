"""The self-test on the rig: a well-wired machine passes every step, and each miswire
the rig can make is caught at the step of the part that is wrong, with what to check."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hardware_sim.bench import MISWIRES, RigBuilder, miswire
from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
from shuffler import pinmap
from shuffler.config import GpioConfig, load_config_text
from shuffler.core.mechanics import Pile
from shuffler.gpio.selftest import (
    MOTOR_SECONDS,
    GpioBench,
    Outcome,
    SelfTest,
    set_divider_ratio,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def rigged():
    made = []

    def make(gpio: GpioConfig | None = None, wrong: str | None = None):
        rig = GpioRig.for_cards(24, gpio=gpio)
        dev = RiggedGpioDevice(rig)
        made.append(dev)
        if wrong:
            miswire(rig, wrong)
        return dev, SelfTest(GpioBench(dev), RigBuilder(rig), timeout=1.0)
    yield make
    for dev in made:
        dev.close()


def outcomes(report) -> dict[str, str]:
    return {s.step: s.outcome.value for s in report.steps}


def test_a_well_wired_machine_passes_every_step_and_is_calibrated(rigged):
    dev, test = rigged()
    report = test.run()
    assert outcomes(report) == dict.fromkeys(SelfTest.STEPS, "pass"), report.to_dict()
    assert report.passed and not dev.motor_on
    # the rig's meter reads the simulated block; the calibrated ratio is the true one
    assert report.divider_ratio == pytest.approx(pinmap.divider_ratio(), rel=0.01)
    json.dumps(report.to_dict())


#: each miswire, the step that must fail, and words its finding must name
CAUGHT = {
    "dead_touch": ("touch", "pin 11"),
    "tray_and_left_pile_swapped": ("tray", "swapped"),
    "piles_swapped": ("pile_left", "swapped"),
    "dead_beam": ("beam", "IR emitter"),
    "motor_reversed": ("motor", "reversed"),
    "dead_motor": ("motor", "nSLEEP"),
    "dead_servo": ("flap", "servo"),
    "red_and_blue_swapped": ("light", "swapped"),
    "dead_buzzer": ("buzzer", "2N3904"),
    "divider_10k_10k": ("battery", "R1"),
    "divider_120k_33k": ("battery", "R1"),
    "adc_absent": ("battery", "adc_channel = false"),
    "adc_dout_high": ("battery", "full scale"),
}


def test_every_miswire_is_in_the_table():
    assert set(CAUGHT) == set(MISWIRES)


@pytest.mark.parametrize("wrong", sorted(CAUGHT))
def test_a_miswired_machine_fails_at_the_part_that_is_wrong(rigged, wrong):
    step, words = CAUGHT[wrong]
    _dev, test = rigged(wrong=wrong)
    report = test.run()
    failed = report.failed()
    assert failed and failed[0].step == step, report.to_dict()
    assert words in failed[0].detail + " " + failed[0].check
    # a swap shows again at the other part's step; nothing else fails
    assert all(f.step in (step, "pile_left", "pile_right") for f in failed)
    skipped = [s.step for s in report.steps if s.outcome is Outcome.SKIP]
    if "over range" in " ".join(s.detail for s in report.steps):
        # more than 3.3 V at CH0: nothing after the rails runs
        assert skipped == list(SelfTest.STEPS[1:]), report.to_dict()
    elif wrong == "adc_absent":  # the floor: no 9 V at the mechanism, nothing moves
        assert skipped == ["motor", "flap"], report.to_dict()
    else:
        assert not skipped, report.to_dict()
    assert not report.passed


def test_swapped_piles_name_both_sensors_and_their_pins(rigged):
    _dev, test = rigged(wrong="piles_swapped")
    found = test.run().failed()[0]
    assert found.part == "left pile sensor"
    assert "GPIO6, pin 31" in found.detail and "GPIO5, pin 29" in found.detail


#: a config that moves touch and others off the defaults (GPIO17, 25, 5, 24, 18, 26)
MOVED = {"touch": 27, "tray": 22, "pile_left": 23, "beam": 4, "diverter": 19, "buzzer": 7,
         "motor": 14, "motor_backward": 15}


@pytest.mark.parametrize(("wrong", "role"), [
    ("dead_touch", "touch"), ("tray_and_left_pile_swapped", "tray"),
    ("dead_beam", "beam"), ("dead_servo", "diverter"), ("dead_buzzer", "buzzer"),
    ("dead_motor", "motor")])
def test_the_findings_name_the_configured_pins_not_the_defaults(rigged, wrong, role):
    gpio = replace(GpioConfig(), **MOVED)
    _dev, test = rigged(gpio, wrong=wrong)
    found = test.run().failed()[0]
    words = found.detail + " " + found.check
    bcm = MOVED[role]
    assert f"[pins] {role} (GPIO{bcm}, pin {pinmap.header_pin(bcm)})" in words \
        or f"to pin {pinmap.header_pin(bcm)}" in words, words
    default = pinmap.WIRES[role]
    assert f"GPIO{default.bcm}," not in words and f"pin {default.header}" not in words, words
    if wrong == "tray_and_left_pile_swapped":  # both of the swapped pair, as configured
        assert "[pins] pile_left (GPIO23, pin 16)" in words


def test_a_dead_touch_on_gpio27_says_pin_13_where_to_look(rigged):
    _dev, test = rigged(replace(GpioConfig(), touch=27), wrong="dead_touch")
    found = test.run().failed()[0]
    assert found.step == "touch"
    assert "[pins] touch (GPIO27, pin 13)" in found.detail
    assert found.check.startswith("U4, the TTP223") and "I/O to pin 13" in found.check
    assert "GPIO17" not in found.detail + found.check and "pin 11" not in found.check


def test_a_machine_without_a_monitor_or_a_light_skips_those_steps(rigged):
    gpio = replace(GpioConfig(), adc_channel=None, led_red=None, led_green=None,
                   led_blue=None, buzzer=None)
    _dev, test = rigged(gpio)
    report = test.run()
    result = outcomes(report)
    assert result["battery"] == result["light"] == result["buzzer"] == "skip"
    assert report.passed and all(v == "pass" for k, v in result.items()
                                 if k not in ("battery", "light", "buzzer"))


def test_nobody_at_the_bench_skips_the_steps_that_need_hands(rigged):
    dev, _ = rigged()

    class Nobody:
        can_act = False

        def act(self, action, text):
            pass

        def confirm(self, question, text):
            return False

        def ask(self, question, text, choices):
            return None

        def measure(self, question, text):
            return None

    report = SelfTest(GpioBench(dev), Nobody(), timeout=0.2).run()
    assert all(s.outcome is Outcome.SKIP for s in report.steps if s.step != "battery")
    assert outcomes(report)["battery"] == "pass" and report.divider_ratio is None
    assert not dev.motor_on


@pytest.mark.parametrize("text", [
    "", "device = \"gpio\"\n", "[gpio]\nmotor = \"motor\"\n",
    "[gpio]\ndivider_ratio = 4.03   # 100k over 33k\n[hand]\npasses = 5\n",
])
def test_the_calibration_is_written_into_the_config_keeping_the_rest(text):
    new = set_divider_ratio(text, 4.0712)
    cfg = load_config_text(new)
    assert cfg.gpio.divider_ratio == pytest.approx(4.0712)
    before = load_config_text(text)
    assert replace(cfg.gpio, divider_ratio=before.gpio.divider_ratio) == before.gpio
    assert cfg.hand == before.hand and cfg.device == before.device


def selftest_cli(tmp_path, *args: str):
    from click.testing import CliRunner

    from shuffler_cli.main import cli

    env = {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_CONFIG": "",
           "SHUFFLER_NO_SERVICE": "1"}
    return CliRunner().invoke(cli, ["--device", "sim-gpio", *args], env=env,
                              catch_exceptions=False)


def test_the_command_passes_on_the_rig_and_writes_the_calibration(tmp_path):
    config = tmp_path / "shuffler.toml"
    config.write_text("[hand]\npasses = 5\n")
    result = selftest_cli(tmp_path, "--config", str(config), "selftest", "--yes", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["selftest"]["passed"] and out["written_to"] == str(config)
    cfg = load_config_text(config.read_text())
    assert cfg.hand.passes == 5
    assert cfg.gpio.divider_ratio == pytest.approx(out["selftest"]["divider_ratio"])


def test_the_command_names_the_miswired_part_and_exits_3(tmp_path):
    result = selftest_cli(tmp_path, "selftest", "--yes", "--json", "--sim-miswire",
                          "dead_beam")
    assert result.exit_code == 3
    out = json.loads(result.stdout)
    failed = [s for s in out["selftest"]["steps"] if s["outcome"] == "fail"]
    assert [s["part"] for s in failed] == ["card beam"]
    assert out["written_to"] is None  # a simulated machine writes no config of its own
    text = selftest_cli(tmp_path, "selftest", "--yes", "--sim-miswire", "dead_beam").output
    assert "FAIL beam" in text and "check: the IR emitter" in text


def test_the_command_refuses_a_machine_without_gpio_pins(tmp_path):
    from click.testing import CliRunner

    from shuffler_cli.main import cli

    result = CliRunner().invoke(cli, ["--device", "sim", "selftest", "--yes"],
                                env={"SHUFFLER_STATE_DIR": str(tmp_path), "SHUFFLER_CONFIG": ""})
    assert result.exit_code == 2 and "--device gpio" in result.output


def _on_spells(pin, since: int = 1) -> list[float]:
    """How long the pin stayed on each time it came on (after its first ``since`` states)."""
    spells, on_at, t = [], None, 0.0
    for state in pin.states[since:]:
        t += state.timestamp
        if float(state.state) > 0.5 and on_at is None:
            on_at = t
        elif float(state.state) <= 0.5 and on_at is not None:
            spells.append(t - on_at)
            on_at = None
    return spells


def test_low_battery_and_a_jam_differ_in_blink_and_beeps():
    """A dealer who cannot tell amber from red still tells them apart: low battery blinks
    slowly with two long beeps, a jam flickers with five short ones."""
    import time

    from gpiozero.pins.mock import MockFactory, MockPWMPin

    from shuffler.device.contract import Signal, Status
    from shuffler.gpio.device import GpioDevice

    factory = MockFactory(pin_class=MockPWMPin)
    dev = GpioDevice(replace(GpioConfig(), adc_channel=None), pin_factory=factory)
    try:
        seen = {}
        for signal, window in ((Signal.LOW_BATTERY, 2.4), (Signal.FAULT, 1.0)):
            red, buzzer = factory.pin(GpioConfig().led_red), factory.pin(GpioConfig().buzzer)
            red.clear_states()
            buzzer.clear_states()
            dev.show(Status(signal))
            time.sleep(window)
            seen[signal] = (_on_spells(buzzer), _on_spells(red))
        (low_beeps, low_light), (jam_beeps, jam_light) = seen[Signal.LOW_BATTERY], \
            seen[Signal.FAULT]
        assert len(low_beeps) == 2 and min(low_beeps) > 0.4
        assert len(jam_beeps) == 5 and max(jam_beeps) < 0.2
        assert low_light and min(low_light) > 0.7  # a slow blink
        assert len(jam_light) >= 3 and max(jam_light) < 0.3  # a fast flicker
    finally:
        dev.close()


class Nobody:
    """``--yes`` on a real machine, as the CLI plays it."""

    can_act = False

    def act(self, action, text):
        pass

    def confirm(self, question, text):
        return False

    def ask(self, question, text, choices):
        return None

    def measure(self, question, text):
        return None


def driven(pin, since: int = 0) -> list[float]:
    """The levels a mock pin was driven to after its first ``since`` states."""
    return [float(s.state) for s in pin.states[since:]]


def test_the_rails_come_first_and_the_moving_parts_last(rigged):
    _dev, test = rigged()
    seen: list[str] = []
    test.run(on_step=lambda r: seen.append(r.step))
    assert seen == list(SelfTest.STEPS)
    assert seen[0] == "battery" and seen[-2:] == ["motor", "flap"]
    assert seen.index("light") < seen.index("motor")


@pytest.mark.parametrize("builder", ["nobody", "rig that never confirms"])
def test_unattended_nothing_that_moves_is_driven_on_the_pins(rigged, builder):
    dev, _ = rigged()
    rig = dev.rig
    motor, backward = (rig.factory.pin(dev.gpio.motor), rig.factory.pin(dev.gpio.motor_backward))
    servo = rig.factory.pin(dev.gpio.diverter)
    opened = len(servo.states), driven(servo)[-1]
    who = Nobody() if builder == "nobody" else RigBuilder(rig, moves=False)
    report = SelfTest(GpioBench(dev), who, timeout=0.3).run()
    steps = {s.step: s for s in report.steps}
    for name in ("motor", "flap"):
        assert steps[name].outcome is Outcome.SKIP and "never with --yes" in steps[name].detail
    assert max(driven(motor) + driven(backward)) == 0.0  # the motor was never driven
    assert driven(servo, opened[0]) in ([], [opened[1]])  # the flap was not moved
    assert not dev.motor_on


def test_a_builder_who_says_hands_are_clear_sees_the_motor_run(rigged):
    dev, test = rigged()
    backward = dev.rig.factory.pin(dev.gpio.motor_backward)
    runs, real = [], test.bench.run_motor

    def run_motor(speed: float, seconds: float) -> None:
        if seconds:
            runs.append((speed, seconds))
        real(speed, seconds)
    test.bench.run_motor = run_motor  # type: ignore[method-assign]
    report = test.run()
    assert {s.step: s.outcome for s in report.steps}["motor"] is Outcome.PASS
    # the last run (backward) at the motor's capped full duty, as the docs say, for 1.5 s
    assert max(driven(backward)) == pytest.approx(dev.gpio.motor_max_duty, abs=0.01)
    assert [round(abs(speed), 2) for speed, _ in runs] == [1.0, 1.0]
    assert [seconds for _, seconds in runs] == [MOTOR_SECONDS] * 2 and MOTOR_SECONDS >= 1.5
    assert driven(backward)[-1] == 0.0 and not dev.motor_on


def test_the_calibration_is_the_mean_of_many_readings_and_a_wandering_tap_fails(rigged):
    dev, _ = rigged()
    bench = GpioBench(dev)
    reads = iter([1.0, 2.0] * 20)
    bench.adc_volts = lambda: next(reads)  # type: ignore[method-assign]
    result = SelfTest(bench, RigBuilder(dev.rig), timeout=0.3, skip=SelfTest.STEPS[1:]).battery()
    assert result.outcome is Outcome.FAIL and "wanders" in result.detail and "C3" in result.check


def test_the_command_with_yes_never_drives_the_motor_and_says_so(tmp_path, monkeypatch):
    import shuffler_cli.selftest as command

    opened = []

    def spy(app):
        device = real(app)
        opened.append((device, len(device.rig.factory.pin(device.gpio.diverter).states)))
        return device
    real = command.open_alone
    monkeypatch.setattr(command, "open_alone", spy)
    result = selftest_cli(tmp_path, "selftest", "--yes")
    assert result.exit_code == 0, result.output
    assert "nothing that moves was run" in result.output
    (device, since), = opened
    pins = device.rig.factory
    # from the pins' creation to the close: the motor's pins and the servo's duty stay 0
    assert set(driven(pins.pin(device.gpio.motor)) +
               driven(pins.pin(device.gpio.motor_backward))) == {0.0}
    assert set(driven(pins.pin(device.gpio.diverter))) == {0.0}
    assert device.still and since >= 1


def test_the_calibration_lands_in_the_config_given_after_a_diff(tmp_path):
    config = tmp_path / "service.toml"
    config.write_text("# the service's config\n[gpio]\ndivider_ratio = 4.03\n")
    result = selftest_cli(tmp_path, "--config", str(config), "selftest", "--yes")
    assert result.exit_code == 0, result.output
    ratio = load_config_text(config.read_text()).gpio.divider_ratio
    assert ratio != 4.03 and f"written to {config}" in result.output
    assert f"-divider_ratio = 4.03\n+divider_ratio = {ratio:.4f}" in result.stderr
    assert config.read_text().startswith("# the service's config\n")


def test_a_real_machine_writes_to_the_system_config_not_the_users(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import shuffler_cli.selftest as command

    monkeypatch.setattr(command, "SYSTEM_CONFIG", str(tmp_path / "etc.toml"))
    app = SimpleNamespace(options=SimpleNamespace(config_path=None))
    assert command.config_target(app, simulated=False) == tmp_path / "etc.toml"
    assert command.config_target(app, simulated=True) is None
    app.options.config_path = "mine.toml"
    assert str(command.config_target(app, simulated=False)) == "mine.toml"


def test_the_command_is_refused_while_the_service_holds_the_machine(tmp_path):
    from shuffler.store.lock import MachineLock

    held = MachineLock(tmp_path / "state").acquire("shuffler serve")
    try:
        result = selftest_cli(tmp_path, "selftest", "--yes", "--json")
    finally:
        held.release()
    assert result.exit_code == 3
    error = json.loads(result.stdout)["error"]
    assert "shuffler serve" in error["message"]
    assert "sudo systemctl stop shuffler" in error["message"]


def test_a_real_machine_is_refused_while_the_deployed_service_holds_its_lock(tmp_path,
                                                                             monkeypatch):
    import shuffler_cli.selftest as command
    from shuffler.store.lock import MachineLock

    system = tmp_path / "var-lib-shuffler"
    monkeypatch.setattr(command, "SYSTEM_STATE_DIR", str(system))
    held = MachineLock(system).acquire("shuffler serve")  # the service made the lock file
    try:
        from click.testing import CliRunner

        from shuffler_cli.main import cli

        result = CliRunner().invoke(cli, ["--device", "gpio", "selftest", "--yes"], env={
            "SHUFFLER_STATE_DIR": str(tmp_path / "mine"), "SHUFFLER_CONFIG": ""})
    finally:
        held.release()
    assert result.exit_code == 3, result.output
    assert "sudo systemctl stop shuffler" in result.output


def test_a_self_test_never_creates_the_services_lock_file(tmp_path, monkeypatch):
    """Run as root before the service ever ran, a lock file the self-test made would be
    root's, and the service could not open it: the self-test only uses one that exists."""
    import shuffler_cli.selftest as command

    system = tmp_path / "var-lib-shuffler"
    system.mkdir()
    monkeypatch.setattr(command, "SYSTEM_STATE_DIR", str(system))
    from click.testing import CliRunner

    from shuffler_cli.main import cli

    CliRunner().invoke(cli, ["--device", "gpio", "selftest", "--yes"], env={
        "SHUFFLER_STATE_DIR": str(tmp_path / "mine"), "SHUFFLER_CONFIG": ""})
    assert not (system / "machine.lock").exists()


def watch_frequency(pin) -> list:
    """Every PWM frequency the pin is set to from now on (MockPWMPin keeps only duties)."""
    seen: list = []
    real = pin._set_frequency

    def record(value):
        seen.append(value)
        real(value)
    pin._set_frequency = record
    return seen


def test_a_device_opened_still_drives_nothing_that_moves_until_a_step_is_confirmed():
    """``selftest --yes`` in-process: opened still, the servo's pin never carries a pulse
    (duty 0 throughout, and no pulse train once gpiozero's servo is made detached) and the
    motor's pins stay 0 from before the device exists to the end; a confirmed flap step
    is the first thing that moves it."""
    from shuffler.device.contract import opening_still

    rig = GpioRig.for_cards(24)
    gpio = rig.gpio
    servo, motor, backward = (rig.factory.pin(p) for p in
                              (gpio.diverter, gpio.motor, gpio.motor_backward))
    frequencies = watch_frequency(servo)
    with opening_still():
        dev = RiggedGpioDevice(rig)
    try:
        assert dev.still and dev.diverter.value is None  # detached: no holding pulses
        report = SelfTest(GpioBench(dev), Nobody(), timeout=0.3).run()
        assert {s.step: s.outcome for s in report.steps}["flap"] is Outcome.SKIP
        assert set(driven(servo)) == {0.0}  # never a pulse width on the servo's pin
        assert set(driven(motor) + driven(backward)) == {0.0}
        assert servo.frequency is None and frequencies[-1] is None  # no pulse train left
        assert not dev.motor_on
        GpioBench(dev).throw(Pile.RIGHT)  # the builder confirmed: now it moves
        assert max(driven(servo)) > 0.0 and servo.frequency == 50
    finally:
        dev.close()


def test_opened_still_the_first_pass_drives_the_flap_then_lets_it_go():
    import random

    from shuffler.core.planning import coin_plan

    rig = GpioRig.for_cards(24)
    servo = rig.factory.pin(rig.gpio.diverter)
    dev = RiggedGpioDevice(rig, still=True)
    try:
        assert set(driven(servo)) == {0.0}
        report = dev.run_pass(coin_plan(24, random.Random(2)))
        assert report.fault is None and report.counted == 24, report
        assert max(driven(servo)) > 0.0  # the pass drove the flap from its first card
        # between passes the servo gets no holding pulses (the idle drain)
        assert dev.diverter.value is None and servo.frequency is None
    finally:
        dev.close()
