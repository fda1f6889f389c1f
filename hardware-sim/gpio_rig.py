"""A rig that drives gpiozero's mock pins from the simulated mechanism.

``MockFactory`` supplies the pins (:class:`RigFactory`, whose pins stamp their
changes with the rig's clock); :class:`MockMCP3008` (built on ``MockSPIDevice``)
answers the battery monitor's SPI reads with the simulated battery's volts
through the divider. The rig runs on an :class:`~shuffler.device.clock.EventClock`:
whenever the device waits, the rig looks at the motor pins and, while the motor
runs forward at full speed, moves cards across the beam at the mechanism's rate,
landing each on the pile the diverter points to as the card passes it. Time
moves only through those waits, so a pass is the same however busy the host is
(give the clock a ``speed`` to watch it in real time). The simulated dealer
watches the status LED: when it shows which pile to put on top, the dealer lifts
the piles (the pile sensors see it), loads the tray and touches the sensor.
:class:`SensorNoise` adds 50 µs glitches and contact bounce to the inputs.

    >>> rig = GpioRig.for_cards(24)
    >>> dev = RiggedGpioDevice(rig)
    >>> dev.tray.is_active
    True
    >>> from shuffler.core.planning import coin_plan
    >>> import random
    >>> dev.run_pass(coin_plan(24, random.Random(1))).counted
    24
    >>> dev.close()
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from gpiozero import Device
from gpiozero.pins.mock import (
    MockFactory,
    MockPin,
    MockPWMPin,
    MockSPIClockPin,
    MockSPIDevice,
    MockSPISelectPin,
    PinState,
)

from shuffler.config import GpioConfig
from shuffler.core.cards import Card, standard_pack
from shuffler.core.mechanics import Pile
from shuffler.device.clock import EventClock
from shuffler.device.contract import InputEvent, Signal
from shuffler.gpio.device import COLOURS, WARN_RED, GpioDevice

from .battery import SimBattery
from .dealer import DealerHabit, PilesSeen, Reaction, SimDealer
from .faults import FaultPlan
from .physics import Mechanism, MechanismSpec, Transit, TransitKind

#: seconds a dealer holding the pile lifted first waits for the machine's warning (it
#: comes within a tenth of a second while the machine watches the lifts) before going on
HEARS_NOTHING_S = 1.0

#: a rig pin keeps its newest changes only (``states``): from this many to twice as many
STATES_KEPT = 5000


class _KeptStates:
    """A mock pin whose change history (``states``) is bounded: gpiozero's MockPin keeps
    every change, and the MCP3008's SPI clock edges alone would grow a simulated evening
    by megabytes a hand. Trimmed by halves, so a change costs O(1) on average."""

    states: list[PinState]

    def _trim_states(self) -> None:
        if len(self.states) > 2 * STATES_KEPT:
            del self.states[:-STATES_KEPT]

    def _change_state(self, value: bool) -> bool:
        changed = super()._change_state(value)  # type: ignore[misc]
        self._trim_states()
        return changed


class RigPin(_KeptStates, MockPWMPin):
    """A mock pin that stamps its changes with the rig's clock, not the host's."""

    # MockPin's own attributes, which this pin updates (gpiozero ships no types)
    _state: bool
    _last_change: float

    def _change_state(self, value: bool) -> bool:
        if self._state != value:
            t = self._factory.ticks()
            self._state = value
            self.states.append(PinState(t - self._last_change, value))
            self._last_change = t
            self._trim_states()
            return True
        return False

    def clear_states(self) -> None:
        self._last_change = self._factory.ticks()
        self.states = [PinState(0.0, self._state)]


class RigFactory(MockFactory):
    """gpiozero's mock factory on the rig's clock (edge times are device time)."""

    def __init__(self, clock: EventClock) -> None:
        self.clock = clock
        super().__init__(pin_class=RigPin)

    def ticks(self) -> float:
        return self.clock.now()


@dataclass(frozen=True)
class SensorNoise:
    """What real inputs add: a spike of ``glitch_s`` in the middle of every card
    gap and every card (beam), and ``bounce`` extra flips ``bounce_s`` apart at every
    change of the beam, touch and pile sensors."""

    glitch_s: float = 0.0
    bounce: int = 0
    bounce_s: float = 0.0001


class _ClockPin(_KeptStates, MockSPIClockPin, MockPWMPin):
    """An SPI clock pin the PWM factory accepts, with a plain on/off state."""

    def _set_state(self, value):
        MockPin._set_state(self, value)
        for dev in self.spi_devices:
            dev.on_clock()


class _SelectPin(_KeptStates, MockSPISelectPin, MockPWMPin):
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
        self.rx_bit = 0
        self.rx_buf: list[int] = []  # 1s and 0s, as gpiozero keeps them
        self.tx_buf: list[int] = []
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
    """The simulated machine behind mock pins, on device time (see the module doc)."""

    def __init__(self, mechanism: Mechanism, gpio: GpioConfig | None = None,
                 dealer: SimDealer | None = None, clock: EventClock | None = None,
                 noise: SensorNoise | None = None) -> None:
        self.mechanism = mechanism
        self.gpio = gpio or GpioConfig()
        self.dealer = dealer or SimDealer()
        self.clock = clock or EventClock()
        self.noise = noise or SensorNoise()
        self.factory = RigFactory(self.clock)
        # gpiozero's software SPI bus insists on a default factory existing
        if Device.pin_factory is None:
            Device.pin_factory = self.factory
        self.pins = {role: self.factory.pin(n) for role, n in self.gpio.pins().items()}
        self.adc = (MockMCP3008(self.factory, self._adc_volts, self.gpio.adc_vref)
                    if self.gpio.adc_channel is not None else None)
        #: every card of the pass and the pile it fell on (a new pass starts it again)
        self.landed: list[tuple[object, Pile]] = []
        #: when the motor left full forward speed (the newest few hundred)
        self.motor_off_at: list[float] = []
        self._forward = False  # what the rig saw at its last look
        self._epoch = 0  # bumped when the roller stops: a card short of the beam stays put
        self._busy = False  # a card is on its way (or the roller slips on nothing)
        self._in_beam = False  # a card (moving or stuck) blocks the beam
        self._retry_due = False  # a card failed to feed: backing out or refeeding retries
        self._failing = False  # since a failed card: a restart is a retry, not a new pass
        self._first = True
        self._restacked = False
        #: the dealer holds the pile it lifted first, the other one than the light asks:
        #: (asked, its reaction, touch after, gather)
        self._held: tuple[Pile, Reaction, bool, bool] | None = None

    @classmethod
    def for_cards(cls, n: int, *, card_rate: float = 5.0, faults: FaultPlan | None = None,
                  gpio: GpioConfig | None = None, habit: DealerHabit = DealerHabit.INSTRUCTED,
                  rng: random.Random | None = None, battery: SimBattery | None = None,
                  spec: MechanismSpec | None = None, clock: EventClock | None = None,
                  noise: SensorNoise | None = None, listens: bool = True) -> GpioRig:
        faults = faults or FaultPlan()
        battery = (battery or SimBattery()).starting_at(faults.battery_volts)
        spec = spec or MechanismSpec(card_rate=card_rate)
        mech: Mechanism[Card] = Mechanism(standard_pack(n), spec, battery, faults)
        return cls(mech, gpio, SimDealer(habit, rng or random.Random(), listens=listens), clock,
                   noise)

    # -- what the pins say ----------------------------------------------------------
    def _state(self, role: str) -> float:
        pin = self.pins.get(role)
        return float(pin.state) if pin is not None else 0.0

    def forward(self) -> bool:
        """The roller turns fast enough to feed: past the soft start's ramp (full speed is
        the duty cap, ``[gpio] motor_max_duty``)."""
        return self._state("motor") > 0.9 * self.gpio.motor_max_duty

    def backward(self) -> bool:
        return self._state("motor_backward") > 0.05

    def diverter_pile(self) -> Pile:
        pin = self.pins["diverter"]
        if self.gpio.diverter_kind == "solenoid":
            return Pile(int(bool(pin.state)))
        # servo: pulses in a 20 ms frame; the centre (1.5 ms) divides left from right
        centre = self.gpio.servo_pulse_ms(0.0) / 20.0
        return Pile.RIGHT if float(pin.state) > centre else Pile.LEFT

    def servo_pulse_ms(self) -> float:
        return float(self.pins["diverter"].state) * 20.0

    def led(self) -> tuple[float, float, float]:
        return (self._state("led_red"), self._state("led_green"), self._state("led_blue"))

    def _adc_volts(self, channel: int) -> float:
        if channel != self.gpio.adc_channel:
            return 0.0
        return self.mechanism.battery.volts(self.forward()) / self.gpio.divider_ratio

    # -- driving the inputs ------------------------------------------------------------
    ACTIVE_HIGH: ClassVar[dict[str, str]] = {
        "touch": "touch_active_high", "beam": "beam_active_high", "tray": "tray_active_high",
        "pile_left": "piles_active_high", "pile_right": "piles_active_high"}

    def _drive(self, role: str, high: bool) -> None:
        pin = self.pins[role]
        if pin.function == "input":
            pin.drive_high() if high else pin.drive_low()

    def set_sensor(self, role: str, active: bool, bounce: bool = True) -> None:
        """Make sensor ``role`` active (beam blocked, tray or pile covered, touched),
        with the configured polarity, bouncing if the noise says so."""
        high = active == getattr(self.gpio, self.ACTIVE_HIGH[role])
        flips = self.noise.bounce if bounce else 0
        now = self.clock.now()
        for k in range(flips):  # settles after ``flips`` short flips
            level = high if k % 2 == 0 else not high
            self.clock.at(now + k * self.noise.bounce_s, partial(self._drive, role, level))
        if flips:
            self.clock.at(now + flips * self.noise.bounce_s, partial(self._drive, role, high))
        else:
            self._drive(role, high)

    def _glitch(self, at: float, role: str, active: bool) -> None:
        if self.noise.glitch_s:
            self.clock.at(at, lambda: self.set_sensor(role, active, bounce=False))
            self.clock.at(at + self.noise.glitch_s,
                          lambda: self.set_sensor(role, not active, bounce=False))

    def _sensors(self) -> None:
        m = self.mechanism
        self.set_sensor("tray", bool(m.tray))
        self.set_sensor("pile_left", bool(m.piles[Pile.LEFT]))
        self.set_sensor("pile_right", bool(m.piles[Pile.RIGHT]))

    def long_press(self, hold: float = 2.2) -> None:
        """The dealer holds the sensor (a clear), with contact bounce at both ends."""
        self.press("touch", hold)

    def touch(self, hold: float = 0.05) -> None:
        """A finger's touch: pressed ``hold`` seconds, bouncing on both edges."""
        self.press("touch", hold)

    def taps(self, count: int, rate: float, hold: float | None = None,
             at: float | None = None) -> list[float]:
        """``count`` quick taps, ``rate`` a second, each held ``hold`` seconds (default:
        0.1 s, or half the period at more than 5 a second, as a finger taps), bouncing on
        both edges; returns when each began."""
        start = self.clock.now() if at is None else at
        hold = min(0.1, 0.5 / rate) if hold is None else hold
        began = [start + k / rate for k in range(count)]
        for t in began:
            self.press("touch", hold, at=t)
        return began

    def press(self, role: str, hold: float, bounces: int = 3, bounce_s: float = 0.002,
              at: float | None = None) -> None:
        """Sensor ``role`` active for ``hold`` seconds from ``at`` (default now), as a
        finger or a card makes it: ``bounces`` extra flips ``bounce_s`` apart at the start
        and at the end (a drop-out or flicker on the beam is a short ``press`` of it
        inactive: use :meth:`blip`)."""
        start = self.clock.now() if at is None else at
        for edge_at, active in ((start, True), (start + hold, False)):
            for k in range(bounces):
                flip = active if k % 2 == 0 else not active
                self.clock.at(edge_at + k * bounce_s,
                              partial(self.set_sensor, role, flip, bounce=False))
            self.clock.at(edge_at + bounces * bounce_s,
                          partial(self.set_sensor, role, active, bounce=False))

    def blip(self, role: str, active: bool, at: float, seconds: float) -> None:
        """Sensor ``role`` goes ``active`` (or inactive) for ``seconds`` at ``at``, then
        back: a glitch, a drop-out of the beam inside a card, one flicker."""
        self.clock.at(at, partial(self.set_sensor, role, active, bounce=False))
        self.clock.at(at + seconds, partial(self.set_sensor, role, not active, bounce=False))

    # -- the loop ------------------------------------------------------------------
    def start(self) -> None:
        """Set the sensors and start watching; call after the device has claimed its pins."""
        self.set_sensor("beam", False, bounce=False)
        self.set_sensor("touch", False, bounce=False)
        self._sensors()
        self.clock.watch(self._look)

    def stop(self) -> None:
        self.clock.unwatch(self._look)
        if Device.pin_factory is self.factory:
            Device.pin_factory = None  # leave no mock pins behind for a real device

    def _look(self) -> None:
        """Whenever time is about to move: react to what the device did to the pins."""
        now = self.clock.now()
        forward = self.forward()
        if forward and not self._forward:
            m = self.mechanism
            if self._retry_due:
                self._retry()
            elif not (m.piles[0] or m.piles[1] or self._failing):
                m.start_pass()  # the motor starts on a full tray: a new pass
                self.landed.clear()
                self._restacked = False
            self._first = True
        elif not forward and self._forward:
            self.motor_off_at.append(now)
            del self.motor_off_at[:-500]
            self._epoch += 1
            self._busy = False
        if self.backward() and self._retry_due:
            self._retry()
        self._forward = forward
        if forward:
            self._feed()
        else:
            self._watch_led()

    def _retry(self) -> None:
        """Backing out (or refeeding) frees a stuck card and gives a slipping one its retry."""
        self._retry_due = False
        self.mechanism.retry(0.0)
        if self._in_beam:
            self._in_beam = False
            self.set_sensor("beam", False)

    def _feed(self) -> None:
        if self._busy:
            return
        now, epoch = self.clock.now(), self._epoch
        transit = self.mechanism.next_transit(first=self._first)
        self._first, self._busy = False, True
        if transit.kind is TransitKind.CARD:
            self.clock.at(now + transit.gap, lambda: self._card_enters(transit, epoch))
            self._glitch(now + transit.gap / 2, "beam", True)
        elif transit.kind is TransitKind.JAM:
            self._failing = True
            if not self._in_beam:
                self.clock.at(now + transit.gap, lambda: self._stuck(epoch))
        elif transit.kind is TransitKind.MISFEED:
            self._failing = self._retry_due = True
        # a stall or an empty tray: nothing reaches the beam

    def _stuck(self, epoch: int) -> None:
        self._retry_due = True  # a stuck card (in the throat, taken from the tray)
        if epoch == self._epoch:
            self._in_beam = True
            self.set_sensor("beam", True)

    def _card_enters(self, transit: Transit, epoch: int) -> None:
        if epoch != self._epoch:
            return  # the roller stopped before this card reached the beam
        now = self.clock.now()
        self._in_beam = True
        self.set_sensor("beam", True)
        self._glitch(now + transit.blocked * 0.25, "beam", False)
        if transit.dropout:  # --sim-fault dropout:MS
            self.blip("beam", False, now + transit.dropout_at, transit.dropout)
        met: list[Pile] = []
        self.clock.at(now + transit.blocked / 2, lambda: met.append(self.diverter_pile()))
        self.clock.at(now + transit.blocked, lambda: self._card_leaves(transit, met))

    def _card_leaves(self, transit: Transit, met: list[Pile]) -> None:
        pile = met[0]
        self.mechanism.land(transit, pile)
        self.landed.extend((card, pile) for card in self.mechanism.piles[pile][:transit.cards])
        self._failing = False
        self._sensors()
        self._in_beam = False
        self.set_sensor("beam", False)
        self._busy = False
        if self._forward and self.forward():
            self._feed()

    def _watch_led(self) -> None:
        """The simulated dealer reads the LED between passes."""
        m = self.mechanism
        colour = tuple(round(c, 2) for c in self.led())
        if self._held is not None:  # holding the other pile than asked: red is the warning
            if colour == WARN_RED:
                self._hears_the_warning()
            return
        if not (m.piles[0] or m.piles[1]):
            self._restacked = False
            return
        shown = {tuple(float(x) for x in rgb): (sig, pile)
                 for (sig, pile), (rgb, _) in COLOURS.items()}.get(colour)
        if shown is None or self._restacked:
            return
        signal, pile = shown
        if signal is Signal.FAULT:  # as the message says: free the throat, gather every card
            self._restacked = True
            self._in_beam = self._retry_due = self._failing = False
            self.set_sensor("beam", False)
            self.mechanism.gather()
            self._sensors()
        elif signal is Signal.STACK and pile is not None:
            # the LED's colour does not say whether the hand ends here: follows-but-last follows
            self._lifts(pile, self.mechanism.seen(False), touch=True)
        elif signal is Signal.READY:  # a hand done, or a fault cleared: gather everything
            self._lifts(Pile.LEFT, None, touch=False, gather=True)

    def _lifts(self, asked: Pile, seen: PilesSeen | None, touch: bool,
               gather: bool = False) -> None:
        """The dealer's reaction to the light (:meth:`SimDealer.reacts`, as the simulator
        plays it): the pile asked for first stacks at once; the other one first is held
        while the machine warns."""
        piles = self.mechanism.piles
        does = self.dealer.reacts(asked, self.clock.now(), seen,
                                  lambda pile: piles[pile][-1] if piles[pile] else None)
        if does.follows:
            self._restack(does.lifts, touch, gather)
            return
        self._restacked = True
        held = self._held = (asked, does, touch, gather)
        self.set_sensor(self._sensor(does.on_top), False)
        if does.at_once:
            self.clock.at(does.lifts[1].at,
                          partial(self.set_sensor, self._sensor(does.on_top.other), False))
        if gather:  # after a lone pass nothing watches the lifts: no warning comes
            self.clock.at(self.clock.now() + HEARS_NOTHING_S, partial(self._goes_on, held))

    def _goes_on(self, held: tuple[Pile, Reaction, bool, bool]) -> None:
        """Warned of nothing, the dealer stops holding the pile and stacks as it was going
        to (held for ever, it left the tray empty: a stuck simulator)."""
        if self._held is held:
            self._held = None
            _, does, touch, gather = held
            self._restack(self.dealer.lift_events(does.on_top, self.clock.now()), touch,
                          gather)

    @staticmethod
    def _sensor(pile: Pile) -> str:
        return "pile_left" if pile is Pile.LEFT else "pile_right"

    def _hears_the_warning(self) -> None:
        """A dealer who listens puts the pile back and lifts the one asked for first; one
        who does not first holds the sensor to keep the stack, is refused (the warning
        stays), and is made to do the same."""
        assert self._held is not None
        asked, does, touch, gather = self._held
        self._held = None
        now = self.clock.now()
        if does.keeps:
            self.long_press(self.dealer.hold)
            now += self.dealer.hold + 0.5
        for pile in Pile:  # puts back what it holds
            if self.mechanism.piles[pile]:
                self.clock.at(now + self.dealer.put_back / 2,
                              partial(self.set_sensor, self._sensor(pile), True))
        lifts = self.dealer.corrects(asked, now)
        self.clock.at(lifts[0].at, partial(self._restack, lifts, touch, gather))

    def settled(self) -> bool:
        """Every card back in the tray and the motor still."""
        m = self.mechanism
        return not (m.piles[0] or m.piles[1] or m.stuck or self.forward())

    def _restack(self, lifts: list[InputEvent], touch: bool, gather: bool = False) -> None:
        """The dealer's two ``lifts`` (now, and the other pile after the gap between
        them), then the pack in the tray and, with ``touch``, a touch."""
        self._restacked = True
        on_top = lifts[0].pile
        assert on_top is not None
        gap = lifts[1].at - lifts[0].at
        first, second = self._sensor(on_top), self._sensor(on_top.other)
        self.set_sensor(first, False)

        def second_lift() -> None:
            self.set_sensor(second, False)
            if gather:
                self.mechanism.gather()
            else:
                self.mechanism.restack(on_top)
            self._sensors()
            if touch:
                self.clock.at(self.clock.now() + 0.01, self.touch)

        self.clock.at(self.clock.now() + gap, second_lift)


class RiggedGpioDevice(GpioDevice):
    """``--device sim-gpio``: the real GpioDevice on a rig it owns (and stops on close)."""

    def __init__(self, rig: GpioRig, **kwargs) -> None:
        self.rig = rig  # first: a failed (or signalled) GpioDevice.__init__ closes it
        super().__init__(rig.gpio, pin_factory=rig.factory, clock=rig.clock, kind="sim-gpio",
                         name="GPIO backend on the simulated rig", accepts_seed=True, **kwargs)
        rig.start()

    def close(self) -> None:
        self.rig.stop()
        super().close()
