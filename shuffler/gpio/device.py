"""``GpioDevice``: the device contract on a Raspberry Pi, through gpiozero.

Parts (pins and kinds from :class:`~shuffler.config.GpioConfig`, wiring in
docs/hardware.md): a capacitive touch module on a ``Button``; the feed motor on
a ``Motor`` (H-bridge, can reverse) or a ``PWMOutputDevice``, with a soft start;
the diverter on an ``AngularServo`` or a solenoid on a ``DigitalOutputDevice``;
an IR beam at the gate on a ``DigitalInputDevice`` counted by its edges; tray and
pile presence sensors; the battery through a divider into an ``MCP3008``;
optionally an ``RGBLED`` and a ``Buzzer``.

The pass itself is :class:`~shuffler.device.engine.PassEngine`'s: this module only
turns pins into engine events and engine commands into pins. The sensors'
callbacks (gpiozero's thread) only queue timestamped edges; the beam's pass a
glitch filter; the pass loop in the caller's thread feeds the engine. The motor
is off on every way out of a pass, on :meth:`stop` (from any thread: a stop
during a pass ends it, reported as ``stopped``), on :meth:`close`, and at
interpreter exit.

    >>> from gpiozero.pins.mock import MockFactory, MockPWMPin
    >>> from shuffler.config import GpioConfig
    >>> dev = GpioDevice(GpioConfig(adc_channel=None),
    ...                  pin_factory=MockFactory(pin_class=MockPWMPin))
    >>> dev.health().motor_on
    False
    >>> dev.close()
"""

from __future__ import annotations

import atexit
import contextlib
import math
import queue
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from gpiozero import (
    MCP3008,
    RGBLED,
    AngularServo,
    Button,
    Buzzer,
    DigitalInputDevice,
    DigitalOutputDevice,
    Motor,
    PWMOutputDevice,
)

from shuffler.config import PWM_LIMIT_HZ, EngineConfig, GpioConfig
from shuffler.core.battery import MonitorFault, monitor_problem, sort_readings
from shuffler.core.mechanics import Feed, Pile
from shuffler.core.planning import PassPlan
from shuffler.device.clock import Clock, EventClock, RealClock, wait
from shuffler.device.contract import (
    BatteryReading,
    CardCallback,
    DeviceInfo,
    EngineTimings,
    EventKind,
    Fault,
    FaultLimits,
    Health,
    InputEvent,
    PassReport,
    ShufflerDevice,
    Signal,
    Status,
    TickCallback,
    open_still,
)
from shuffler.device.engine import Card, Command, Divert, Done, EdgeFilter, PassEngine, Tick
from shuffler.device.engine import Motor as MotorCommand
from shuffler.errors import ConfigError, DeviceError, FaultLatchedError
from shuffler.gpio.gesture import TouchGesture
from shuffler.gpio.pwm_chip import OVERLAY, SYSFS, pwm_channel
from shuffler.limits import over_voltage
from shuffler.pinmap import WIRES

#: LED colours (red, green, blue) and blinking, documented in docs/hardware.md
COLOURS: dict[tuple[Signal, Pile | None], tuple[tuple[float, float, float], bool]] = {
    (Signal.READY, None): ((0, 1, 0), False),
    (Signal.RUNNING, None): ((1, 1, 1), False),
    (Signal.STACK, Pile.LEFT): ((0, 0, 1), False),
    (Signal.STACK, Pile.RIGHT): ((1, 0, 1), False),
    (Signal.LOW_BATTERY, None): ((1, 0.5, 0), True),
    (Signal.FAULT, None): ((1, 0, 0), True),
    (Signal.OFF, None): ((0, 0, 0), False),
}
#: blinking (seconds on, off) and beeps (count, seconds on, off): low battery and a jam
#: differ in both, so a dealer tells them apart without reading the colour (docs/guide.md)
BLINKS = {Signal.LOW_BATTERY: (1.0, 1.0), Signal.FAULT: (0.12, 0.12)}
BEEPS = {Signal.STACK: (1, 0.08, 0.12), Signal.LOW_BATTERY: (2, 0.6, 0.4),
         Signal.FAULT: (5, 0.06, 0.06)}
#: a touch the machine did not take (``Status.told``): the light stays, one short beep
TOLD_BEEP = (1, 0.08, 0.12)
#: the other pile lifted first (``Status.warn``): red flashing with the colour of the pile
#: to lift first, fast (seconds each), and three short beeps (docs/guide.md)
WARN_FLASH = 0.12
WARN_BEEP = (3, 0.06, 0.06)
WARN_RED = (1.0, 0.0, 0.0)

_OPEN_DEVICES: weakref.WeakSet[GpioDevice] = weakref.WeakSet()

#: readings a battery check takes back to back
CHECK_READINGS = 4
#: the monitor's parts and pins, for the messages (docs/hardware.md)
_SPI = ", ".join(f"{w.role.removeprefix('SPI ')} GPIO{w.bcm} (pin {w.header})"
                 for w in WIRES.values() if w.direction == "spi")
NO_MONITOR = "A build without a battery monitor sets `[gpio] adc_channel = false`."


def monitor_fault(problem: str | None, pins: list[float], gpio: GpioConfig, dropped: int = 0,
                  reads: int = 0) -> MonitorFault | None:
    """What the dealer and the builder are told of a monitor that reads what no block
    gives: the wiring to check and the config key, never "change the battery"."""
    if problem is None:
        return None
    ch = f"MCP3008 CH{gpio.adc_channel}"
    if problem == "no_reading":
        return MonitorFault(problem, (
            f"The battery monitor reads {max(pins):.2f} V at {ch} (the block would be "
            f"{max(pins) * gpio.divider_ratio:.2f} V): no connected 9 V block gives that, so "
            "this is not a low battery. Either the mechanism has no power (switched off at "
            "SW1, F1 tripped, the block out: TP1 reads 0 V) or the monitor is absent or "
            f"not wired: U2 (MCP3008) on SPI0 ({_SPI}), its VDD and VREF on 3V3, SPI "
            "enabled (raspi-config), R1 from the 9 V rail to the tap (TP3), R10 to CH0. "
            f"{NO_MONITOR} `shuffler selftest` checks the wiring."))
    if problem == "full_scale":
        return MonitorFault(problem, (
            f"The battery monitor reads full scale ({min(pins):.2f} V at {ch}): no 9 V "
            "block through the 100 kΩ/33 kΩ divider gives that. Disconnect the block: R1 "
            "shorted or R2 open puts the rail on CH0; or the MCP3008's DOUT (SPI MISO, "
            f"GPIO9) is stuck high: its VDD, VREF and GND. {NO_MONITOR}"))
    bad = dropped or sum(1 for v in pins if monitor_problem(v, gpio.adc_vref))
    of = f"{dropped} of {reads} readings in the last pass" if dropped else \
        f"{bad} of {len(pins)} readings"
    return MonitorFault(problem, (
        f"The battery monitor's reading jumps: {of} at the floor or full scale, dropped "
        "(the battery's figures come from the rest). A loose wire at the divider's tap, "
        f"{ch} or the SPI pins, or C3 or C5 missing; `shuffler selftest` checks it."))


@atexit.register
def _stop_all() -> None:  # the interpreter is leaving: no motor stays on
    for dev in list(_OPEN_DEVICES):
        dev.stop()


#: the latency samples kept: the newest, about forty passes of 104 cards
LATENCY_KEPT = 4096


@dataclass
class LatencyLog:
    """Beam edge to diverter set, per card (seconds): the newest :data:`LATENCY_KEPT`."""

    samples: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_KEPT))

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)


class _BatteryMonitor:
    """Reads the battery while the motor runs, off the card-by-card path (an ADC read
    must never delay the diverter). On a real clock it has its own thread; on a
    simulated clock the pass loop asks it (:meth:`due`), since time moves only there."""

    INTERVAL = 0.02

    def __init__(self, device: GpioDevice) -> None:
        self.device = device
        self.latest: float | None = None
        self.fresh = False
        self.reads = self.dropped = 0  # readings under load, and those no block gives
        self.inline = not isinstance(device.clock, RealClock)
        self.next_read = device.clock.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="battery-monitor", daemon=True)

    def start(self) -> None:
        if self.device.adc is not None and not self.inline:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(1)

    @property
    def deadline(self) -> float:
        return self.next_read if self.inline and self.device.adc is not None else math.inf

    def take(self, now: float) -> float | None:
        """A reading under load not yet handed on, if there is one."""
        if self.inline and self.device.adc is not None and now >= self.next_read:
            self.next_read = now + self.INTERVAL
            self._read()
        if not self.fresh:
            return None
        self.fresh = False
        return self.latest

    def _read(self) -> None:
        if self.device.motor_on:
            pin = self.device._pin_volts()
            self.reads += 1
            if monitor_problem(pin, self.device.gpio.adc_vref) is not None:
                # at the floor or full scale: a loose wire, not the battery; it never
                # reaches the engine (no stall called low battery, no lowest volts of 0)
                self.dropped += 1
                return
            self.latest, self.fresh = pin * self.device.gpio.divider_ratio, True

    def _run(self) -> None:
        while not self._stop.is_set():
            self._read()
            self._stop.wait(self.INTERVAL)


class _HardwareServo:
    """The diverter servo on the kernel's hardware PWM (``rpi-hardware-pwm``, the
    ``pi`` extra): pulses timed by the PWM block, with no jitter from Python."""

    FRAME_HZ = 50

    def __init__(self, pin: int, sysfs: Path = SYSFS) -> None:
        try:
            from rpi_hardware_pwm import HardwarePWM
        except ImportError:
            raise DeviceError('[gpio] diverter = "hardware_servo" needs rpi-hardware-pwm: '
                              "pip install 'shuffler[pi]'") from None
        chip, channel = pwm_channel(pin, sysfs)  # a Pi 5's differ from a Pi 4's
        try:
            self.pwm = HardwarePWM(pwm_channel=channel, hz=self.FRAME_HZ, chip=chip)
        except Exception as e:  # the overlay is missing: the library names what to add
            raise DeviceError(f"cannot open hardware PWM for GPIO{pin} (pwmchip{chip} "
                              f"channel {channel}): {e} ({OVERLAY})") from None
        self.pwm.start(0)

    def pulse(self, ms: float) -> None:
        self.pwm.change_duty_cycle(ms * self.FRAME_HZ / 10)  # percent of the 20 ms frame

    def detach(self) -> None:
        """No pulses (0 % duty): the servo stops holding, as gpiozero's ``detach``."""
        self.pwm.change_duty_cycle(0)

    def close(self) -> None:
        self.pwm.stop()


def check_pwm_hz(factory, hz: int) -> None:
    """Refuse a motor PWM frequency the pin factory cannot time (lgpio: 10 kHz)."""
    name = type(factory).__name__.lower().removesuffix("factory")
    limit = PWM_LIMIT_HZ.get(name)
    if limit is not None and hz > limit:
        raise ConfigError(f"[gpio] motor_pwm_hz = {hz}: the {name} pin factory gives PWM up "
                          f"to {limit} Hz; set motor_pwm_hz to {limit} or less")


class GpioDevice(ShufflerDevice):
    """The shuffler on GPIO pins. Pass ``pin_factory`` to choose the backend
    (``MockFactory`` in tests, lgpio on a Pi 5)."""

    def __init__(self, gpio: GpioConfig, *, limits: FaultLimits | None = None,
                 feed: Feed = Feed.TOP, pin_factory=None, clock: Clock | None = None,
                 name: str = "shuffler on GPIO", still: bool | None = None,
                 kind: str = "gpio", accepts_seed: bool = False,
                 timings: EngineTimings | None = None) -> None:
        super().__init__()
        #: opened with no moving output driven (``still``, or inside ``opening_still()``):
        #: the servo gets its first pulse from the first pass or a confirmed bench step
        self.still = open_still() if still is None else still
        self.gpio = gpio
        self.limits = limits or FaultLimits()
        #: the pass engine's timings (``[engine]``)
        self.timings = timings or EngineConfig().timings()
        self.clock = clock or RealClock()
        self._info = DeviceInfo(kind, name, feed, accepts_seed=accepts_seed)
        self._fault: Fault | None = None
        self._lock = threading.RLock()
        #: (what, level, device time, host perf_counter) from the pins' callbacks
        self._inputs: queue.Queue[tuple[str, bool, float, float]] = queue.Queue()
        self._in_pass = False
        self._stopping = False
        self.gesture = TouchGesture(gpio.touch_debounce_s, gpio.long_press_s)
        self._gesture_lock = threading.Lock()
        self._closed = False
        self.latency = LatencyLog()
        self._parts: list = []
        #: the last pass's battery readings no block gives, of those taken
        self._dropped = (0, 0)
        pf = {"pin_factory": pin_factory}

        def sensor(pin: int, active_high: bool) -> DigitalInputDevice:
            # an active-low output needs a pull-up (open drain); active-high, a pull-down
            return self._part(DigitalInputDevice(pin, pull_up=not active_high, **pf))

        try:
            self.touch = self._part(Button(gpio.touch, pull_up=not gpio.touch_active_high, **pf))
            check_pwm_hz(self.touch.pin_factory, gpio.motor_pwm_hz)
            if gpio.motor_kind == "motor":
                self.motor = self._part(Motor(gpio.motor, gpio.motor_backward, pwm=True, **pf))
                for half in (self.motor.forward_device, self.motor.backward_device):
                    half.frequency = gpio.motor_pwm_hz
            else:
                self.motor = self._part(PWMOutputDevice(gpio.motor, frequency=gpio.motor_pwm_hz,
                                                        **pf))
            self.diverter = self._make_diverter(pf)
            self.beam = sensor(gpio.beam, gpio.beam_active_high)  # active: a card blocks it
            self.tray = sensor(gpio.tray, gpio.tray_active_high)  # active: cards in the tray
            self.piles = (sensor(gpio.pile_left, gpio.piles_active_high),
                          sensor(gpio.pile_right, gpio.piles_active_high))
            self.adc = (self._part(MCP3008(channel=gpio.adc_channel, max_voltage=gpio.adc_vref,
                                           **pf))
                        if gpio.adc_channel is not None else None)
            leds = (gpio.led_red, gpio.led_green, gpio.led_blue)
            self.led = (self._part(RGBLED(*leds, **pf)) if None not in leds else None)
            self.buzzer = (self._part(Buzzer(gpio.buzzer, **pf))
                           if gpio.buzzer is not None else None)
        except BaseException:
            self.close()
            raise
        if not self.still and self._may_park():
            self._divert(0)  # parked: the flap at the left pile
        self.beam.when_activated = lambda: self._input("beam", True)
        self.beam.when_deactivated = lambda: self._input("beam", False)
        self.touch.when_activated = self._touched
        self.touch.when_deactivated = self._released
        self.tray.when_activated = lambda: self._tray(True)
        self.tray.when_deactivated = lambda: self._tray(False)
        for pile, part in zip(Pile, self.piles, strict=True):
            part.when_deactivated = (lambda p=pile: self._event(EventKind.PILE_LIFTED, p))
        _OPEN_DEVICES.add(self)
        self.show(Status(Signal.READY))

    def _make_diverter(self, pf: dict):
        kind = self.gpio.diverter_kind
        if kind == "solenoid":
            return self._part(DigitalOutputDevice(self.gpio.diverter, **pf))
        if kind == "hardware_servo":
            return self._part(_HardwareServo(self.gpio.diverter))
        # the servo's own range: the configured pulses span -90..90 degrees
        # made detached (no pulses); parked after, unless the device opens still
        return self._part(AngularServo(self.gpio.diverter, initial_angle=None, min_angle=-90,
                                       max_angle=90,
                                       min_pulse_width=self.gpio.servo_min_pulse_ms / 1000,
                                       max_pulse_width=self.gpio.servo_max_pulse_ms / 1000,
                                       **pf))

    def _may_park(self) -> bool:
        """Whether the flap may be parked as the device opens: the block is read first, and
        one above the driver's limit (or a monitor that knows nothing of it) moves nothing,
        not even the flap; the pass it refuses never starts (the controller says why)."""
        if self.adc is None:
            return True
        reading = self.battery()
        if reading.monitor is not None and reading.monitor.blocks:
            return False
        return over_voltage(reading.volts) is None

    def _part(self, device):
        self._parts.append(device)
        return device

    def _input(self, what: str, value: bool) -> None:
        self._inputs.put((what, value, self.clock.now(), time.perf_counter()))

    def _event(self, kind: EventKind, pile: Pile | None = None) -> None:
        self.events.put(InputEvent(kind, self.clock.now(), pile))

    def _tray(self, loaded: bool) -> None:
        self._input("tray", loaded)
        self._event(EventKind.TRAY_LOADED if loaded else EventKind.TRAY_EMPTY)

    def _touched(self) -> None:
        self._touch_edge(True)

    def _released(self) -> None:
        self._touch_edge(False)

    def _touch_edge(self, pressed: bool) -> None:
        """A touch counts on its release, once released longer than contact bounce
        (``touch_debounce_s``); held ``long_press_s`` without letting go it is a long
        press (shuffler/gpio/gesture.py)."""
        with self._gesture_lock:
            self._emit(self.gesture.edge(pressed, self.clock.now()))

    def _settle_touch(self) -> None:
        with self._gesture_lock:
            self._emit(self.gesture.poll(self.clock.now()))

    def _emit(self, gestures: list[tuple[str, float]]) -> None:
        for kind, began in gestures:
            # stamped with when the press began: the restack lock-out runs from the press
            # edge, and a long press begun before a fault is no clear
            kind_of = EventKind.TOUCH if kind == "touch" else EventKind.LONG_PRESS
            self.events.put(InputEvent(kind_of, began))

    # -- outputs ------------------------------------------------------------------
    def _motor(self, speed: float) -> None:
        """Forward at ``speed`` (0..1), backward when negative, 0 stops. After a stop
        nothing but 0 reaches the pins until the next pass."""
        if self._stopping and speed:
            return
        speed *= self.gpio.motor_max_duty  # full speed is the motor's rated voltage
        if isinstance(self.motor, Motor):
            if speed > 0:
                self.motor.forward(speed)
            elif speed < 0:
                self.motor.backward(-speed)
            else:
                self.motor.stop()
        else:
            self.motor.value = max(speed, 0.0)

    @property
    def motor_on(self) -> bool:
        if self._closed:
            return False  # closing stopped it and released the pins
        value = self.motor.value
        return bool(value) if not isinstance(value, tuple) else any(value)

    def _divert(self, pile: int) -> None:
        a = self.gpio.servo_angle if pile else -self.gpio.servo_angle
        if isinstance(self.diverter, AngularServo):
            self.diverter.angle = a
        elif isinstance(self.diverter, _HardwareServo):
            self.diverter.pulse(self.gpio.servo_pulse_ms(a))
        else:
            self.diverter.value = pile

    def _release_flap(self) -> None:
        """Between passes the servo gets no holding pulses (its idle current, in
        docs/hardware.md's power budget): it stays where the pass left it, and the next
        pass's first divert drives it again. A solenoid keeps its state (off is a move)."""
        if isinstance(self.diverter, (AngularServo, _HardwareServo)):
            self.diverter.detach()

    # -- the contract ------------------------------------------------------------------
    @property
    def info(self) -> DeviceInfo:
        return self._info

    def run_pass(self, plan: PassPlan, on_card: CardCallback | None = None, *,
                 on_tick: TickCallback | None = None) -> PassReport:
        with self._lock:
            if self._closed:
                raise DeviceError("the GPIO device is closed")
            if self._fault is not None:
                raise FaultLatchedError(self._fault.message)
            self.show(Status(Signal.RUNNING))
            self._stopping = False
            try:
                done = self._run(plan, on_card, on_tick)
            finally:
                self._in_pass = False
                self._motor(0)
                self._release_flap()
            if done.latch:
                self._fault = done.report.fault
                self.show(Status(Signal.FAULT))
            return done.report

    def _run(self, plan: PassPlan, on_card: CardCallback | None,
             on_tick: TickCallback | None) -> Done:
        clock, timings = self.clock, self.timings
        engine = PassEngine(plan.labels, self.limits, timings=timings,
                            can_reverse=isinstance(self.motor, Motor))
        beam = EdgeFilter(timings.glitch_s, self.beam.is_active)
        while not self._inputs.empty():
            self._inputs.get_nowait()
        self._in_pass = True
        if self._stop_before_start():  # stopped between "accepted" and now: never starts
            self._stopping = True
            done = engine.stop(clock.now())[-1]
            assert isinstance(done, Done)
            return done
        monitor = _BatteryMonitor(self)
        out: list[Done] = []
        edge_seen = 0.0  # host time the latest input arrived: for the latency log

        def carry_out(commands: list[Command]) -> None:
            counted = False
            for cmd in commands:
                if isinstance(cmd, MotorCommand):
                    self._motor(cmd.speed)
                elif isinstance(cmd, Divert):
                    self._divert(cmd.pile)
                    if counted:
                        self.latency.add(time.perf_counter() - edge_seen)
                elif isinstance(cmd, Card):
                    counted = True
                    if on_card:
                        on_card(cmd.counted, cmd.expected)
                elif isinstance(cmd, Tick) and on_tick:
                    on_tick()
                elif isinstance(cmd, Done):
                    out.append(cmd)

        try:
            carry_out(engine.start(clock.now(), self.tray.is_active))
            monitor.start()
            while not engine.done:
                # the engine decides only on what the beam's filter has let through: a
                # deadline past the start of a level still pending waits for the filter
                ahead = engine.deadline
                if ahead >= beam.known_until:
                    ahead = beam.deadline
                due = min(ahead, beam.deadline, monitor.deadline)
                item = wait(clock, self._inputs, max(due - clock.now(), 0.0))
                carry_out(engine.awake(clock.now()))  # frozen meanwhile: motor off first
                if engine.done:
                    break
                now = clock.now() if item else max(clock.now(), due)
                commands: list[Command] = []
                if item is not None:
                    what, value, at, edge_seen = item
                    if what == "beam":
                        for level, edge_at in beam.feed(value, at):
                            commands += engine.beam(level, edge_at)
                    elif what == "tray":
                        commands += engine.tray(value, min(at, beam.known_until))
                    else:
                        commands += engine.stop(at)
                for level, edge_at in beam.poll(now):
                    commands += engine.beam(level, edge_at)
                known = min(now, beam.known_until)
                volts = monitor.take(now)
                if volts is not None:
                    commands += engine.volts(volts, known)
                commands += engine.tick(known)
                carry_out(commands)
        finally:
            self._motor(0)
            monitor.stop()
            self._dropped = (monitor.dropped, monitor.reads)
        return out[0]

    def _pin_volts(self) -> float:
        """Volts at the monitor's input (the divider's tap at CH0)."""
        assert self.adc is not None
        return float(self.adc.value) * self.gpio.adc_vref

    def battery(self) -> BatteryReading:
        """A few readings at once (a loose wire's flicker shows in one of them): those no
        block gives are dropped, and named (:func:`monitor_fault`)."""
        if self.adc is None:
            return BatteryReading(0.0, under_load=self.motor_on, measured=False)
        pins = [self._pin_volts() for _ in range(CHECK_READINGS)]
        good, problem = sort_readings(pins, self.gpio.adc_vref)
        dropped, reads = self._dropped
        if problem is None and dropped:
            problem = "unsteady"  # the last pass dropped some: a loose wire, say so
        volts = sum(good) / len(good) * self.gpio.divider_ratio if good else 0.0
        return BatteryReading(round(volts, 3), under_load=self.motor_on,
                              monitor=monitor_fault(problem, pins, self.gpio, dropped, reads))

    def health(self) -> Health:
        if self._closed:
            return Health(False, False, False, self._fault, {"closed": True})
        return Health(self._fault is None, self.motor_on, self.tray.is_active, self._fault,
                      {"beam_blocked": self.beam.is_active})

    def clear_fault(self) -> bool:
        if self.beam.is_active:  # a card still sits in the beam: not clear
            return False
        self._fault = None
        self.show(Status(Signal.READY))
        return True

    def stop(self) -> None:
        running = self._in_pass
        self._note_stop()  # armed: the pass about to start never starts
        if running:
            self._stopping = True  # nothing turns the motor on again in this pass
            self._input("stop", True)
        with contextlib.suppress(Exception):  # closed already: nothing can be running
            self._motor(0)

    def now(self) -> float:
        return self.clock.now()

    def idle(self, wait: float) -> float:
        """A simulated machine on its own paced clock (sim-gpio) lives only while someone
        waits on that clock: the service's idle time is waited there, so the rig's
        dealer goes on restacking and touching."""
        if isinstance(self.clock, EventClock) and self.clock.speed:
            self.clock.sleep(wait * self.clock.speed)
            return 0.001
        return wait

    def wait_event(self, timeout: float | None = None) -> InputEvent | None:
        end = self.clock.now() + (math.inf if timeout is None else timeout)
        while True:
            self._settle_touch()
            if not self.events.empty() or self.clock.now() >= end:
                break
            # wake when a touch now settling counts, or at the end
            left = min(end, self.gesture.deadline) - self.clock.now()
            ev = wait(self.clock, self.events, max(left, 0.0) if math.isfinite(left) else None)
            if ev is not None:
                return ev
        try:
            return self.events.get_nowait()
        except queue.Empty:
            return None

    def drain_events(self) -> list[InputEvent]:
        self._settle_touch()
        return super().drain_events()

    def close(self) -> None:
        self.stop()
        self._closed = True
        for part in reversed(self._parts):
            part.close()
        self._parts.clear()
        _OPEN_DEVICES.discard(self)

    def show(self, status: Status) -> None:
        if status.warn and status.signal is Signal.STACK and status.on_top is not None:
            self._warn(COLOURS[(Signal.STACK, status.on_top)][0])
            return
        key = (status.signal, status.on_top if status.signal is Signal.STACK else None)
        colour, blink = COLOURS.get(key, ((0, 0, 0), False))
        if self.led is not None:
            if blink:
                on, off = BLINKS.get(status.signal, (0.3, 0.3))
                self.led.blink(on, off, on_color=colour, background=True)
            else:
                self.led.color = colour
        self._beep(BEEPS.get(status.signal) or (TOLD_BEEP if status.told else None))

    def _beep(self, beep: tuple[int, float, float] | None) -> None:
        if self.buzzer is not None and beep is not None:
            n, on, off = beep
            self.buzzer.on()  # the first beep from now, not from when its thread runs
            self.buzzer.blink(on, off, n=n, background=True)

    def _warn(self, pile_colour: tuple[float, float, float]) -> None:
        """The other pile lifted first: red at once, then flashing with the colour of the
        pile to lift first, and three short beeps."""
        if self.led is not None:
            self.led.color = WARN_RED  # at once: the flashing's thread starts after
            self.led.blink(WARN_FLASH, WARN_FLASH, on_color=WARN_RED, off_color=pile_colour,
                           background=True)
        self._beep(WARN_BEEP)
