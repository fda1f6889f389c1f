"""The gpiozero backend on the rig: what a builder checks on the bench."""

from __future__ import annotations

import random
import time

import pytest

from hardware_sim import parse_fault_specs
from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice
from shuffler.config import Config, EngineConfig, GpioConfig, load_config_text
from shuffler.control.controller import PassController
from shuffler.control.events import PassReported
from shuffler.control.hand import HandRunner
from shuffler.core.mechanics import Pile
from shuffler.core.planning import PlannedPlanner, coin_plan
from shuffler.device.contract import EventKind, FaultKind, FaultLimits, Signal, Status
from shuffler.errors import ConfigError
from shuffler.gpio.device import COLOURS
from shuffler.store.state import StateStore

RATE = 5.0  # cards a second, as the Lotus: one card interval is 200 ms of rig time
LIMITS = FaultLimits(retries=1)


@pytest.fixture
def rigged():
    made = []

    def make(cards=24, faults=(), gpio=None, habit="instructed"):
        from hardware_sim import DealerHabit

        rig = GpioRig.for_cards(cards, card_rate=RATE, faults=parse_fault_specs(faults),
                                gpio=gpio or GpioConfig(),
                                habit=DealerHabit(habit), rng=random.Random(3))
        dev = RiggedGpioDevice(rig, limits=LIMITS)
        made.append(dev)
        return dev

    yield make
    for dev in made:
        dev.close()


def test_a_planned_hand_on_the_rig_ends_in_the_order_the_plan_implies(rigged, tmp_path):
    dev = rigged(24)
    start = list(dev.rig.mechanism.tray)
    planner = PlannedPlanner(4, random.Random(8))
    plans, seen = [], []
    real_plan = planner.plan
    planner.plan = lambda *a: plans.append(real_plan(*a)) or plans[-1]
    runner = HandRunner(PassController(dev, StateStore(tmp_path)), planner, Config())

    def after(record):
        # restacked (the last pass too: the hand waits for the dealer's lifts), so once the
        # rig's dealer has put the pack back the tray holds the tracked order
        deadline = time.monotonic() + 10
        while (dev.rig.mechanism.piles[0] or dev.rig.mechanism.piles[1]) and \
                time.monotonic() < deadline:
            time.sleep(0.005)
        seen.append(([start[i] for i in runner.tracker.order], list(dev.rig.mechanism.tray)))

    hand = runner.run(4, 24, lambda e: isinstance(e, PassReported) and after(e))
    assert hand.completed and [r.counted for r in hand.pass_reports] == [24] * 4
    assert [r.stacking for r in hand.pass_reports] == ["left"] * 4
    assert hand.tracking
    for tracked, real in seen:
        assert tracked == real


def _pin_times(pin, since):
    """(absolute time, state) for each change a mock pin recorded since clear_states()."""
    t, out = since, []
    for change in pin.states[1:]:
        t += change.timestamp
        out.append((t, change.state))
    return out


def _off_time(dev, since):
    offs = [t for t, s in _pin_times(dev.rig.pins["motor"], since) if not s]
    return offs[-1]


@pytest.mark.parametrize(("spec", "kind"), [("jam:9", FaultKind.JAM),
                                            ("misfeed:9", FaultKind.MISFEED),
                                            ("battery:5.9", FaultKind.LOW_BATTERY)])
def test_a_fault_stops_the_motor_pin_within_one_card_interval(rigged, spec, kind):
    dev = rigged(24, [spec])
    for role in ("motor", "beam"):
        dev.rig.pins[role].clear_states()
    since = dev.rig.clock.now()
    report = dev.run_pass(coin_plan(24, random.Random(1)))
    assert report.fault is not None and report.fault.kind is kind
    beam = _pin_times(dev.rig.pins["beam"], since)
    motor = _pin_times(dev.rig.pins["motor"], since)
    full_on = min(t for t, s in motor if s == dev.gpio.motor_max_duty)  # full speed: the cap
    first_off = min(t for t, s in motor if not s and t > full_on)
    if kind is FaultKind.JAM:  # the beam blocked longer than the jam limit
        due = max(t for t, s in beam if not s and t < first_off) + LIMITS.jam_seconds
    else:  # no card edge for the misfeed limit, counted from full speed
        edges = [t for t, s in beam if s and t < first_off]
        due = max([*edges, full_on]) + LIMITS.misfeed_seconds
    assert 0 <= first_off - due <= 1 / RATE  # within one card interval
    assert not dev.motor_on


def test_a_double_feed_ends_the_pass_at_once_with_a_short_count(rigged):
    dev = rigged(24, ["double:7"])
    dev.rig.pins["motor"].clear_states()
    since = dev.rig.clock.now()
    report = dev.run_pass(coin_plan(24, random.Random(1)))
    assert report.counted == 23 and report.tray_empty and report.fault is None
    last_card = max(t for t, s in _pin_times(dev.rig.pins["beam"], since) if s)
    assert _off_time(dev, since) - last_card <= 1 / RATE


def test_the_led_shows_each_status(rigged):
    dev = rigged(24)
    for status, colour in [(Status(Signal.READY), (0, 1, 0)),
                           (Status(Signal.RUNNING), (1, 1, 1)),
                           (Status(Signal.STACK, Pile.LEFT, 2, 4), (0, 0, 1)),
                           (Status(Signal.STACK, Pile.RIGHT, 2, 4), (1, 0, 1))]:
        dev.show(status)
        assert dev.rig.led() == colour
    assert COLOURS[(Signal.FAULT, None)][1]  # faults blink


def test_a_chattering_touch_is_one_touch(rigged):
    dev = rigged(24)
    dev.drain_events()
    for _ in range(5):  # contact bounce within a few milliseconds
        dev.rig._drive("touch", True)
        dev.rig._drive("touch", False)
    dev.rig.clock.sleep(1.0)  # it counts once released and settled
    touches = [e for e in dev.drain_events() if e.kind is EventKind.TOUCH]
    assert len(touches) == 1


def test_a_held_touch_is_a_long_press_and_a_tap_is_not(rigged):
    dev = rigged(24)
    dev.drain_events()
    dev.rig.touch()
    dev.rig.clock.sleep(1.0)
    dev.rig.long_press(2.2)
    dev.rig.clock.sleep(3.0)
    kinds = [e.kind for e in dev.drain_events()]
    assert kinds.count(EventKind.LONG_PRESS) == 1  # and its leading edge is no touch
    assert kinds[-1] is EventKind.LONG_PRESS and kinds.count(EventKind.TOUCH) == 1


@pytest.mark.parametrize(("motor", "diverter"), [("pwm", "solenoid"), ("motor", "servo")])
def test_both_motor_and_diverter_kinds_deal_where_planned(rigged, motor, diverter):
    text = f'[gpio]\nmotor = "{motor}"\ndiverter = "{diverter}"\n'
    dev = rigged(32, gpio=load_config_text(text).gpio)
    plan = coin_plan(32, random.Random(5))
    report = dev.run_pass(plan)
    assert report.counted == 32 and report.piles == plan.pile_sizes
    landed = [int(p) for _, p in dev.rig.landed]
    assert landed == list(plan.labels)


def test_closing_stops_the_motor(rigged):
    dev = rigged(24)
    dev._motor(1.0)
    assert dev.rig.pins["motor"].state == dev.gpio.motor_max_duty
    dev.close()
    assert dev.rig.pins["motor"].state == 0
    assert not dev.health().motor_on


def test_a_pin_used_twice_names_both_uses():
    with pytest.raises(ConfigError, match=r"\[pins\] tray: GPIO17 is already used by "
                                          r"\[pins\] touch"):
        load_config_text("[pins]\ntray = 17\n", "pins.toml")
    with pytest.raises(ConfigError, match="battery monitor's SPI SCLK"):
        load_config_text("[pins]\nbuzzer = 11\n", "pins.toml")
    cfg = load_config_text("[pins]\nbuzzer = 11\n[gpio]\nadc_channel = false\n").gpio
    assert cfg.buzzer == 11 and cfg.adc_channel is None


def test_the_motor_stops_after_the_maximum_pass_time(rigged):
    dev = rigged(104)
    dev.limits = FaultLimits(max_pass_seconds=2.0)
    report = dev.run_pass(coin_plan(104, random.Random(1)))  # 104 cards need ~21 s
    assert report.fault is not None and report.fault.kind is FaultKind.TIMEOUT
    assert report.counted < 104 and not dev.motor_on


def test_an_exception_mid_pass_still_stops_the_motor(rigged):
    dev = rigged(24)

    def explode(counted, expected):
        if counted == 5:
            raise RuntimeError("a bug in a progress callback")

    with pytest.raises(RuntimeError):
        dev.run_pass(coin_plan(24, random.Random(1)), explode)
    assert not dev.motor_on and dev.rig.pins["motor"].state == 0


@pytest.mark.parametrize("active_high", [False, True])
def test_glitches_and_bounce_on_every_sensor_leave_the_counts_right(active_high):
    """50 µs spikes in every card gap and every card, and contact bounce on every beam,
    tray, pile and touch change, with either polarity: the same count, the same piles,
    every card where the plan says."""
    from hardware_sim.gpio_rig import SensorNoise

    polarity = {f"{s}_active_high": active_high for s in ("beam", "tray", "piles")}
    gpio = GpioConfig(**polarity)
    rig = GpioRig.for_cards(32, card_rate=RATE, gpio=gpio, rng=random.Random(3),
                            noise=SensorNoise(glitch_s=50e-6, bounce=4))
    dev = RiggedGpioDevice(rig, limits=LIMITS)
    try:
        beam = rig.pins["beam"]
        beam.clear_states()
        plan = coin_plan(32, random.Random(5))
        report = dev.run_pass(plan)
        assert report.counted == 32 and report.fault is None and report.piles == plan.pile_sizes
        assert [int(p) for _, p in rig.landed] == list(plan.labels)
        assert len(beam.states) > 32 * 2 * 5  # the noise really reached the pin
        assert dev.tray.is_active is False and all(p.is_active for p in dev.piles)
    finally:
        dev.close()


def test_without_the_glitch_filter_the_same_noise_miscounts():
    """The filter is what keeps the count: switched off, the spikes count as cards."""
    from hardware_sim.gpio_rig import SensorNoise

    rig = GpioRig.for_cards(24, card_rate=RATE, rng=random.Random(3),
                            noise=SensorNoise(glitch_s=50e-6))
    engine = EngineConfig(beam_glitch_s=0.0, beam_min_blocked_s=0.0)
    dev = RiggedGpioDevice(rig, limits=LIMITS, timings=engine.timings())
    try:
        report = dev.run_pass(coin_plan(24, random.Random(5)))
        assert report.counted == 24
        assert [int(p) for _, p in rig.landed] != list(coin_plan(24, random.Random(5)).labels)
    finally:
        dev.close()


@pytest.mark.parametrize("angle", [15.0, 30.0, 45.0])
def test_servo_pulses_follow_servo_angle(rigged, angle):
    dev = rigged(24, gpio=GpioConfig(servo_angle=angle))
    widths = {}
    for pile in Pile:
        dev._divert(int(pile))
        widths[pile] = dev.rig.servo_pulse_ms()
    # 0.5-2.5 ms spans -90..90 degrees: each degree is 1/90 ms from the 1.5 ms centre
    assert widths[Pile.LEFT] == pytest.approx(1.5 - angle / 90, abs=0.01)
    assert widths[Pile.RIGHT] == pytest.approx(1.5 + angle / 90, abs=0.01)


def test_the_motor_pwm_runs_at_the_configured_frequency(rigged):
    dev = rigged(24, gpio=GpioConfig(motor_pwm_hz=20_000))
    dev._motor(0.5)
    assert dev.rig.pins["motor"].frequency == 20_000
    dev._motor(0)


def test_a_flap_too_slow_for_the_card_rate_is_refused_with_the_figures():
    with pytest.raises(ConfigError, match=r"flap takes 150 ms to switch, but at card_rate 8 "
                                          r"a card comes every 125 ms"):
        load_config_text("[mechanism]\ncard_rate = 8\nflap_travel_s = 0.15\n", "s.toml")
    assert load_config_text("[mechanism]\ncard_rate = 8\nflap_travel_s = 0.05\n").mechanism


def test_hardware_pwm_needs_a_pwm_pin_and_says_how_to_get_the_library():
    with pytest.raises(ConfigError, match="PWM-capable pin"):
        load_config_text('[gpio]\ndiverter = "hardware_servo"\n[pins]\ndiverter = 22\n')
    cfg = load_config_text('[gpio]\ndiverter = "hardware_servo"\n').gpio
    assert cfg.diverter == 18
    from gpiozero.pins.mock import MockFactory, MockPWMPin

    from shuffler.errors import DeviceError
    from shuffler.gpio.device import GpioDevice

    try:
        import rpi_hardware_pwm  # noqa: F401
    except ImportError:
        with pytest.raises(DeviceError, match=r"rpi-hardware-pwm.*shuffler\[pi\]"):
            GpioDevice(cfg, pin_factory=MockFactory(pin_class=MockPWMPin))


def sysfs_pwm(root, chips: dict[int, str]):
    """A /sys/class/pwm as a kernel lays it out: pwmchipN/device links to its device."""
    for number, device in chips.items():
        (root / "devices" / device).mkdir(parents=True)
        (root / f"pwmchip{number}").mkdir()
        (root / f"pwmchip{number}" / "device").symlink_to(root / "devices" / device)
    return root


@pytest.mark.parametrize(("chips", "pin", "found"), [
    ({0: "fe20c000.pwm"}, 18, (0, 0)),  # Pi 4: two channels, GPIO18 on channel 0
    ({0: "fe20c000.pwm"}, 13, (0, 1)),
    ({0: "3f20c000.pwm"}, 19, (0, 1)),  # Pi 3
    ({0: "1f0009c000.pwm", 2: "1f00098000.pwm"}, 18, (2, 2)),  # Pi 5: fan first, 4 channels
    ({0: "1f00098000.pwm"}, 12, (0, 0)),  # Pi 5 on a kernel that numbers it 0
])
def test_the_pwm_chip_is_found_by_what_it_is_not_by_its_number(tmp_path, chips, pin, found):
    from shuffler.gpio.pwm_chip import pwm_channel

    assert pwm_channel(pin, sysfs_pwm(tmp_path, chips)) == found


def test_no_pwm_chip_names_what_was_found_and_the_overlay(tmp_path):
    from shuffler.errors import DeviceError
    from shuffler.gpio.pwm_chip import pwm_channel

    with pytest.raises(DeviceError, match=r"found: pwmchip0 \(1f0009c000.pwm\)\): add "
                                          r"dtoverlay=pwm-2chan"):
        pwm_channel(18, sysfs_pwm(tmp_path, {0: "1f0009c000.pwm"}))


def test_the_hardware_servo_opens_the_channel_of_its_pin_and_pulses_in_percent(
        tmp_path, mocker):
    """rpi-hardware-pwm writes the real sysfs only, so it is stood in for here; what it is
    asked for (chip, channel, 50 Hz, duty) is what a Pi 5 needs for GPIO18."""
    import sys
    import types

    from shuffler.gpio.device import _HardwareServo

    pwm = mocker.MagicMock()
    module = types.SimpleNamespace(HardwarePWM=mocker.MagicMock(return_value=pwm))
    mocker.patch.dict(sys.modules, {"rpi_hardware_pwm": module})
    servo = _HardwareServo(18, sysfs_pwm(tmp_path, {2: "1f00098000.pwm"}))
    module.HardwarePWM.assert_called_once_with(pwm_channel=2, hz=50, chip=2)
    servo.pulse(1.5)
    pwm.change_duty_cycle.assert_called_with(7.5)  # 1.5 ms of a 20 ms frame
    servo.detach()  # between passes: no pulses, so no holding current
    pwm.change_duty_cycle.assert_called_with(0)


def test_stop_from_another_thread_ends_the_pass_and_the_motor_stays_off():
    """The service's stop comes from another thread while the pass waits on its clock
    (here paced ten times faster than real time, as `--sim-speed 10`)."""
    import threading

    from shuffler.device.clock import EventClock

    rig = GpioRig.for_cards(24, card_rate=RATE, rng=random.Random(3),
                            clock=EventClock(speed=10.0))
    dev = RiggedGpioDevice(rig, limits=LIMITS)
    try:
        stopper = threading.Timer(0.2, dev.stop)  # about 2 s into a 5 s pass, on an idle host
        stopper.start()
        report = dev.run_pass(coin_plan(24, random.Random(5)))
        stopper.join()
        assert report.fault is not None and report.fault.kind is FaultKind.STOPPED
        assert report.counted < 24 and dev.health().ok  # how far it got depends on the host
        rig.clock.sleep(3.0)  # past every limit: nothing refeeds
        # at most the card that was already in the beam falls through
        assert len(rig.landed) <= report.counted + 1 and not dev.motor_on
        assert rig.pins["motor"].state == 0
    finally:
        dev.close()


def test_the_motor_pins_never_exceed_the_duty_cap(rigged):
    """Full speed is the motor's rated voltage: 6 V on a fresh 9.5 V alkaline block is
    0.63 of the PWM, whatever the engine asks for, forward and backward."""
    dev = rigged(24)
    assert dev.gpio.motor_max_duty == 0.63
    for pin in ("motor", "motor_backward"):
        dev.rig.pins[pin].clear_states()
    dev.run_pass(coin_plan(24, random.Random(1)))
    dev._motor(-1.0)
    levels = [float(s.state) for pin in ("motor", "motor_backward")
              for s in dev.rig.pins[pin].states]
    assert max(levels) == pytest.approx(0.63)
    dev._motor(0)


def test_a_pwm_frequency_the_pin_factory_cannot_time_is_refused():
    from shuffler.gpio.device import check_pwm_hz

    class LGPIOFactory:
        pass

    class MockFactory:
        pass

    check_pwm_hz(LGPIOFactory(), 10_000)
    with pytest.raises(ConfigError, match=r"motor_pwm_hz = 20000: the lgpio pin factory "
                                          r"gives PWM up to 10000 Hz"):
        check_pwm_hz(LGPIOFactory(), 20_000)
    check_pwm_hz(MockFactory(), 50_000)  # no limit known: the driver's own (config: 50 kHz)
    with pytest.raises(ConfigError, match="motor_pwm_hz"):
        load_config_text("[gpio]\nmotor_pwm_hz = 100000\n")


def test_the_duty_cap_follows_the_motor_and_the_battery():
    assert load_config_text("[gpio]\nmotor_volts = 9.0\n").gpio.motor_max_duty == 0.94
    lithium = load_config_text('[battery]\nchemistry = "lithium"\n')
    assert lithium.gpio.motor_max_duty == 0.61  # 6 V over a fresh lithium block's 9.8 V
    assert load_config_text("[gpio]\nmotor_volts = 12\n").gpio.motor_max_duty == 1.0


def test_the_servo_frame_counts_against_the_card_interval():
    # 100 ms of travel fits 125 ms between cards, but not with a 20 ms servo frame first
    with pytest.raises(ConfigError, match=r"up to 20 ms after the command"):
        load_config_text("[mechanism]\ncard_rate = 8.5\nflap_travel_s = 0.1\n")
    load_config_text('[mechanism]\ncard_rate = 8.5\nflap_travel_s = 0.1\n'
                     '[gpio]\ndiverter = "solenoid"\n')
