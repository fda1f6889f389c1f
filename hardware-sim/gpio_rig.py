"""A rig that drives gpiozero's mock pins from the simulated mechanism.

``MockFactory(pin_class=MockPWMPin)`` supplies the pins; :class:`MockMCP3008`
(built on ``MockSPIDevice``) answers the battery monitor's SPI reads with the
simulated battery's volts through the divider; a thread watches the motor pins
and, while the motor runs forward, moves cards across the beam at the
mechanism's rate, landing each on the pile the diverter points to as the card
passes it. The simulated dealer watches the status LED: when it shows which pile
to put on top, the dealer lifts the piles (the pile sensors see it), loads the
tray and touches the sensor.

    >>> rig = GpioRig.for_cards(24)
    >>> from shuffler.gpio import GpioDevice
    >>> dev = GpioDevice(rig.gpio, pin_factory=rig.factory)
    >>> rig.start()
    >>> dev.tray.is_active
    True
    >>> rig.stop(); dev.close()
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from gpiozero import Device
from gpiozero.pins.mock import (
    MockFactory,
    MockPin,
    MockPWMPin,
    MockSPIClockPin,
    MockSPIDevice,
    MockSPISelectPin,
)

from shuffler.cards import Card, standard_pack
from shuffler.config import GpioConfig
from shuffler.device import DeviceInfo, Signal
from shuffler.gpio import COLOURS, GpioDevice
from shuffler.mechanics import Pile

from .battery import SimBattery
from .dealer import DealerHabit, SimDealer
from .faults import FaultPlan
from .physics import Mechanism, MechanismSpec, Transit, TransitKind


class _ClockPin(MockSPIClockPin, MockPWMPin):
    """An SPI clock pin the PWM factory accepts, with a plain on/off state."""

    def _set_state(self, value):
        MockPin._set_state(self, value)
        for dev in self.spi_devices:
            dev.on_clock()


class _SelectPin(MockSPISelectPin, MockPWMPin):
    def _set_state(self, value):
        MockPin._set_state(self, value)
        if self.spi_device:
            self.spi_device.on_select()


class MockMCP3008(MockSPIDevice):
    """The slave side of an MCP3008 on SPI0: 10-bit single-ended conversions.

    A conversion starts with a 1 bit, then single/differential, then three
    channel bits; the chip answers with a null bit and ten data bits, MSB first.
    """

    def __init__(self, factory: MockFactory, read_volts: Callable[[int], float],
                 vref: float = 3.3) -> None:
        # MockSPIDevice.__init__ would ask for non-PWM pins, which a PWM factory refuses
        self.clock_pin = factory.pin(11, pin_class=_ClockPin)
        self.mosi_pin = factory.pin(10)
        self.miso_pin = factory.pin(9)
        self.select_pin = factory.pin(8, pin_class=_SelectPin)
        self.clock_polarity = self.clock_phase = self.lsb_first = self.select_high = False
        self.bits_per_word = 8
        self.rx_bit, self.rx_buf, self.tx_buf = 0, [], []
        self.clock_pin.spi_devices.append(self)
        self.select_pin.spi_device = self
        self.read_volts, self.vref = read_volts, vref
        self._start: int | None = None

    def on_start(self) -> None:
        super().on_start()
        self._start = None

    def on_bit(self) -> None:
        if self._start is None:
            if self.rx_buf[-1]:
                self._start = len(self.rx_buf) - 1
            return
        if len(self.rx_buf) == self._start + 5:
            _single, c2, c1, c0 = (int(b) for b in self.rx_buf[self._start + 1:])
            volts = self.read_volts(c2 * 4 + c1 * 2 + c0)
            code = max(0, min(1023, round(volts / self.vref * 1023)))
            self.tx_buf = [0, 0]  # a don't-care bit, then the null bit
            self.tx_word(code, 10)


class GpioRig:
    """The simulated machine behind mock pins. Time is real (sleep-based); the
    mechanism's card rate sets the pace, so tests use fast rates and short limits."""

    POLL = 0.0005  # seconds between looks at the motor and LED pins

    def __init__(self, mechanism: Mechanism, gpio: GpioConfig | None = None,
                 dealer: SimDealer | None = None) -> None:
        self.mechanism = mechanism
        self.gpio = gpio or GpioConfig()
        self.dealer = dealer or SimDealer()
        self.factory = MockFactory(pin_class=MockPWMPin)
        # gpiozero's software SPI bus insists on a default factory existing
        if Device.pin_factory is None:
            Device.pin_factory = self.factory
        self.pins = {role: self.factory.pin(n) for role, n in self.gpio.pins().items()}
        self.adc = (MockMCP3008(self.factory, self._adc_volts, self.gpio.adc_vref)
                    if self.gpio.adc_channel is not None else None)
        self.landed: list[tuple[object, Pile]] = []  # every card and the pile it fell on
        self.motor_off_at: list[float] = []  # when the forward pin went low
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._was_forward = False
        self._restacked = False

    @classmethod
    def for_cards(cls, n: int, *, card_rate: float = 200.0, faults: FaultPlan | None = None,
                  gpio: GpioConfig | None = None, habit: DealerHabit = DealerHabit.INSTRUCTED,
                  rng: random.Random | None = None, battery: SimBattery | None = None,
                  spec: MechanismSpec | None = None) -> GpioRig:
        faults = faults or FaultPlan()
        battery = (battery or SimBattery()).starting_at(faults.battery_volts)
        spec = spec or MechanismSpec(card_rate=card_rate, spinup=0.0)
        mech: Mechanism[Card] = Mechanism(standard_pack(n), spec, battery, faults)
        return cls(mech, gpio, SimDealer(habit, rng or random.Random()))

    # -- what the pins say ----------------------------------------------------------
    def _state(self, role: str) -> float:
        pin = self.pins.get(role)
        return float(pin.state) if pin is not None else 0.0

    def forward(self) -> bool:
        """The roller turns fast enough to feed: past the soft start's ramp."""
        return self._state("motor") > 0.9

    def backward(self) -> bool:
        return self._state("motor_backward") > 0.05

    def diverter_pile(self) -> Pile:
        pin = self.pins["diverter"]
        if self.gpio.diverter_kind == "solenoid":
            return Pile(int(bool(pin.state)))
        # servo: 1-2 ms pulses in a 20 ms frame; the centre is 1.5 ms
        return Pile.RIGHT if float(pin.state) > 0.075 else Pile.LEFT

    def led(self) -> tuple[float, float, float]:
        return (self._state("led_red"), self._state("led_green"), self._state("led_blue"))

    def _adc_volts(self, channel: int) -> float:
        if channel != self.gpio.adc_channel:
            return 0.0
        return self.mechanism.battery.volts(self.forward()) / self.gpio.divider_ratio

    # -- driving the inputs ------------------------------------------------------------
    def _drive(self, role: str, high: bool) -> None:
        pin = self.pins[role]
        if pin.function == "input":
            pin.drive_high() if high else pin.drive_low()

    def _sensors(self) -> None:
        m = self.mechanism
        self._drive("tray", not m.tray)  # sensors pull low while covered
        self._drive("pile_left", not m.piles[Pile.LEFT])
        self._drive("pile_right", not m.piles[Pile.RIGHT])

    def touch(self, hold: float = 0.05) -> None:
        self._drive("touch", True)
        time.sleep(hold)
        self._drive("touch", False)

    # -- the loop ------------------------------------------------------------------
    def start(self) -> None:
        """Set the sensors and start moving; call after the device has claimed its pins."""
        self._drive("beam", True)
        self._drive("touch", False)
        self._sensors()
        self._thread = threading.Thread(target=self._run, name="gpio-rig", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        if Device.pin_factory is self.factory:
            Device.pin_factory = None  # leave no mock pins behind for a real device

    def _sleep_running(self, seconds: float) -> bool:
        """Sleep while the motor runs forward; False if it stopped first."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if not self.forward():
                return False
            time.sleep(min(left, self.POLL))
        return self.forward()

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            if not self.forward():
                if self._was_forward:
                    self.motor_off_at.append(time.monotonic())
                self._was_forward = False
                first = True
                self._watch_led()
                time.sleep(self.POLL)
                continue
            m = self.mechanism
            if not self._was_forward and not (m.piles[0] or m.piles[1]):
                m.start_pass()  # the motor starts on a full tray: a new pass
                self._restacked = False
            self._was_forward = True
            transit = self.mechanism.next_transit(first=first)
            first = False
            if transit.kind is TransitKind.CARD:
                self._card(transit)
            elif transit.kind is TransitKind.JAM:
                self._jam(transit)
            else:  # misfeed, stall, empty tray: nothing reaches the beam
                self._wait_for_stop()
                if transit.kind is TransitKind.MISFEED:
                    self.mechanism.retry(0.0)

    def _card(self, transit: Transit) -> None:
        if not self._sleep_running(transit.gap):
            return
        self._drive("beam", False)
        time.sleep(transit.blocked / 2)
        pile = self.diverter_pile()  # the card meets the diverter
        time.sleep(transit.blocked / 2)
        self.mechanism.land(transit, pile)
        self.landed.extend((card, pile) for card in self.mechanism.piles[pile][:transit.cards])
        self._sensors()
        self._drive("beam", True)

    def _jam(self, transit: Transit) -> None:
        self._sleep_running(transit.gap)
        self._drive("beam", False)  # stuck in the throat
        self._wait_for_stop()
        deadline = time.monotonic() + 0.5
        while not self.backward() and not self.forward() and time.monotonic() < deadline:
            time.sleep(self.POLL)  # reversing (or a fresh start) frees the card
        self.mechanism.retry(0.0)
        self._drive("beam", True)

    def _wait_for_stop(self) -> None:
        while self.forward() and not self._stop.is_set():
            time.sleep(self.POLL)
        self.motor_off_at.append(time.monotonic())
        self._was_forward = False

    def _watch_led(self) -> None:
        """The simulated dealer reads the LED between passes."""
        m = self.mechanism
        if not (m.piles[0] or m.piles[1]):
            self._restacked = False
            return
        colour = tuple(round(c, 2) for c in self.led())
        shown = {tuple(float(x) for x in rgb): (sig, pile)
                 for (sig, pile), (rgb, _) in COLOURS.items()}.get(colour)
        if shown is None or self._restacked:
            return
        signal, pile = shown
        if signal is Signal.FAULT:  # as the message says: free the throat, gather every card
            self._restacked = True
            self.mechanism.gather()
            self._sensors()
        elif signal is Signal.STACK and pile is not None:
            self._restack(self.dealer.choose(pile), touch=True)
        elif signal is Signal.READY:  # a hand done, or a fault cleared: gather everything
            self._restack(self.dealer.choose(Pile.LEFT), touch=False, gather=True)

    def settled(self) -> bool:
        """Every card back in the tray and the motor still."""
        m = self.mechanism
        return not (m.piles[0] or m.piles[1] or m.stuck or self.forward())

    def _restack(self, on_top: Pile, touch: bool, gather: bool = False) -> None:
        self._restacked = True
        lifts = self.dealer.lift_events(on_top, 0.0)
        gap = lifts[1].at - lifts[0].at
        self._drive("pile_left" if on_top is Pile.LEFT else "pile_right", True)
        time.sleep(gap)
        self._drive("pile_right" if on_top is Pile.LEFT else "pile_left", True)
        if gather:
            self.mechanism.gather()
        else:
            self.mechanism.restack(on_top)
        self._sensors()
        if touch:
            time.sleep(0.01)
            self.touch()


class RiggedGpioDevice(GpioDevice):
    """``--device sim-gpio``: the real GpioDevice on a rig it owns (and stops on close)."""

    def __init__(self, rig: GpioRig, **kwargs) -> None:
        super().__init__(rig.gpio, pin_factory=rig.factory, **kwargs)
        self.rig = rig
        self._info = DeviceInfo("sim-gpio", "GPIO backend on the simulated rig", self.info.feed,
                                accepts_seed=True)
        rig.start()

    def close(self) -> None:
        self.rig.stop()
        super().close()
