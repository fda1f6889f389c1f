"""``GpioDevice``: the device contract on a Raspberry Pi, through gpiozero.

Parts (pins and kinds from :class:`~shuffler.config.GpioConfig`, wiring in
docs/hardware.md): a capacitive touch module on a ``Button``; the feed motor on
a ``Motor`` (H-bridge, can reverse) or a ``PWMOutputDevice``, with a soft start;
the diverter on an ``AngularServo`` or a solenoid on a ``DigitalOutputDevice``;
an IR beam at the gate on a ``DigitalInputDevice`` counted by its edges; tray and
pile presence sensors; the battery through a divider into an ``MCP3008``;
optionally an ``RGBLED`` and a ``Buzzer``.

The beam's callbacks (gpiozero's thread) only queue timestamped edges; the
pass loop in the caller's thread decides everything. The motor is off on every
way out of a pass, on :meth:`close`, and at interpreter exit.

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
import queue
import threading
import weakref
from dataclasses import dataclass, field

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

from .clock import Clock, RealClock
from .config import GpioConfig
from .device import (
    BatteryReading,
    CardCallback,
    DeviceInfo,
    EventKind,
    Fault,
    FaultKind,
    FaultLimits,
    Health,
    InputEvent,
    PassReport,
    ShufflerDevice,
    Signal,
    Status,
    TickCallback,
    feed_fault,
    stall_fault,
)
from .engine import TICK_SECONDS
from .errors import DeviceError, FaultLatchedError
from .mechanics import Feed, Pile
from .planning import PassPlan

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

_OPEN_DEVICES: weakref.WeakSet[GpioDevice] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # the interpreter is leaving: no motor stays on
    for dev in list(_OPEN_DEVICES):
        dev.stop()


@dataclass
class LatencyLog:
    """Beam edge to diverter set, per card (seconds)."""

    samples: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)


class _BatteryMonitor:
    """Reads the battery while the motor runs, off the card-by-card path (an ADC read
    must never delay the diverter)."""

    INTERVAL = 0.02

    def __init__(self, device: GpioDevice) -> None:
        self.device = device
        self.latest: float | None = None
        self.lowest: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="battery-monitor", daemon=True)

    def start(self) -> None:
        if self.device.adc is not None:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(1)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.device.motor_on:
                v = self.device._volts()
                self.latest = v
                self.lowest = v if self.lowest is None else min(self.lowest, v)
            self._stop.wait(self.INTERVAL)


class GpioDevice(ShufflerDevice):
    """The shuffler on GPIO pins. Pass ``pin_factory`` to choose the backend
    (``MockFactory`` in tests, lgpio on a Pi 5)."""

    def __init__(self, gpio: GpioConfig, *, limits: FaultLimits | None = None,
                 feed: Feed = Feed.TOP, pin_factory=None, clock: Clock | None = None,
                 name: str = "shuffler on GPIO") -> None:
        super().__init__()
        self.gpio = gpio
        self.limits = limits or FaultLimits()
        self.clock = clock or RealClock()
        self._info = DeviceInfo("gpio", name, feed)
        self._fault: Fault | None = None
        self._lock = threading.RLock()
        self._edges: queue.Queue[tuple[str, float]] = queue.Queue()
        self._last_touch = -1e9
        self._closed = False
        self.latency = LatencyLog()
        self._parts: list = []
        pf = {"pin_factory": pin_factory}
        try:
            self.touch = self._part(Button(gpio.touch, pull_up=False, **pf))
            if gpio.motor_kind == "motor":
                self.motor = self._part(Motor(gpio.motor, gpio.motor_backward, pwm=True, **pf))
            else:
                self.motor = self._part(PWMOutputDevice(gpio.motor, **pf))
            if gpio.diverter_kind == "servo":
                a = gpio.servo_angle
                self.diverter = self._part(AngularServo(gpio.diverter, min_angle=-a,
                                                        max_angle=a, initial_angle=-a, **pf))
            else:
                self.diverter = self._part(DigitalOutputDevice(gpio.diverter, **pf))
            # receivers and presence sensors pull low when blocked or covered
            self.beam = self._part(DigitalInputDevice(gpio.beam, pull_up=True, **pf))
            self.tray = self._part(DigitalInputDevice(gpio.tray, pull_up=True, **pf))
            self.piles = (self._part(DigitalInputDevice(gpio.pile_left, pull_up=True, **pf)),
                          self._part(DigitalInputDevice(gpio.pile_right, pull_up=True, **pf)))
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
        self.beam.when_activated = lambda: self._edges.put(("blocked", self.clock.now()))
        self.beam.when_deactivated = lambda: self._edges.put(("cleared", self.clock.now()))
        self.touch.when_activated = self._touched
        self.tray.when_activated = lambda: self._event(EventKind.TRAY_LOADED)
        self.tray.when_deactivated = lambda: self._event(EventKind.TRAY_EMPTY)
        for pile, sensor in zip(Pile, self.piles, strict=True):
            sensor.when_deactivated = (lambda p=pile: self._event(EventKind.PILE_LIFTED, p))
        _OPEN_DEVICES.add(self)
        self.show(Status(Signal.READY))

    def _part(self, device):
        self._parts.append(device)
        return device

    def _event(self, kind: EventKind, pile: Pile | None = None) -> None:
        self.events.put(InputEvent(kind, self.clock.now(), pile))

    def _touched(self) -> None:
        # mock pins ignore bounce_time, and touch modules chatter: lock out repeats
        now = self.clock.now()
        if now - self._last_touch >= self.gpio.touch_debounce_s:
            self._last_touch = now
            self._event(EventKind.TOUCH)

    # -- outputs ------------------------------------------------------------------
    def _motor(self, speed: float) -> None:
        """Forward at ``speed`` (0..1), backward when negative, 0 stops."""
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
        if isinstance(self.diverter, AngularServo):
            a = self.gpio.servo_angle
            self.diverter.angle = a if pile else -a
        else:
            self.diverter.value = pile

    def _back_out(self) -> None:
        """Reverse briefly so a stuck card leaves the throat (needs an H-bridge)."""
        if isinstance(self.motor, Motor):
            self._motor(-0.6)
            self.clock.sleep(self.limits.reverse_seconds)
            self._motor(0)

    def _soft_start(self) -> None:
        steps = 5
        for i in range(1, steps):
            self._motor(i / steps)
            if self.gpio.soft_start_s:
                self.clock.sleep(self.gpio.soft_start_s / steps)
        self._motor(1.0)  # full speed: from here the loop must be listening

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
            try:
                report = self._run(plan, on_card, on_tick)
            finally:
                self._motor(0)
            if report.fault is not None and report.fault.kind.latches:
                self._fault = report.fault
                self.show(Status(Signal.FAULT))
            return report

    def _run(self, plan: PassPlan, on_card: CardCallback | None,
             on_tick: TickCallback | None) -> PassReport:
        limits, clock, labels = self.limits, self.clock, plan.labels
        expected = plan.cards
        while not self._edges.empty():
            self._edges.get_nowait()
        piles = [0, 0]
        counted = retries = retries_here = 0
        fault: Fault | None = None
        start = clock.now()
        self._divert(labels[0])
        monitor = _BatteryMonitor(self)
        self._soft_start()
        monitor.start()
        try:
            last_edge = clock.now()
            blocked_at: float | None = None
            stuck = False  # after a jam the next "cleared" edge is the card backing out
            last_tick = clock.now()
            while counted < expected:
                now = clock.now()
                if now >= last_tick + TICK_SECONDS:
                    last_tick = now
                    if on_tick:
                        on_tick()
                if now - start > limits.max_pass_seconds:
                    self._motor(0)
                    fault = Fault(FaultKind.TIMEOUT, "The pass ran longer than "
                                  f"{limits.max_pass_seconds:.0f} s; the motor was stopped.",
                                  counted + 1)
                    break
                if blocked_at is not None:
                    wait = blocked_at + limits.jam_seconds - now
                else:
                    wait = last_edge + limits.misfeed_seconds - now
                try:
                    kind, at = self._edges.get(
                        timeout=max(min(wait, last_tick + TICK_SECONDS - now), 0.0))
                except queue.Empty:
                    kind, at = "timeout", clock.now()
                    if at < now + wait:  # only the on_tick call was due
                        continue
                if kind == "blocked":
                    blocked_at = at
                    continue
                if kind == "cleared":
                    if blocked_at is None or stuck:  # not a card: the jammed one backing out
                        blocked_at, stuck, last_edge = None, False, max(last_edge, at)
                        continue
                    label = labels[counted]
                    piles[label] += 1
                    counted += 1
                    blocked_at, last_edge, retries_here = None, at, 0
                    if counted < expected:
                        self._divert(labels[counted])
                        self.latency.add(clock.now() - at)
                    if on_card:
                        on_card(counted, expected)
                    if counted < expected and not self.tray.is_active:
                        break  # the tray is empty: no more cards will come (a double feed)
                    continue
                # nothing happened in time: a card stuck in the beam, or none came
                if blocked_at is None and not self.tray.is_active:
                    break  # the tray ran out: fewer cards than planned
                self._motor(0)  # at once
                reading = monitor.latest
                card = counted + 1
                if blocked_at is None and reading and reading < limits.stall_volts:
                    fault = stall_fault(card, counted, expected, reading)
                    break
                jammed = blocked_at is not None
                if jammed:
                    self._back_out()
                kind_ = FaultKind.JAM if jammed else FaultKind.MISFEED
                if retries_here >= limits.retries:
                    fault = feed_fault(kind_, card, counted, expected)
                    break
                retries_here += 1
                retries += 1
                stuck = jammed
                self._soft_start()
                blocked_at, last_edge = None, clock.now()
        finally:
            self._motor(0)
            monitor.stop()
        return PassReport(expected, counted, (piles[0], piles[1]), clock.now() - start, fault,
                          monitor.lowest, not self.tray.is_active, retries)

    def _volts(self) -> float:
        if self.adc is None:
            return 0.0
        return self.adc.value * self.gpio.adc_vref * self.gpio.divider_ratio

    def battery(self) -> BatteryReading:
        return BatteryReading(round(self._volts(), 3), under_load=self.motor_on,
                              measured=self.adc is not None)

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
        with contextlib.suppress(Exception):  # closed already: nothing can be running
            self._motor(0)

    def close(self) -> None:
        self.stop()
        self._closed = True
        for part in reversed(self._parts):
            part.close()
        self._parts.clear()
        _OPEN_DEVICES.discard(self)

    def show(self, status: Status) -> None:
        if status.signal is Signal.STACK and status.next_pass is None:
            # the hand is done: which pile goes on top no longer matters
            status = Status(Signal.READY)
        key = (status.signal, status.on_top if status.signal is Signal.STACK else None)
        colour, blink = COLOURS.get(key, ((0, 0, 0), False))
        if self.led is not None:
            if blink:
                self.led.blink(0.3, 0.3, on_color=colour, background=True)
            else:
                self.led.color = colour
        if self.buzzer is not None and status.signal in (Signal.STACK, Signal.FAULT,
                                                         Signal.LOW_BATTERY):
            n = 1 if status.signal is Signal.STACK else 3
            self.buzzer.blink(0.08, 0.12, n=n, background=True)
