"""The rig plays the builder for ``shuffler selftest --yes`` on ``sim-gpio`` (everything
but the parts that move: ``--yes`` never says hands are clear), and the rig can be
miswired the ways a builder miswires a machine.

:class:`RigBuilder` does what each self-test step asks (touches the sensor, covers
the tray, pushes a card through the beam) by driving the rig's input pins, and
answers each question (which way did the roller turn, where does the flap point,
what colour is the light, did it beep) from what the rig's output pins did. It
knows the machine only through those pins, so a miswire shows as it would to a
person at the bench.

A miswire (:data:`MISWIRES`) changes which of the device's pins a physical part
is wired to: two wires swapped, or a wire that reaches nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from gpiozero.pins.mock import PinState

from .gpio_rig import GpioRig


class LoosePin:
    """A wire that reaches no pin: driving it changes nothing the device reads, and an
    output never reaches it."""

    function = "input"

    def __init__(self, state: float = 0.0) -> None:
        self.state = state
        self.clear_states()

    def clear_states(self) -> None:
        self.states = [PinState(0.0, self.state)]

    def drive_high(self) -> None:
        self.state = 1.0

    def drive_low(self) -> None:
        self.state = 0.0


def _swap(a: str, b: str) -> Callable[[GpioRig], None]:
    def apply(rig: GpioRig) -> None:
        rig.pins[a], rig.pins[b] = rig.pins[b], rig.pins[a]
    return apply


def _cut(*roles: str) -> Callable[[GpioRig], None]:
    def apply(rig: GpioRig) -> None:
        for role in roles:
            rig.pins[role] = LoosePin(float(rig.pins[role].state))
    return apply


def _divider(ratio: float) -> Callable[[GpioRig], None]:
    """Resistors other than the schematic's: the tap sees the battery over ``ratio``."""
    def apply(rig: GpioRig) -> None:
        if rig.adc is not None:
            channel = rig.gpio.adc_channel
            rig.adc.read_volts = lambda ch: (
                min(rig.mechanism.battery.volts(rig.forward()) / ratio, 3.3)
                if ch == channel else 0.0)
    return apply


def _unplug_adc(dout_high: bool) -> Callable[[GpioRig], None]:
    """The MCP3008 not on the bus (absent, or its CS or CLK open): nothing answers the
    reads, so DOUT (MISO) stays where it rests: low (all zeros: the floor), or high (a
    pull-up, or DOUT shorted to 3V3: full scale)."""
    def apply(rig: GpioRig) -> None:
        if rig.adc is not None:
            rig.adc.clock_pin.spi_devices.remove(rig.adc)
            rig.adc.select_pin.spi_device = None
            miso = rig.adc.miso_pin
            miso.drive_high() if dout_high else miso.drive_low()
    return apply


#: name -> how the rig is miswired; tests check the self-test names the part for each
MISWIRES: dict[str, Callable[[GpioRig], None]] = {
    "dead_touch": _cut("touch"),
    "tray_and_left_pile_swapped": _swap("tray", "pile_left"),
    "piles_swapped": _swap("pile_left", "pile_right"),
    "dead_beam": _cut("beam"),
    "motor_reversed": _swap("motor", "motor_backward"),
    "dead_motor": _cut("motor", "motor_backward"),
    "dead_servo": _cut("diverter"),
    "red_and_blue_swapped": _swap("led_red", "led_blue"),
    "dead_buzzer": _cut("buzzer"),
    "divider_10k_10k": _divider(2.0),
    "divider_120k_33k": _divider(153 / 33),
    "adc_absent": _unplug_adc(dout_high=False),
    "adc_dout_high": _unplug_adc(dout_high=True),
}


def miswire(rig: GpioRig, name: str) -> None:
    """Rewire a started rig; the sensors' wires then carry what their parts sense."""
    MISWIRES[name](rig)
    rig._sensors()


class RigBuilder:
    """The rig as the person at the bench (see :class:`shuffler.gpio.selftest.Builder`)."""

    can_act = True
    HOLD = 0.2  # seconds a touch lasts

    def __init__(self, rig: GpioRig, *, moves: bool = True) -> None:
        self.rig = rig
        self.moves = moves  # False: ``--yes``, nobody says hands are clear

    def confirm(self, question: str, text: str) -> bool:
        return self.moves

    def _level(self, role: str, high: bool) -> None:
        pin = self.rig.pins[role]
        if pin.function == "input":
            pin.drive_high() if high else pin.drive_low()

    def _sense(self, role: str, covered: bool) -> None:
        """A presence sensor sees a card or not (the rig knows its polarity when it says)."""
        set_sensor = getattr(self.rig, "set_sensor", None)
        if set_sensor is not None:
            set_sensor(role, covered, bounce=False)
        else:
            self._level(role, not covered)  # the sensors pull low while covered

    def _clear(self, *roles: str) -> None:
        for role in roles:
            if role in self.rig.pins:
                self.rig.pins[role].clear_states()

    def act(self, action: str, text: str) -> None:
        verb, _, what = action.partition(":")
        if action == "clear":
            for role in ("tray", "pile_left", "pile_right"):
                self._sense(role, False)
        elif verb == "touch":
            self._level("touch", True)  # let go HOLD later on the rig's own clock
            clock = self.rig.clock
            clock.at(clock.now() + self.HOLD, lambda: self._level("touch", False))
        elif verb in ("cover", "uncover"):
            self._sense(what, verb == "cover")
        elif action == "card:beam":
            self._level("beam", False)
        elif action == "card:beam-out":
            self._level("beam", True)
        elif action.startswith("watch:motor"):
            self._clear("motor", "motor_backward")
        elif verb == "watch" and what.startswith("flap"):
            self._clear("diverter")
        elif action == "listen:buzzer":
            self._clear("buzzer")

    def _went_active(self, role: str) -> bool:
        """The pin was driven on since the step began watching it."""
        pin = self.rig.pins.get(role)
        return pin is not None and any(float(s.state) > 0.05 for s in pin.states)

    def ask(self, question: str, text: str, choices: dict[str, str]) -> str | None:
        if question.startswith("motor"):
            if self._went_active("motor"):
                return "f"
            return "b" if self._went_active("motor_backward") else "n"
        if question.startswith("flap"):
            if len(self.rig.pins["diverter"].states) < 2:
                return "n"
            return self.rig.diverter_pile().name[0].lower()
        if question.startswith("light"):
            on = [name for name, value in zip("rgb", self.rig.led(), strict=True)
                  if value > 0.5]
            return on[0] if len(on) == 1 else ("o" if not on else "x")
        if question == "buzzer":
            return "y" if self._went_active("buzzer") else "n"
        return None

    def measure(self, question: str, text: str) -> float | None:
        if question == "multimeter":  # the meter at the clip: the block at rest
            return round(self.rig.mechanism.battery.volts(False), 2)
        return None
