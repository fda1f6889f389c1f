"""Draw docs/schematic.svg and write the generated tables of docs/hardware.md.

    python docs/make_schematic.py          # needs the docs extra: pip install -e '.[docs]'

Everything comes from shuffler.pinmap (pins, header numbers, divider) and
shuffler.core.battery (the power budget); tests/test_pinmap.py checks the outputs
agree with them. Wires between blocks are joined by name (a tag): every tag
name appears at both ends.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import NamedTuple

import schemdraw
import schemdraw.elements as elm

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from shuffler import limits, pinmap, poweron  # noqa: E402
from shuffler.config import FRESH_VOLTS  # noqa: E402
from shuffler.core import battery  # noqa: E402
from shuffler.pinmap import WIRES  # noqa: E402

schemdraw.use("svg")  # no matplotlib needed

#: the net name each signal's tag carries
NET = {"touch": "TOUCH", "motor": "MOTOR_FWD", "motor_backward": "MOTOR_REV",
       "diverter": "DIVERTER", "beam": "BEAM", "tray": "TRAY", "pile_left": "PILE_L",
       "pile_right": "PILE_R", "led_red": "LED_R", "led_green": "LED_G", "led_blue": "LED_B",
       "buzzer": "BUZZER", "SPI CE0": "SPI_CE0", "SPI MISO": "SPI_MISO",
       "SPI MOSI": "SPI_MOSI", "SPI SCLK": "SPI_SCLK", "battery": "BATTERY"}
LED_OHMS = {"led_red": 330, "led_green": 68, "led_blue": 100}


def ohms(value: float) -> str:
    return f"{value / 1000:g} kΩ" if value >= 1000 else f"{value:g} Ω"


def net(d: schemdraw.Drawing, at, name: str, side: str = "right", length: float = 0.6):
    """A short wire from ``at`` ending in the net tag ``name`` (the same name is at the
    other end of the connection)."""
    line = elm.Line().at(at).length(length)
    d.add(line.right() if side == "right" else line.left())
    t = elm.Tag(width=0.17 * len(name) + 0.8).at(line.end).label(name, fontsize=10)
    d.add(t.right() if side == "right" else t.left())


class Host(NamedTuple):
    """What the parts are wired to: the Pi's header, or the Nano's."""

    name: str  # "Pi" or "Nano"
    logic: str  # the rail the sensors and the logic run from
    host5: str  # the host's own 5 V, for the buzzer
    pins: dict[str, str]  # role -> the pin name a tag carries
    led_ohms: dict[str, int]  # each colour's series resistor


PI = Host("Pi", "3V3", "5V_PI", {role: f"GPIO{w.bcm}" for role, w in WIRES.items()},
          LED_OHMS)
NANO = Host("Nano", "5V", "5V", {role: nano for role, (nano, _) in pinmap.NANO_PINS.items()},
            dict.fromkeys(LED_OHMS, 330))
HOST = PI  # the build being drawn


def sig(role: str) -> str:
    """A signal's tag at the part: net name and the host's pin name (the header pin is
    written once, at the header)."""
    return f"{NET[role]} · {HOST.pins[role]}"


def rail(d: schemdraw.Drawing, at, name: str):
    d.add(elm.Vdd().at(at).label(name, fontsize=10))


def ground(d: schemdraw.Drawing, at):
    d.add(elm.Ground().at(at))


def note(d: schemdraw.Drawing, xy, text: str):
    d.add(elm.Label().at(xy).label(text, fontsize=9, halign="left", valign="top",
                                    color="#333"))


#: points per drawing unit (schemdraw's SVG: 72 pt an inch, half an inch a unit), and a sans
#: font's widest average character, as a share of its size (wider than schemdraw's estimate,
#: which lets long lines run past the drawing's edge)
PT_PER_UNIT, CHAR_EM, LINE_EM = 36.0, 0.58, 0.95


def framed(d: schemdraw.Drawing, xy, text: str, fontsize: float = 10, pad: float = 0.4):
    """``text`` at ``xy`` (its top left) inside a frame sized from the text itself, so the
    drawing's edge is beyond the longest line."""
    lines = text.split("\n")
    width = max(map(len, lines)) * fontsize * CHAR_EM / PT_PER_UNIT
    height = len(lines) * fontsize * LINE_EM / PT_PER_UNIT
    x, y = xy
    d.add(elm.Rect(corner1=(x - pad, y + pad), corner2=(x + width + pad, y - height - pad),
                   lw=1))
    d.add(elm.Label().at(xy).label(text, fontsize=fontsize, halign="left", valign="top"))
    return y - height - pad


def ic(pins: list[tuple[str, str, str | None]], label: str, w: float, h: float,
       spacing: float = 0.8) -> elm.Ic:
    """An IC box; ``pins`` as (side, name, pin number), listed top to bottom and left to
    right (schemdraw lists left and right sides bottom up)."""
    made = []
    for side in "LRTB":
        these = [p for p in pins if p[0] == side]
        if side in "LR":
            these.reverse()
        made += [elm.IcPin(name=n, pin=num, side=side, anchorname=anchor_name(n))
                 for _, n, num in these]
    box = elm.Ic(size=(w, h), pins=made).theta(0).label(label, fontsize=10)
    for side in "LR":
        box.side(side, spacing=spacing, pad=0.5, pinlabel_size=10)
    for side in "TB":
        box.side(side, spacing=1.6, pad=0.6, pinlabel_size=9)
    return box


def anchor_name(pin_name: str) -> str:
    special = {"+": "plus", "−": "minus", "V+": "vplus"}
    return special.get(pin_name) or re.sub(r"\W", "_", pin_name.split(" ")[0]).lower()


def pi_header(d: schemdraw.Drawing):
    pins = [("L", "3V3 (pin 1, 17)", None), ("L", "5V (pin 2, 4)", None),
            ("L", "GND (pin 6, 9, 14, 20, 25, 30, 34, 39)", None)]
    pins += [("R", w.label, None) for w in WIRES.values()]
    box = ic(pins, "J4\nRaspberry Pi\n40-pin header", w=12, h=13, spacing=0.8)
    d.add(box.at((0, 0)).anchor("3v3"))
    for w in WIRES.values():
        net(d, box.absanchors[anchor_name(w.label)], NET[w.role])
    net(d, box.absanchors["3v3"], "3V3", side="left")
    net(d, box.absanchors["5v"], "5V_PI", side="left")
    d.add(elm.Line().at(box.absanchors["gnd"]).left(0.6))
    ground(d, d.here)
    lowest = min(p[1] for p in box.absanchors.values())
    note(d, (box.absanchors["gnd"][0] - 1, lowest - 1.2),
         "J4: the Pi's 40-pin header (female header or HAT). The Pi runs from its own\n"
         "USB supply (USB-C on a Pi 4 or 5, micro-USB on a Zero 2 W or 3B+). Nothing\n"
         "else feeds its 5 V pins; 5V_PI powers only the buzzer. A GPIO sources or\n"
         "sinks 16 mA at most (50 mA for all together): drive nothing but logic and\n"
         "the LED's 8 mA from it.")


def test_point(d: schemdraw.Drawing, at, name: str, side: str = "up"):
    """A test point: a short stub (from a junction dot on the wire) ending in a named ring
    the meter's probe touches."""
    d.add(elm.Dot().at(at))
    stub = elm.Line().at(at).length(0.5)
    d.add(stub.up() if side == "up" else stub.down())
    d.add(elm.Dot(open=True).label(name, fontsize=9, loc="right"))


def power(d: schemdraw.Drawing):
    bat = elm.Battery().at((0, 0)).up().label("BT1 9 V block\nalkaline,\nlithium or NiMH\n"
                                              "on J1 (snap)", loc="bottom", fontsize=9)
    d.add(bat)
    ground(d, bat.start)
    d.add(elm.Line().at(bat.end).up(0.5))
    fuse = elm.Fuse().right().label("F1 0.75 A\nPTC", fontsize=9)
    d.add(fuse)
    q3 = ic([("L", "D", None), ("R", "S", None), ("B", "G", None)],
            "Q3 AO3401A\nP-MOSFET\nSOT-23: 1 G\n2 S, 3 D", w=3.6, h=3.0)
    d.add(elm.Line().right(0.4))
    d.add(q3.at(d.here).anchor("d"))
    d.add(elm.Line().at(q3.absanchors["g"]).down(0.3))
    rg = elm.Resistor().down().length(2).label("R14\n10 kΩ", loc="bottom", fontsize=9)
    d.add(rg)
    ground(d, rg.end)
    d.add(elm.Line().at(q3.absanchors["s"]).right(0.4))
    sw = elm.Switch().right().label("SW1 power\n≥ 1 A DC", fontsize=9)
    d.add(sw)
    d.add(elm.Dot())
    node = sw.end
    d.add(elm.Line().at(node).right(2.5))
    d.add(elm.Dot())
    vm = d.here
    test_point(d, vm, "TP1")
    net(d, vm, "9V", length=1.0)
    cap = elm.Capacitor(polar=True).at(vm).down().label("C1 100 µF 16 V\nbulk, at\n"
                                                       "U1's VIN", loc="bottom", fontsize=9)
    d.add(cap)
    ground(d, cap.end)
    d.add(elm.Line().at(cap.end).right(1.4))
    test_point(d, d.here, "TP5", side="down")
    buck = ic([("L", "VIN", None), ("B", "GND", None), ("R", "VOUT", None)],
              "U5 buck", w=4.4, h=2.2)
    d.add(buck.at((node[0] + 1.2, node[1] - 6.0)).anchor("vin"))
    d.add(elm.Line().at(buck.absanchors["vin"]).left(1.2))
    d.add(elm.Line().up().toy(node))
    d.add(elm.Line().at(buck.absanchors["gnd"]).down(0.3))
    ground(d, d.here)
    d.add(elm.Line().at(buck.absanchors["vout"]).right(1.2))
    d.add(elm.Dot())
    out = d.here
    test_point(d, out, "TP2")
    net(d, out, "5V_MECH", length=1.2)
    c2 = elm.Capacitor(polar=True).at(out).down().label("C2 100 µF\nat the servo", loc="bottom",
                                                       fontsize=9)
    d.add(c2)
    ground(d, c2.end)
    note(d, (-1, out[1] - 3.6), "U5: 5 V buck, Pololu D24V5F5 (500 mA). F1 trips on a short;\n"
         "Q3 conducts only with the block the right way round (a snap touched\n"
         "on backwards is blocked): together they cost about 0.13 V at 0.4 A.\n"
         f"One ground: the mechanism's GND joins the {HOST.name}'s GND once, at "
         f"{'header pin 6' if HOST is PI else 'a GND pin'}\n"
         f"(TP5). 9V and 5V_MECH never reach the {HOST.name}'s 5 V pins.")


def d4_pins(d: schemdraw.Drawing, common, rail_end, ground_end):
    """D4's SOT-23 pin numbers beside its two diodes: 3 the common node (CH0, after R10),
    2 the rail's cathode, 1 the ground's anode (BAT54S: 1 A1, 2 K2, 3 K1/A2)."""
    for (x, y), pin, dx, dy in ((common, "3", -0.25, 0.3), (rail_end, "2", -0.25, -0.35),
                                (ground_end, "1", 0.25, 0.35)):
        d.add(elm.Label().at((x + dx, y + dy)).label(
            pin, fontsize=8, halign="right" if dx < 0 else "left", color="#333"))


def sot23_pinout(d: schemdraw.Drawing, xy, rail_name: str, adc_in: str) -> None:
    """D4's package as it sits on the board, top view, and where each pin goes: the drawing
    the first power-on's rail check refers to (a mirrored footprint swaps 1 and 2)."""
    x, y = xy
    d.add(elm.Rect(corner1=(x, y), corner2=(x + 2.0, y - 1.0), lw=1.5).at((0, 0)))
    d.add(elm.Label().at((x + 1.0, y - 0.5)).label("marking", fontsize=8, color="#333"))
    for px, py, dy, pin, to in ((x + 1.0, y, 0.5, "3", f"k1, a2: {adc_in} (after R10)"),
                                (x + 0.4, y - 1.0, -0.5, "1", "a1: GND"),
                                (x + 1.6, y - 1.0, -0.5, "2", f"k2: {rail_name}")):
        # a leg of the package, not a wire: drawn as a thin outline
        d.add(elm.Rect(corner1=(px - 0.06, py), corner2=(px + 0.06, py + dy), lw=1.5)
              .at((0, 0)))
        d.add(elm.Label().at((px + 0.12, py + dy / 2)).label(pin, fontsize=8, halign="left"))
        d.add(elm.Label().at((px, py + dy * 1.7)).label(to, fontsize=8))
    note(d, (x - 0.6, y - 2.3),
         "D4 BAT54S (SOT-23), top view: the marking code (L44, KL4 or LD3,\n"
         "by maker) upright, pin 3 alone on one side. Mirrored (1 and 2\n"
         f"swapped) its diodes short {rail_name}: the first power-on finds it.")


def divider_and_adc(d: schemdraw.Drawing):
    ratio = pinmap.divider_ratio()
    low, high = pinmap.divider_ratio_range()
    tol = pinmap.DIVIDER_TOLERANCE * 100
    rail(d, (0, 0), "9V")
    rt = elm.Resistor().at((0, 0)).down().label(
        f"R1 {ohms(pinmap.DIVIDER_TOP)} ±{tol:g}%", loc="bottom", fontsize=9)
    d.add(rt)
    d.add(elm.Dot())
    tap = rt.end
    rb = elm.Resistor().at(tap).down().label(
        f"R2 {ohms(pinmap.DIVIDER_BOTTOM)} ±{tol:g}%", loc="bottom", fontsize=9)
    d.add(rb)
    ground(d, rb.end)
    d.add(elm.Line().at(tap).left(2))
    c = elm.Capacitor().down().label(f"C3 {pinmap.DIVIDER_CAP_NF} nF", loc="top", fontsize=9)
    d.add(c)
    ground(d, c.end)
    series = elm.Resistor().at(tap).right().length(2.4).label("R10 1 kΩ", fontsize=9)
    d.add(series)
    d.add(elm.Dot())
    clamp = series.end
    upper = elm.Diode().at(clamp).up().length(1.6).label("D4\nBAT54S", loc="bottom",
                                                         fontsize=9)
    d.add(upper)
    rail(d, upper.end, HOST.logic)
    lower = elm.Diode().at(clamp).down().reverse().length(1.6)
    d.add(lower)
    ground(d, lower.end)
    d4_pins(d, clamp, upper.end, lower.end)
    pins = [("L" if n <= 8 else "R", name, str(n)) for n, (name, _) in pinmap.MCP3008_PINS.items()]
    left = sorted((p for p in pins if p[0] == "L"), key=lambda p: int(p[2]))
    right = sorted((p for p in pins if p[0] == "R"), key=lambda p: -int(p[2]))
    adc = ic(left + right, "U2\nMCP3008", w=4.4, h=6.4, spacing=0.8)
    d.add(elm.Line().at(clamp).right(2.6))
    d.add(adc.at(d.here).anchor("ch0"))
    test_point(d, (tap[0] - 0.9, tap[1]), "TP3", side="up")
    d.add(elm.Label().at((tap[0] - 0.2, tap[1] + 1.4)).label(
        f"9.6 V → {9.6 / ratio:.2f} V", fontsize=9, halign="right", valign="bottom"))
    unused = [adc.absanchors[anchor_name(pinmap.MCP3008_PINS[n][0])] for n in range(2, 9)]
    for i, at in enumerate(unused):
        d.add(elm.Line().at(at).left(0.5))
        if i:
            d.add(elm.Dot())  # joins the bus to GND mid-way
    top, bottom = unused[0], unused[-1]
    d.add(elm.Line().at((top[0] - 0.5, top[1])).toy(bottom[1] - 0.6))
    ground(d, d.here)
    for number, (name, to) in pinmap.MCP3008_PINS.items():
        at = adc.absanchors[anchor_name(name)]
        if number <= 8:
            continue
        if to == "GND":
            d.add(elm.Line().at(at).right(0.6))
            ground(d, d.here)
        elif name == "VDD":
            d.add(elm.Line().at(at).right(0.8))
            d.add(elm.Dot())
            node = d.here
            rail(d, node, "3V3")
            d.add(elm.Line().at(node).right(0.9))
            tp4 = d.here
            test_point(d, tp4, "TP4")
            d.add(elm.Line().at(tp4).right(0.7))
            dec = elm.Capacitor().right().label("C5 100 nF", loc="top", fontsize=9)
            d.add(dec)
            ground(d, dec.end)
        elif name == "VREF":
            d.add(elm.Line().at(at).right(0.8))
            d.add(elm.Line().up(0.8))
        else:
            role = next(w.role for w in WIRES.values() if w.label == to)
            net(d, at, sig(role))
    vm = limits.DRIVER_VM_MAX_VOLTS
    note(d, (-3, tap[1] - 7.0),
         f"U2: MCP3008 (DIP-16). Battery volts = CH0 volts × {ratio:.3f} ([gpio]\n"
         f"divider_ratio). With ±{tol:g}% resistors the ratio lies between {low:.2f} and\n"
         f"{high:.2f}: `shuffler selftest` calibrates it against a multimeter. CH0 sees\n"
         f"at most {vm / ratio:.2f} V from {vm:g} V (the driver's limit). R10 and D4 hold a\n"
         "slipped 9 V wire on the tap to a few mA into 3V3; C5 decouples VDD; the\n"
         "unused inputs CH1–CH7 are tied to GND.")
    sot23_pinout(d, (-1.4, tap[1] - 9.6), "3V3", "CH0")


def pulled_down(d: schemdraw.Drawing, at, ref: str, role: str, gap: float = 0.8):
    """A driver input at ``at``: a 10 kΩ pull-down to GND at the part, then the GPIO's tag."""
    d.add(elm.Line().at(at).left(gap))
    d.add(elm.Dot())
    node = d.here
    r = elm.Resistor().at(node).down().length(1.4).label(f"{ref}\n10 kΩ", loc="bottom",
                                                          fontsize=9)
    d.add(r)
    ground(d, r.end)
    net(d, node, sig(role), side="left", length=0.4)


def motor_driver(d: schemdraw.Drawing):
    box = ic([("L", "AIN1", None), ("L", "AIN2", None), ("L", "SLP", None),
              ("T", "VIN", None), ("B", "GND", None),
              ("R", "AOUT1", None), ("R", "AOUT2", None)], "U1\nDRV8833\nbreakout",
             w=4.4, h=7.2, spacing=2.6)
    d.add(box.at((0, 0)).anchor("ain1"))
    pulled_down(d, box.absanchors["ain1"], "R11", "motor")
    pulled_down(d, box.absanchors["ain2"], "R12", "motor_backward")
    d.add(elm.Line().at(box.absanchors["slp"]).left(0.8))
    r = elm.Resistor().left().label("R3 10 kΩ", fontsize=9)
    d.add(r)
    rail(d, r.end, HOST.logic)
    d.add(elm.Line().at(box.absanchors["vin"]).up(0.5))
    rail(d, d.here, "9V")
    d.add(elm.Line().at(box.absanchors["gnd"]).down(0.3))
    ground(d, d.here)
    d.add(elm.Line().at(box.absanchors["aout1"]).right(1.8).label("J2-1 red", fontsize=9))
    m = elm.Motor().down().toy(box.absanchors["aout2"]).label("M1 feed\nmotor 6 V", loc="bottom",
                                                              fontsize=9)
    d.add(m)
    d.add(elm.Line().left().tox(box.absanchors["aout2"]).label("J2-2 black", fontsize=9,
                                                               loc="bottom"))
    note(d, (-9.5, -9.4), "U1: DRV8833 breakout, Pololu #2130's labels (others may print VM\n"
         f"for VIN, nSLEEP or EEP for SLP). SLP is held high by R3 from the {HOST.name}'s\n"
         f"{HOST.logic}, so the driver sleeps whenever the {HOST.name} is off; if your board\n"
         f"pulls SLP up on its own (SLP reads the 9 V with the {HOST.name} unplugged), leave\n"
         f"R3 out. R11 and R12 keep AIN1/AIN2 low while the {HOST.name} boots or is off.\n"
         "BIN1, BIN2 and FLT are not connected. VIN "
         f"{limits.DRIVER_VM_MIN_VOLTS:g}–{limits.DRIVER_VM_MAX_VOLTS:g} V: never 12 V.")


def driven_from(d: schemdraw.Drawing, at, gap: float, series: str, pulldown: str, role: str):
    """A transistor's control input: a series resistor from the GPIO, a pull-down to GND."""
    d.add(elm.Line().at(at).left(gap))
    d.add(elm.Dot())
    node = d.here
    r = elm.Resistor().left().label(series, fontsize=9)
    d.add(r)
    net(d, r.end, sig(role), side="left", length=0.3)
    rpd = elm.Resistor().at(node).down().label(pulldown, loc="bottom", fontsize=9)
    d.add(rpd)
    ground(d, rpd.end)


def mosfet_option(d: schemdraw.Drawing):
    rail(d, (0, 0), "9V")
    d.add(elm.Dot().at((0, 0)))
    m = elm.Motor().at((0, 0)).down().label("M1", loc="top", fontsize=9)
    d.add(m)
    d.add(elm.Dot())
    drain = m.end
    d.add(elm.Line().at((0, 0)).right(1.8))
    d.add(elm.Diode().down().reverse().toy(drain).label("D1 1N5819\nflyback", loc="bottom",
                                                       fontsize=9))
    d.add(elm.Line().left().tox(drain))
    fet = elm.NFet(bulk=False).theta(0).reverse().anchor("drain").at(drain).label(
        "Q1 AO3400\n(or IRLZ44N)", loc="right", fontsize=9)
    d.add(fet)
    ground(d, fet.absanchors["source"])
    driven_from(d, fet.absanchors["gate"], 1.2, "R4 100 Ω", "R5 100 kΩ\ngate\npull-down",
                "motor")
    note(d, (-6, -8.2), "Used instead of the DRV8833 with [gpio] motor = \"pwm\":\n"
         "forward only, so a jam cannot be backed out. R5 holds the\n"
         "motor off while the Pi boots; D1 takes the motor's kick.")


def servo_and_beam(d: schemdraw.Drawing):
    servo = ic([("L", "SIG", None), ("T", "V+", None), ("B", "GND", None)],
               "M2 SG90\nservo", w=3.4, h=2.2)
    d.add(servo.at((0, 0)).anchor("sig"))
    pulled_down(d, servo.absanchors["sig"], "R13", "diverter", gap=1.0)
    d.add(elm.Line().at(servo.absanchors["vplus"]).up(0.4))
    rail(d, d.here, "5V_MECH")
    d.add(elm.Line().at(servo.absanchors["gnd"]).down(0.3))
    ground(d, d.here)
    ex = 5.5
    rail(d, (ex, 1.5), "5V_MECH")
    r = elm.Resistor().at((ex, 1.5)).down().label("R6 330 Ω", loc="bottom", fontsize=9)
    d.add(r)
    led = elm.LED().down().label("D2 IR emitter\n940 nm", loc="bottom", fontsize=9)
    d.add(led)
    ground(d, led.end)
    rx = ic([("L", "OUT", None), ("T", "VCC", None), ("B", "GND", None)],
            "U3 IR\nreceiver", w=3.8, h=2.8)
    d.add(rx.at((ex + 9.5, -1.2)).anchor("out"))
    d.add(elm.Line().at(rx.absanchors["vcc"]).up(0.4))
    rail(d, d.here, HOST.logic)
    d.add(elm.Line().at(rx.absanchors["gnd"]).down(0.3))
    ground(d, d.here)
    d.add(elm.Line().at(rx.absanchors["out"]).left(1.2))
    d.add(elm.Dot())
    node = d.here
    pu = elm.Resistor().at(node).up().label("R7 10 kΩ\npull-up", loc="bottom", fontsize=9)
    d.add(pu)
    rail(d, pu.end, HOST.logic)
    net(d, node, sig("beam"), side="left", length=0.3)
    note(d, (-4, -5.2), "J3, the servo's lead: 1 brown GND, 2 red V+, 3 orange SIG. R13 holds\n"
         f"SIG low while the {HOST.name} is off. U3: the IR beam receiver, low while blocked.\n"
         "D2 and U3 face each other across the card gate; the emitter runs from\n"
         f"the mechanism's 5 V, the receiver from {HOST.logic}.")


SENSOR_REFS = {"touch": "U4", "tray": "U6", "pile_left": "U7", "pile_right": "U8"}


def sensors(d: schemdraw.Drawing):
    for i, role in enumerate(("touch", "tray", "pile_left", "pile_right")):
        ref = SENSOR_REFS[role]
        name = f"{ref}\nTTP223" if role == "touch" else f"{ref}\nTCRT5000"
        out = "I/O" if role == "touch" else "DO"
        pins = [("R", "VCC", None), ("R", out, None), ("R", "GND", None)]
        if role != "touch":
            pins.append(("R", "AO", None))
        box = ic(pins, name, w=4.2, h=3.2)
        d.add(box.at(((i % 2) * 11.0, -(i // 2) * 5.5)).anchor("vcc"))
        d.add(elm.Line().at(box.absanchors["vcc"]).right(0.6))
        rail(d, d.here, HOST.logic)
        d.add(elm.Line().at(box.absanchors["gnd"]).right(0.6))
        ground(d, d.here)
        if role == "touch" and HOST is NANO:  # D3 floats with the module out: R18 holds it
            d.add(elm.Line().at(box.absanchors[anchor_name(out)]).right(0.8))
            d.add(elm.Dot())
            node = d.here
            pd = elm.Resistor().at(node).down().length(1.6).label("R18\n100 kΩ", loc="bottom",
                                                                  fontsize=9)
            d.add(pd)
            ground(d, pd.end)
            net(d, node, sig(role), length=0.8)
        else:
            net(d, box.absanchors[anchor_name(out)], sig(role), length=1.6)
    note(d, (-1, -10.0), "U6 tray, U7 left pile, U8 right pile: TCRT5000 modules, DO low while\n"
         f"a card covers them (the module's own 10 kΩ pull-up to its VCC, {HOST.logic});\n"
         "AO not connected. U4: TTP223 touch module, I/O high while touched"
         + ("." if HOST is PI else ";\nR18 holds D3 low while the module is out or unpowered."))


def led_and_buzzer(d: schemdraw.Drawing):
    for i, role in enumerate(("led_red", "led_green", "led_blue")):
        y = -i * 1.5
        ref = {"led_red": "R15", "led_green": "R16", "led_blue": "R17"}[role]
        r = elm.Resistor().at((0, y)).right().label(f"{ref} {ohms(HOST.led_ohms[role])}",
                                                    fontsize=9, loc="bottom")
        d.add(r)
        net(d, (0, y), sig(role), side="left", length=0.4)
        d.add(elm.Line().at(r.end).right(0.6))
        led = elm.LED().right().label(f"D5 {role.split('_')[1]}", fontsize=9, loc="bottom")
        d.add(led)
        d.add(elm.Line().right().tox(8))
        if i:
            d.add(elm.Line().up(1.5))
        else:
            d.add(elm.Dot())
    d.add(elm.Line().at((8, -3.0)).down(0.4))
    ground(d, d.here)
    note(d, (-6, -4.2), "D5: common-cathode RGB LED. A resistor per colour (red 330 Ω,\n"
         "green 68 Ω, blue 100 Ω) balances them, so amber (red + half green)\n"
         "looks amber, not red." if HOST is PI else "D5: common-cathode RGB LED, 330 Ω a "
         "colour: the firmware\nswitches each colour on or off (no amber).")
    bx = 21
    rail(d, (bx, 0.8), HOST.host5)
    d.add(elm.Dot().at((bx, 0.8)))
    bz = elm.RBox().at((bx, 0.8)).down().label("BZ1 active\nbuzzer", loc="bottom",
                                               fontsize=9)
    d.add(bz)
    d.add(elm.Dot())
    coll = bz.end
    d.add(elm.Line().at((bx, 0.8)).right(3.2))
    d.add(elm.Diode().down().reverse().toy(coll).label("D3 1N4148", loc="bottom", fontsize=9))
    d.add(elm.Line().left().tox(coll))
    q = elm.BjtNpn(circle=True).theta(0).anchor("collector").at(coll)
    q.label("Q2 2N3904", loc="right", fontsize=9)
    d.add(q)
    ground(d, q.absanchors["emitter"])
    driven_from(d, q.absanchors["base"], 0.5, "R8 1 kΩ", "R9 100 kΩ", "buzzer")


LIMITS = (
    "9 V side (BT1 to U1 VIN): {block:.1f}–{vm:g} V. The DRV8833's VM is {vmin:g}–{vm:g} V:\n"
    "never a 12 V supply, nor an 8-cell NiMH block off the charger (11+ V):\n"
    "passes and the self-test refuse a block reading over {over:g} V.\n"
    "U5 (D24V5F5) input: up to 36 V; its output 500 mA at most: servo + emitter.\n"
    "3V3 (Pi pins 1, 17): sensors, ADC and LED, about 70 mA; the Pi gives ~500 mA.\n"
    "5V_PI (Pi pins 2, 4): the buzzer only (30 mA). GPIO: 3.3 V logic only, 16 mA\n"
    "a pin, 50 mA for all; never 5 V on a GPIO.\n"
    "U1 DRV8833: 1.5 A RMS, 2 A peak a channel. M1: {motor:g} V rated, duty capped at\n"
    "{motor:g} / {fresh:g} = {duty:.2f} ([gpio] motor_volts); medium-power N20, stall\n"
    "~0.7 A at 6 V.\n"
    "F1: 0.75 A hold, 1.5 A trip. SW1: rated 1 A DC or more.\n"
    "MCP3008 inputs: 0 V to VREF ({vref:g} V); CH0 gets at most {ch0:.2f} V at {vm:g} V.\n"
    "Motor PWM ([gpio] motor_pwm_hz): lgpio 10 kHz at most, pigpio 8 kHz,\n"
    "drivers 50 kHz. Servo: {frame:g} ms frame; flap travel + {frame:g} ms < 1 / card_rate.")


LIMIT_FIGURES = {"block": limits.BLOCK_MIN_VOLTS, "vm": limits.DRIVER_VM_MAX_VOLTS,
                 "vmin": limits.DRIVER_VM_MIN_VOLTS, "over": limits.OVER_VOLTS,
                 "vref": limits.ADC_VREF_VOLTS, "frame": limits.SERVO_FRAME_S * 1000,
                 "nano_vref": limits.NANO_ADC_VREF_VOLTS}


def limits_box(d: schemdraw.Drawing):
    fresh = FRESH_VOLTS["alkaline"]
    text = LIMITS.format(motor=pinmap.MOTOR_RATED_VOLTS, fresh=fresh, **LIMIT_FIGURES,
                         ch0=limits.DRIVER_VM_MAX_VOLTS / pinmap.divider_ratio(),
                         duty=pinmap.motor_duty_cap(pinmap.MOTOR_RATED_VOLTS, fresh))
    bottom = framed(d, (0, 0), text)
    framed(d, (0, bottom - 1.2), "Test points (first power-on, docs/hardware.md):\n" +
           "\n".join(f"{tp}: {where}:\n    {expect}" for tp, (where, expect, _) in
                     pinmap.TEST_POINTS.items()))


def nano_header(d: schemdraw.Drawing):
    pins = [("L", "5V (from USB)", None), ("L", "GND", None)]
    pins += [("R", f"{nano} ({port})", None) for role, (nano, port) in pinmap.NANO_PINS.items()
]
    box = ic(pins, "A1\nArduino\nNano", w=8, h=11, spacing=0.8)
    d.add(box.at((0, 0)).anchor("5v"))
    for role, (nano, port) in pinmap.NANO_PINS.items():
        net(d, box.absanchors[anchor_name(f"{nano} ({port})")], NET[role])
    net(d, box.absanchors["5v"], "5V", side="left")
    d.add(elm.Line().at(box.absanchors["gnd"]).left(0.6))
    ground(d, d.here)
    lowest = min(p[1] for p in box.absanchors.values())
    note(d, (box.absanchors["gnd"][0] - 1, lowest - 1.2),
         "A1: the Nano, on the host's USB (its 5 V feeds the sensors, the LED and\n"
         "the buzzer, 5 V logic throughout). The battery's tap reaches its ADC input\n"
         "A0 in the monitor block. A pin sources 20 mA at most. The motor's\n"
         "inputs and the servo's have pull-downs: the pins float while it resets.")


def nano_divider(d: schemdraw.Drawing):
    ratio = (pinmap.NANO_DIVIDER_TOP + pinmap.NANO_DIVIDER_BOTTOM) / pinmap.NANO_DIVIDER_BOTTOM
    rail(d, (0, 0), "9V")
    rt = elm.Resistor().at((0, 0)).down().label(f"R1 {ohms(pinmap.NANO_DIVIDER_TOP)} ±1%",
                                                loc="bottom", fontsize=9)
    d.add(rt)
    d.add(elm.Dot())
    tap = rt.end
    rb = elm.Resistor().at(tap).down().label(f"R2 {ohms(pinmap.NANO_DIVIDER_BOTTOM)} ±1%",
                                             loc="bottom", fontsize=9)
    d.add(rb)
    ground(d, rb.end)
    d.add(elm.Line().at(tap).left(2))
    c = elm.Capacitor().down().label("C3 100 nF", loc="top", fontsize=9)
    d.add(c)
    ground(d, c.end)
    test_point(d, (tap[0] - 0.9, tap[1]), "TP3", side="up")
    series = elm.Resistor().at(tap).right().length(2.4).label("R10 1 kΩ", fontsize=9)
    d.add(series)
    d.add(elm.Dot())
    clamp = series.end
    upper = elm.Diode().at(clamp).up().length(1.6).label("D4\nBAT54S", loc="bottom",
                                                         fontsize=9)
    d.add(upper)
    rail(d, upper.end, "5V")
    lower = elm.Diode().at(clamp).down().reverse().length(1.6)
    d.add(lower)
    ground(d, lower.end)
    d4_pins(d, clamp, upper.end, lower.end)
    net(d, clamp, sig("battery"), length=1.4)
    note(d, (-3, tap[1] - 4.6),
         "The ADC reads A0 against AVCC, the Nano's 5 V from USB (4.4–5.25 V): the\n"
         "firmware measures AVCC against the 1.1 V bandgap before every reading and\n"
         f"scales by it. Battery volts = A0 × {ratio:g} (the firmware's DIVIDER_NUM).\n"
         f"9.6 V gives {9.6 / ratio:.2f} V, {limits.DRIVER_VM_MAX_VOLTS:g} V "
         f"{limits.DRIVER_VM_MAX_VOLTS / ratio:.2f} V. After SW1, so it draws nothing\n"
         "when switched off (0.3 mA while on). R10 and D4 hold a slipped 9 V wire\n"
         "on the tap to a few mA into 5V.")
    sot23_pinout(d, (-1.4, tap[1] - 7.4), "5V", "A0")


NANO_LIMITS = (
    "As the Pi build's: the 9 V side {block:.1f}–{vm:g} V (the DRV8833; refused over\n"
    "{over:g} V), U5 500 mA, F1, Q3 and SW1 as drawn. The motor's duty: the firmware\n"
    "clamps it to the cap CONFIG sends (the host derives it from motor_volts and the\n"
    "battery). Nano: 5 V logic, 20 mA a pin; A0 0 V to AVCC ({nano_a0:.1f} V at {vm:g} V):\n"
    "each battery reading is scaled by AVCC, measured against the 1.1 V bandgap\n"
    "just before it (USB gives 4.4–5.25 V). The bandgap is 1.0–1.2 V: until the\n"
    "firmware is built with the chip's own (BANDGAP_MV), refused over {over_nano:.2f} V read.\n"
    "Motor PWM: the firmware's 976 Hz. Servo: {frame:g} ms frame; the firmware swings the\n"
    "flap 1.0 / 2.0 ms (±45° on an SG90), the Pi build ±30° (servo_angle).")


def nano_limits(d: schemdraw.Drawing):
    ratio = (pinmap.NANO_DIVIDER_TOP + pinmap.NANO_DIVIDER_BOTTOM) / pinmap.NANO_DIVIDER_BOTTOM
    text = NANO_LIMITS.format(**LIMIT_FIGURES, nano_a0=limits.DRIVER_VM_MAX_VOLTS / ratio,
                              over_nano=limits.OVER_VOLTS / limits.UNCALIBRATED_READS_LOW_BY)
    framed(d, (0, 0), text)


NANO_BLOCKS = (
    ("Arduino Nano: Arduino pin (AVR port pin)", nano_header),
    ("Mechanism power: as the Pi build", power),
    ("Battery monitor: the tap to A0", nano_divider),
    ("Feed motor: DRV8833 H-bridge", motor_driver),
    ("Diverter servo and card beam", servo_and_beam),
    ("Touch and presence sensors (5 V logic)", sensors),
    ("Status light and buzzer", led_and_buzzer),
    ("Limits", nano_limits),
)
NANO_ROWS = ((0, 1, 2), (3, 4), (5, 6, 7))


BLOCKS = (
    ("Raspberry Pi 40-pin header: BCM name (physical pin)", pi_header),
    ("Mechanism power: the 9 V block drives the mechanism only", power),
    ("Battery monitor: only the divider's tap reaches CH0", divider_and_adc),
    ("Feed motor: DRV8833 H-bridge (default; can reverse)", motor_driver),
    ("Option: one logic-level MOSFET instead", mosfet_option),
    ("Diverter servo and card beam", servo_and_beam),
    ("Touch and presence sensors (3V3 logic)", sensors),
    ("Status light and buzzer", led_and_buzzer),
    ("Limits: stay inside these", limits_box),
)
ROWS = ((0, 1, 2), (3, 4, 5), (6, 7, 8))


def draw(host: Host = PI) -> schemdraw.Drawing:
    """Each block of ``host``'s build drawn on its own, titled, then laid out in rows."""
    global HOST
    HOST = host
    blocks, rows = (BLOCKS, ROWS) if host is PI else (NANO_BLOCKS, NANO_ROWS)
    d = schemdraw.Drawing(show=False, fontsize=10)
    d.config(font="sans-serif")
    y = 0.0
    for row in rows:
        x, height = 0.0, 0.0
        for index in row:
            name, make = blocks[index]
            sub = schemdraw.Drawing(show=False, fontsize=10)
            make(sub)
            box = sub.get_bbox()
            sub.add(elm.Label().at((box.xmin, box.ymax + 1.0)).label(
                name, fontsize=14, halign="left", valign="bottom"))
            box = sub.get_bbox()
            d.add(elm.ElementDrawing(sub).at((x - box.xmin, y - box.ymax)))
            x += box.xmax - box.xmin + 2.5
            height = max(height, box.ymax - box.ymin)
        y -= height + 2.0
    HOST = PI
    return d


def replace_block(text: str, name: str, body: str) -> str:
    """Swap the generated block ``name`` of a Markdown file for ``body``."""
    start, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"docs/hardware.md: no {start} block")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", text)


def main() -> None:
    for host, name in ((PI, "schematic.svg"), (NANO, "schematic-nano.svg")):
        svg = draw(host).get_imagedata("svg")
        (HERE / name).write_bytes(svg if isinstance(svg, bytes) else svg.encode())
    md = HERE / "hardware.md"
    text = md.read_text(encoding="utf-8")
    text = replace_block(text, "wiring", pinmap.wiring_table())
    text = replace_block(text, "power budget", battery.budget_tables())
    text = replace_block(text, "modules", pinmap.modules_table())
    text = replace_block(text, "limits", pinmap.limits_table())
    text = replace_block(text, "first power-on", poweron.procedure_md(poweron.PI_BUILD))
    text = replace_block(text, "first power-on nano", poweron.procedure_md(poweron.NANO_BUILD))
    md.write_text(text, encoding="utf-8")
    print("wrote docs/schematic.svg, docs/schematic-nano.svg and the tables of "
          "docs/hardware.md")


if __name__ == "__main__":
    main()
