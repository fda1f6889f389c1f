"""Every wire between the Raspberry Pi and the machine, in one table. Pure data.

The default ``[pins]`` of :class:`~shuffler.config.GpioConfig`, the wiring table
in docs/hardware.md and the schematic (docs/make_schematic.py) all come from
:data:`WIRES`; tests/test_pinmap.py checks that they agree.

    >>> WIRES["beam"].bcm, WIRES["beam"].header
    (24, 18)
    >>> header_pin(12)
    32
"""

from __future__ import annotations

from dataclasses import dataclass

from shuffler import limits

#: the 40-pin header: BCM number -> physical pin
HEADER = {2: 3, 3: 5, 4: 7, 14: 8, 15: 10, 17: 11, 18: 12, 27: 13, 22: 15, 23: 16, 24: 18,
          10: 19, 9: 21, 25: 22, 11: 23, 8: 24, 7: 26, 0: 27, 1: 28, 5: 29, 6: 31, 12: 32,
          13: 33, 19: 35, 16: 36, 26: 37, 20: 38, 21: 40}
#: the header's power pins the machine uses: 3V3 for the sensors and the ADC, GND for all.
#: The 5 V pins are never tied to the mechanism's 5 V rail (the Pi has its own supply).
POWER_PINS = {"3V3": (1, 17), "5V (Pi, from USB)": (2, 4),
              "GND": (6, 9, 14, 20, 25, 30, 34, 39)}


def header_pin(bcm: int) -> int:
    """The physical header pin of GPIO ``bcm``."""
    return HEADER[bcm]


@dataclass(frozen=True)
class Wire:
    """One signal: where it lands on the Pi and what it drives or reads."""

    role: str  # the [pins] key, or the SPI signal's name
    bcm: int
    direction: str  # "in", "out" or "spi"
    pull: str  # what holds the line when nothing drives it
    rail: str  # the supply of the part at the other end
    part: str  # the part and its pin
    gpiozero: str  # the class that drives it
    optional: bool = False  # the config may set it to false (not fitted)

    @property
    def header(self) -> int:
        return header_pin(self.bcm)

    @property
    def label(self) -> str:
        """How the schematic names the pin: ``GPIO24 (pin 18)``."""
        return f"GPIO{self.bcm} (pin {self.header})"


_WIRES = (
    Wire("touch", 17, "in", "down (Pi internal)", "3V3", "U4 TTP223 touch module I/O",
         "Button(pull_up=False)"),
    Wire("motor", 12, "out", "down 10 kΩ (R11)", "9 V", "U1 DRV8833 breakout AIN1",
         "Motor / PWMOutputDevice"),
    Wire("motor_backward", 13, "out", "down 10 kΩ (R12)", "9 V", "U1 DRV8833 breakout AIN2",
         "Motor", optional=True),
    Wire("diverter", 18, "out", "down 10 kΩ (R13)", "5 V mechanism",
         "M2 SG90 servo signal (J3, orange)", "AngularServo"),
    Wire("beam", 24, "in", "up 10 kΩ (R7) to 3V3", "3V3",
         "U3 IR beam receiver OUT (open collector)",
         "DigitalInputDevice"),
    Wire("tray", 25, "in", "up (module's 10 kΩ)", "3V3", "U6 TCRT5000 module DO, tray",
         "DigitalInputDevice"),
    Wire("pile_left", 5, "in", "up (module's 10 kΩ)", "3V3", "U7 TCRT5000 module DO, left pile",
         "DigitalInputDevice"),
    Wire("pile_right", 6, "in", "up (module's 10 kΩ)", "3V3", "U8 TCRT5000 module DO, right pile",
         "DigitalInputDevice"),
    Wire("led_red", 16, "out", "none", "3V3 (GPIO)",
         "D5 RGB LED red anode via R15 330 Ω", "RGBLED",
         optional=True),
    Wire("led_green", 20, "out", "none", "3V3 (GPIO)",
         "D5 RGB LED green anode via R16 68 Ω", "RGBLED",
         optional=True),
    Wire("led_blue", 21, "out", "none", "3V3 (GPIO)",
         "D5 RGB LED blue anode via R17 100 Ω", "RGBLED",
         optional=True),
    Wire("buzzer", 26, "out", "down 100 kΩ (R9)", "5V (Pi)",
         "Q2 2N3904 base via R8 1 kΩ (buzzer BZ1)",
         "Buzzer", optional=True),
    Wire("SPI CE0", 8, "spi", "none", "3V3", "U2 MCP3008 CS/SHDN (pin 10)", "MCP3008"),
    Wire("SPI MISO", 9, "spi", "none", "3V3", "U2 MCP3008 DOUT (pin 12)", "MCP3008"),
    Wire("SPI MOSI", 10, "spi", "none", "3V3", "U2 MCP3008 DIN (pin 11)", "MCP3008"),
    Wire("SPI SCLK", 11, "spi", "none", "3V3", "U2 MCP3008 CLK (pin 13)", "MCP3008"),
)
WIRES: dict[str, Wire] = {w.role: w for w in _WIRES}

#: the [pins] roles, in config order
PIN_ROLES = tuple(w.role for w in _WIRES if w.direction != "spi")
#: the pins the battery monitor takes: BCM -> what it is
SPI0_PINS = {w.bcm: f"{w.role} ({w.part.split(' (')[0]})" for w in _WIRES
             if w.direction == "spi"}

#: the MCP3008's 16 pins (DIP): pin -> (name, where it goes)
MCP3008_PINS = {1: ("CH0", "battery divider tap"), 2: ("CH1", "—"), 3: ("CH2", "—"),
                4: ("CH3", "—"), 5: ("CH4", "—"), 6: ("CH5", "—"), 7: ("CH6", "—"),
                8: ("CH7", "—"), 9: ("DGND", "GND"), 10: ("CS/SHDN", WIRES["SPI CE0"].label),
                11: ("DIN", WIRES["SPI MOSI"].label), 12: ("DOUT", WIRES["SPI MISO"].label),
                13: ("CLK", WIRES["SPI SCLK"].label), 14: ("AGND", "GND"),
                15: ("VREF", "3V3"), 16: ("VDD", "3V3")}

#: the battery divider: top and bottom resistors (ohms), their tolerance, the filter capacitor
DIVIDER_TOP, DIVIDER_BOTTOM, DIVIDER_TOLERANCE, DIVIDER_CAP_NF = 100_000, 33_000, 0.01, 100


#: the feed motor in the BOM: a 6 V N20 gear motor (medium-power winding)
MOTOR_RATED_VOLTS = 6.0
#: servo pulses come every 20 ms (shuffler.limits): a flap command waits up to one frame
SERVO_FRAME_S = limits.SERVO_FRAME_S


def motor_duty_cap(motor_volts: float, block_volts: float) -> float:
    """The largest PWM duty that keeps a ``motor_volts`` motor at its rating on a fresh
    ``block_volts`` block (the mean voltage across the motor is duty × block), rounded
    down to the hundredth.

    >>> motor_duty_cap(6.0, 9.5), motor_duty_cap(9.0, 9.5), motor_duty_cap(12.0, 9.8)
    (0.63, 0.94, 1.0)
    """
    return min(1.0, int(100 * motor_volts / block_volts) / 100)


def divider_ratio() -> float:
    """Battery volts per volt at the ADC: (top + bottom) / bottom."""
    return (DIVIDER_TOP + DIVIDER_BOTTOM) / DIVIDER_BOTTOM


def divider_ratio_range() -> tuple[float, float]:
    """The ratio's worst-case spread with both resistors at their tolerance."""
    t = DIVIDER_TOLERANCE
    low = (DIVIDER_TOP * (1 - t) + DIVIDER_BOTTOM * (1 + t)) / (DIVIDER_BOTTOM * (1 + t))
    high = (DIVIDER_TOP * (1 + t) + DIVIDER_BOTTOM * (1 - t)) / (DIVIDER_BOTTOM * (1 - t))
    return low, high


def limits_table() -> str:
    """The "Limits" table of docs/hardware.md (Markdown), from :mod:`shuffler.limits`."""
    lim, ratio = limits, divider_ratio()
    vm = f"{lim.DRIVER_VM_MAX_VOLTS:g} V"
    rows = [
        ("9 V side (BT1 → U1 VIN)", f"{lim.BLOCK_MIN_VOLTS:.1f}–{vm}",
         f"the DRV8833's VM is {lim.DRIVER_VM_MIN_VOLTS:g}–{vm} (absolute maximum "
         f"{lim.DRIVER_VM_ABS_MAX_VOLTS:g} V; Q3's gate takes ±12 V): never a 12 V supply, nor "
         "an 8-cell NiMH block (over 11 V off the charger). A pass or a hand is refused (exit "
         "4, `over_voltage`), and the self-test's battery step fails, when the block reads "
         f"above {lim.OVER_VOLTS:g} V at the monitor (the limit less its "
         f"{lim.MONITOR_SPREAD_VOLTS:g} V spread) or above {vm} on the multimeter"),
        ("U5 buck (D24V5F5)", "input up to 36 V; output 500 mA at most",
         "the servo (150 mA swinging) and the emitter (11 mA); no solenoid on it"),
        ("3V3 (Pi pins 1, 17)", "about 70 mA used",
         "the sensors, the ADC and the LED; the Pi's regulator gives several hundred mA"),
        ("5V_PI (Pi pins 2, 4)", "the buzzer only (30 mA)", "nothing from the mechanism "
         "reaches them"),
        ("a GPIO pin", "3.3 V logic, 16 mA at most (50 mA for all pins together)",
         "never 5 V on a GPIO; the LED's 8 mA is the most any pin sources"),
        ("U1 DRV8833", "1.5 A RMS, 2 A peak a channel", "M1's stall must stay under it"),
        ("M1", f"{MOTOR_RATED_VOLTS:g} V rated: duty capped at {MOTOR_RATED_VOLTS:g} / 9.5 = "
         f"{motor_duty_cap(MOTOR_RATED_VOLTS, 9.5):.2f}", "`[gpio] motor_volts` (default "
         f"{MOTOR_RATED_VOLTS:g}): the GPIO backend's motor output never gives more duty; "
         "on the Nano the firmware clamps the duty to the cap CONFIG carries, which the host "
         "derives from it and the battery (`docs/config.md`)"),
        ("F1", "0.75 A hold, 1.5 A trip", "above the ≈0.45 A a stalled motor draws"),
        ("SW1", "rated 1 A DC or more", "the pass draws 0.4 A, a motor start more"),
        ("MCP3008 inputs", f"0 V to VREF ({lim.ADC_VREF_VOLTS:g} V; absolute maximum "
         f"{lim.ADC_ABS_MAX_VOLTS:g} V)", f"CH0 gets {lim.DRIVER_VM_MAX_VOLTS / ratio:.2f} V "
         f"at {vm}; the monitor counts {lim.ADC_FULL_SCALE_VOLTS:g} V as full scale and "
         "refuses to run (`battery_monitor`)"),
        ("motor PWM (`[gpio] motor_pwm_hz`)", "lgpio 10 kHz, pigpio 8 kHz, the drivers 50 kHz",
         "refused at start above the pin factory's limit (exit 2)"),
        ("servo frame", f"{lim.SERVO_FRAME_S * 1000:g} ms", f"`flap_travel_s` + "
         f"{lim.SERVO_FRAME_S * 1000:g} ms must be under 1 / `card_rate`: refused otherwise "
         "(exit 2)"),
    ]
    return "\n".join(["| what | limit | why, and what checks it |", "|---|---|---|",
                      *(f"| {a} | {b} | {c} |" for a, b, c in rows)])


def default_pins() -> dict[str, int]:
    """The default ``[pins]``, by role."""
    return {role: WIRES[role].bcm for role in PIN_ROLES}


def wiring_table() -> str:
    """The wiring table of docs/hardware.md (Markdown)."""
    rows = ["| signal | config key | BCM | header pin | direction | pull | part's rail | "
            "goes to | gpiozero |",
            "|---|---|---|---|---|---|---|---|---|"]
    for w in _WIRES:
        key = f"`[pins] {w.role}`" if w.direction != "spi" else "(battery monitor)"
        opt = " (optional)" if w.optional else ""
        rows.append(f"| {w.role}{opt} | {key} | GPIO{w.bcm} | {w.header} | {w.direction} | "
                    f"{w.pull} | {w.rail} | {w.part} | `{w.gpiozero}` |")
    power = ", ".join(f"{name}: pins {', '.join(map(str, pins))}"
                      for name, pins in POWER_PINS.items())
    rows += ["", f"Power pins of the header: {power}."]
    return "\n".join(rows)


@dataclass(frozen=True)
class Module:
    """A breakout board or connector of the build: its reference, what it is, and each of
    its pins as (label on the board, where it goes, wire colour)."""

    ref: str
    name: str
    pins: tuple[tuple[str, str, str], ...]


def _to(role: str) -> str:
    return f"{WIRES[role].label} ({role})"


#: every board and connector, pin by pin, with the wire colours the schematic suggests:
#: red for a supply, black for GND, one colour per signal
MODULES = (
    Module("J1", "9 V snap clip (BT1)", (("red +", "F1, then Q3 drain", "red"),
                                         ("black −", "GND", "black"))),
    Module("U1", "DRV8833 breakout (Pololu #2130 labels)", (
        ("VIN", "9V (after SW1), C1 +", "red"), ("GND", "GND", "black"),
        ("AIN1", _to("motor") + ", R11 10 kΩ to GND", "white"),
        ("AIN2", _to("motor_backward") + ", R12 10 kΩ to GND", "grey"),
        ("SLP", "R3 10 kΩ to 3V3", "yellow"),
        ("AOUT1", "J2 pin 1, motor +", "red"), ("AOUT2", "J2 pin 2, motor −", "black"),
        ("BIN1, BIN2, FLT", "not connected", "—"))),
    Module("J3", "SG90 servo lead (M2)", (("brown", "GND", "brown"),
                                         ("red", "5V_MECH (U5 VOUT)", "red"),
                                         ("orange", _to("diverter") + ", R13 10 kΩ to GND",
                                          "orange"))),
    Module("U5", "5 V buck (Pololu D24V5F5)", (("VIN", "9V (after SW1)", "red"),
                                               ("GND", "GND", "black"),
                                               ("VOUT", "5V_MECH: servo, IR emitter", "red"))),
    Module("U2", "MCP3008 (DIP-16)", (
        ("1 CH0", "R10 1 kΩ from the divider tap; D4 clamp", "green"),
        ("2–8 CH1–CH7", "GND (unused inputs tied down)", "black"),
        ("9 DGND, 14 AGND", "GND", "black"), ("15 VREF, 16 VDD", "3V3, C5 100 nF", "red"),
        ("10 CS/SHDN", _to("SPI CE0"), "blue"), ("11 DIN", _to("SPI MOSI"), "green"),
        ("12 DOUT", _to("SPI MISO"), "yellow"), ("13 CLK", _to("SPI SCLK"), "white"))),
    Module("U3", "IR beam receiver", (("VCC", "3V3", "red"), ("GND", "GND", "black"),
                                      ("OUT", _to("beam") + ", R7 10 kΩ to 3V3", "yellow"))),
    Module("U4", "TTP223 touch module", (("VCC", "3V3", "red"), ("GND", "GND", "black"),
                                         ("I/O", _to("touch"), "blue"))),
    Module("U6", "TCRT5000 module, tray", (("VCC", "3V3", "red"), ("GND", "GND", "black"),
                                           ("DO", _to("tray"), "green"),
                                           ("AO", "not connected", "—"))),
    Module("U7", "TCRT5000 module, left pile", (("VCC", "3V3", "red"), ("GND", "GND", "black"),
                                                ("DO", _to("pile_left"), "white"),
                                                ("AO", "not connected", "—"))),
    Module("U8", "TCRT5000 module, right pile", (("VCC", "3V3", "red"),
                                                 ("GND", "GND", "black"),
                                                 ("DO", _to("pile_right"), "grey"),
                                                 ("AO", "not connected", "—"))),
)

#: the first power-on's test points: name -> (where, expected, with what connected)
TEST_POINTS = {
    "TP1": ("9V after SW1 (U1 VIN)", f"the block's volts at J1 less 0 to "
            f"{limits.IDLE_DROP_VOLTS:g} V ({limits.BLOCK_MIN_VOLTS:.1f}–"
            f"{limits.DRIVER_VM_MAX_VOLTS:g} V); in a pass up to {limits.PASS_SAG_VOLTS:g} V "
            f"less, stalled {limits.STALL_SAG_VOLTS:g} V", "block in, SW1 on"),
    "TP2": ("5V_MECH (U5 VOUT)", f"{limits.BUCK_VOLTS[0]:.2f}–{limits.BUCK_VOLTS[1]:.2f} V",
            "block in, SW1 on"),
    "TP3": ("divider tap (R1/R2, before R10)", f"TP1 ÷ {divider_ratio():.2f} ± "
            f"{limits.TAP_TOLERANCE:.0%} ({9.6 / divider_ratio():.2f} V at 9.6 V)",
            "block in, SW1 on; R10 out, or the Pi powered"),
    "TP4": ("3V3 at U2 VDD", f"{limits.PI_3V3[0]:.2f}–{limits.PI_3V3[1]:.2f} V",
            "Pi on its USB supply"),
    "TP5": ("GND (the one ground, header pin 6)", "the meter's black lead", "always"),
}


def modules_table() -> str:
    """The per-module wiring table of docs/hardware.md (Markdown)."""
    rows = ["| ref | module | its pin | goes to | wire |", "|---|---|---|---|---|"]
    for m in MODULES:
        for i, (pin, to, colour) in enumerate(m.pins):
            rows.append(f"| {m.ref if not i else ''} | {m.name if not i else ''} | {pin} | "
                        f"{to} | {colour} |")
    rows += ["", "| test point | where | expect | with |", "|---|---|---|---|"]
    rows += [f"| {tp} | {where} | {expect} | {when} |"
             for tp, (where, expect, when) in TEST_POINTS.items()]
    return "\n".join(rows)

#: the microcontroller build (docs/firmware.md, firmware/board.h): role -> (Arduino Nano
#: pin, AVR port pin); 5 V logic, the Nano on the host's USB
NANO_PINS = {"beam": ("D2", "PD2"), "touch": ("D3", "PD3"), "tray": ("D4", "PD4"),
             "motor": ("D5", "PD5"), "motor_backward": ("D6", "PD6"),
             "pile_left": ("D7", "PD7"), "pile_right": ("D8", "PB0"),
             "diverter": ("D9", "PB1"), "led_red": ("D10", "PB2"),
             "led_green": ("D11", "PB3"), "led_blue": ("D12", "PB4"),
             "battery": ("A0", "PC0"), "buzzer": ("A1", "PC1")}
#: the Nano build's divider: 20 kΩ over 10 kΩ (the firmware's ratio of 3, and a source the
#: ATmega's ADC reads without error), after SW1 so it draws nothing when switched off
NANO_DIVIDER_TOP, NANO_DIVIDER_BOTTOM = 20_000, 10_000
