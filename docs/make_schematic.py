"""Draw docs/schematic.svg and write the generated tables of docs/hardware.md.

    python docs/make_schematic.py          # needs the docs extra: pip install -e '.[docs]'

Everything comes from shuffler.pinmap (pins, header numbers, divider) and
shuffler.battery (the power budget); tests/test_pinmap.py checks the outputs
agree with them. Wires between blocks are joined by name (a tag): every tag
name appears at both ends.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import schemdraw
import schemdraw.elements as elm

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from shuffler import battery, pinmap  # noqa: E402
from shuffler.pinmap import WIRES  # noqa: E402

schemdraw.use("svg")  # no matplotlib needed

#: the net name each signal's tag carries
NET = {"touch": "TOUCH", "motor": "MOTOR_FWD", "motor_backward": "MOTOR_REV",
       "diverter": "DIVERTER", "beam": "BEAM", "tray": "TRAY", "pile_left": "PILE_L",
       "pile_right": "PILE_R", "led_red": "LED_R", "led_green": "LED_G", "led_blue": "LED_B",
       "buzzer": "BUZZER", "SPI CE0": "SPI_CE0", "SPI MISO": "SPI_MISO",
       "SPI MOSI": "SPI_MOSI", "SPI SCLK": "SPI_SCLK"}
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


def sig(role: str) -> str:
    """A signal's tag: net name, BCM name and header pin."""
    return f"{NET[role]} · {WIRES[role].label}"


def rail(d: schemdraw.Drawing, at, name: str):
    d.add(elm.Vdd().at(at).label(name, fontsize=10))


def ground(d: schemdraw.Drawing, at):
    d.add(elm.Ground().at(at))


def note(d: schemdraw.Drawing, xy, text: str):
    d.add(elm.Label().at(xy).label(text, fontsize=9, halign="left", valign="top",
                                    color="#333"))


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
    box = ic(pins, "", w=9, h=13, spacing=0.8)
    d.add(box.at((0, 0)).anchor("3v3"))
    for w in WIRES.values():
        net(d, box.absanchors[anchor_name(w.label)], NET[w.role])
    net(d, box.absanchors["3v3"], "3V3", side="left")
    net(d, box.absanchors["5v"], "5V_PI", side="left")
    d.add(elm.Line().at(box.absanchors["gnd"]).left(0.6))
    ground(d, d.here)
    lowest = min(p[1] for p in box.absanchors.values())
    note(d, (box.absanchors["gnd"][0] - 1, lowest - 1.2),
         "The Pi runs from its own USB-C supply (a mains adapter or a power bank).\n"
         "Nothing else feeds its 5 V pins; 5V_PI powers only the buzzer.")


def power(d: schemdraw.Drawing):
    bat = elm.Battery().at((0, 0)).up().label("BT1 9 V block\nalkaline,\nlithium or NiMH",
                                              loc="bottom", fontsize=9)
    d.add(bat)
    ground(d, bat.start)
    d.add(elm.Line().at(bat.end).up(0.5))
    sw = elm.Switch().right().label("SW1 power", fontsize=9)
    d.add(sw)
    d.add(elm.Dot())
    node = sw.end
    d.add(elm.Line().at(node).right(2.5))
    d.add(elm.Dot())
    vm = d.here
    net(d, vm, "9V", length=1.0)
    cap = elm.Capacitor(polar=True).at(vm).down().label("C1 100 µF 16 V\nbulk, at the\n"
                                                       "DRV8833's VM", loc="bottom", fontsize=9)
    d.add(cap)
    ground(d, cap.end)
    buck = ic([("L", "VIN", None), ("B", "GND", None), ("R", "VOUT", None)],
              "5 V buck\nD24V5F5", w=3.2, h=2.2)
    d.add(buck.at((node[0] + 1.2, node[1] - 4.5)).anchor("vin"))
    d.add(elm.Line().at(buck.absanchors["vin"]).left(1.2))
    d.add(elm.Line().up().toy(node))
    d.add(elm.Line().at(buck.absanchors["gnd"]).down(0.3))
    ground(d, d.here)
    d.add(elm.Line().at(buck.absanchors["vout"]).right(1.2))
    d.add(elm.Dot())
    out = d.here
    net(d, out, "5V_MECH", length=1.2)
    c2 = elm.Capacitor(polar=True).at(out).down().label("C2 100 µF\nat the servo", loc="bottom",
                                                       fontsize=9)
    d.add(c2)
    ground(d, c2.end)
    note(d, (-1, out[1] - 3.4), "One ground: the mechanism's GND joins the Pi's GND once,\n"
         "at header pin 6. 9V and 5V_MECH never reach the Pi's 5 V pins.")


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
    pins = [("L" if n <= 8 else "R", name, str(n)) for n, (name, _) in pinmap.MCP3008_PINS.items()]
    left = sorted((p for p in pins if p[0] == "L"), key=lambda p: int(p[2]))
    right = sorted((p for p in pins if p[0] == "R"), key=lambda p: -int(p[2]))
    adc = ic(left + right, "MCP3008", w=4.0, h=6.4, spacing=0.8)
    d.add(elm.Line().at(tap).right(3))
    d.add(adc.at(d.here).anchor("ch0"))
    d.add(elm.Label().at((tap[0] + 0.3, tap[1] + 0.2)).label(
        f"tap: 9.6 V → {9.6 / ratio:.2f} V", fontsize=9, halign="left", valign="bottom"))
    for number, (name, to) in pinmap.MCP3008_PINS.items():
        at = adc.absanchors[anchor_name(name)]
        if number in range(2, 9):
            d.add(elm.Line().at(at).left(0.3))
            d.add(elm.Label().label("nc", fontsize=8, loc="left", halign="right"))
        elif to == "GND":
            d.add(elm.Line().at(at).right(0.6))
            ground(d, d.here)
        elif to == "3V3":
            d.add(elm.Line().at(at).right(0.6))
            rail(d, d.here, "3V3")
        elif number > 8:
            role = next(w.role for w in WIRES.values() if w.label == to)
            net(d, at, sig(role))
    note(d, (-3, tap[1] - 7.0),
         f"Battery volts = CH0 volts × {ratio:.3f} ([gpio] divider_ratio).\n"
         f"With ±{tol:g}% resistors the ratio lies between {low:.2f} and {high:.2f}:\n"
         "`shuffler selftest` calibrates it against a multimeter.\n"
         f"CH0 sees at most {10 / ratio:.2f} V from a 10 V block, never 9 V.")


def motor_driver(d: schemdraw.Drawing):
    box = ic([("L", "nSLEEP", "1"), ("L", "AIN1", "16"), ("L", "AIN2", "15"),
              ("T", "VM", "12"), ("B", "GND", "13"), ("B", "AISEN", "3"),
              ("R", "AOUT1", "2"), ("R", "AOUT2", "4")], "DRV8833", w=4.4, h=3.2,
             spacing=0.9)
    d.add(box.at((0, 0)).anchor("ain1"))
    net(d, box.absanchors["ain1"], sig("motor"), side="left")
    net(d, box.absanchors["ain2"], sig("motor_backward"), side="left")
    d.add(elm.Line().at(box.absanchors["nsleep"]).left(0.6))
    r = elm.Resistor().left().label("R3 10 kΩ", fontsize=9)
    d.add(r)
    rail(d, r.end, "3V3")
    d.add(elm.Line().at(box.absanchors["vm"]).up(0.5))
    rail(d, d.here, "9V")
    for pin in ("gnd", "aisen"):
        d.add(elm.Line().at(box.absanchors[pin]).down(0.3))
        ground(d, d.here)
    d.add(elm.Line().at(box.absanchors["aout1"]).right(1.2))
    m = elm.Motor().down().toy(box.absanchors["aout2"]).label("M1 feed\nmotor", loc="bottom",
                                                              fontsize=9)
    d.add(m)
    d.add(elm.Line().left().tox(box.absanchors["aout2"]))
    note(d, (-7.5, -3.6), "nSLEEP is held high by R3 from the Pi's 3V3, so the driver sleeps\n"
         "whenever the Pi is off. AIN1/AIN2 have internal pull-downs: a floating\n"
         "input is off. C1 (power block) is the VM bulk capacitor; the breakout\n"
         "carries the VINT and VCP capacitors. Pin numbers: HTSSOP-16 chip.")


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
               "SG90 servo", w=3.4, h=2.2)
    d.add(servo.at((0, 0)).anchor("sig"))
    net(d, servo.absanchors["sig"], sig("diverter"), side="left")
    d.add(elm.Line().at(servo.absanchors["vplus"]).up(0.4))
    rail(d, d.here, "5V_MECH")
    d.add(elm.Line().at(servo.absanchors["gnd"]).down(0.3))
    ground(d, d.here)
    ex = 4.5
    rail(d, (ex, 1.5), "5V_MECH")
    r = elm.Resistor().at((ex, 1.5)).down().label("R6 330 Ω", loc="bottom", fontsize=9)
    d.add(r)
    led = elm.LED().down().label("D2 IR emitter\n940 nm", loc="bottom", fontsize=9)
    d.add(led)
    ground(d, led.end)
    rx = ic([("L", "OUT", None), ("T", "VCC", None), ("B", "GND", None)],
            "IR receiver\n(low while\nblocked)", w=3.6, h=2.8)
    d.add(rx.at((ex + 9.5, -1.2)).anchor("out"))
    d.add(elm.Line().at(rx.absanchors["vcc"]).up(0.4))
    rail(d, d.here, "3V3")
    d.add(elm.Line().at(rx.absanchors["gnd"]).down(0.3))
    ground(d, d.here)
    d.add(elm.Line().at(rx.absanchors["out"]).left(1.2))
    d.add(elm.Dot())
    node = d.here
    pu = elm.Resistor().at(node).up().label("R7 10 kΩ\npull-up", loc="bottom", fontsize=9)
    d.add(pu)
    rail(d, pu.end, "3V3")
    net(d, node, sig("beam"), side="left", length=0.3)
    note(d, (-4, -4.6), "Emitter and receiver face each other across the card gate;\n"
         "the emitter runs from the mechanism's 5 V, the receiver from 3V3.")


def sensors(d: schemdraw.Drawing):
    for i, role in enumerate(("touch", "tray", "pile_left", "pile_right")):
        name = "TTP223\ntouch" if role == "touch" else f"TCRT5000\n{role.replace('_', ' ')}"
        out = "OUT" if role == "touch" else "D0"
        box = ic([("R", "VCC", None), ("R", out, None), ("R", "GND", None)], name,
                 w=2.6, h=2.4)
        d.add(box.at(((i % 2) * 11.0, -(i // 2) * 4.5)).anchor("vcc"))
        d.add(elm.Line().at(box.absanchors["vcc"]).right(0.6))
        rail(d, d.here, "3V3")
        d.add(elm.Line().at(box.absanchors["gnd"]).right(0.6))
        ground(d, d.here)
        net(d, box.absanchors[anchor_name(out)], sig(role), length=1.6)
    note(d, (-1, -8.4), "Tray and pile modules: D0 low while a card covers them (the\n"
         "module's own 10 kΩ pull-up to its VCC, 3V3). Touch: OUT high while touched.")


def led_and_buzzer(d: schemdraw.Drawing):
    for i, role in enumerate(("led_red", "led_green", "led_blue")):
        y = -i * 1.5
        r = elm.Resistor().at((0, y)).right().label(ohms(LED_OHMS[role]), fontsize=9,
                                                    loc="bottom")
        d.add(r)
        net(d, (0, y), sig(role), side="left", length=0.2)
        d.add(elm.Line().right(1.0))
        led = elm.LED().right().label(role.split("_")[1], fontsize=9, loc="bottom")
        d.add(led)
        d.add(elm.Line().right().tox(7))
        if i:
            d.add(elm.Line().up(1.5))
        else:
            d.add(elm.Dot())
    d.add(elm.Line().at((7, -3.0)).down(0.4))
    ground(d, d.here)
    note(d, (-6, -4.2), "Common-cathode RGB LED. A resistor per colour (red 330 Ω,\n"
         "green 68 Ω, blue 100 Ω) balances them, so amber (red + half green)\n"
         "looks amber, not red.")
    bx = 21
    rail(d, (bx, 0.8), "5V_PI")
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


BLOCKS = (
    ("Raspberry Pi 40-pin header: BCM name (physical pin)", pi_header),
    ("Mechanism power: the 9 V block drives the mechanism only", power),
    ("Battery monitor: only the divider's tap reaches CH0", divider_and_adc),
    ("Feed motor: DRV8833 H-bridge (default; can reverse)", motor_driver),
    ("Option: one logic-level MOSFET instead", mosfet_option),
    ("Diverter servo and card beam", servo_and_beam),
    ("Touch and presence sensors (3V3 logic)", sensors),
    ("Status light and buzzer", led_and_buzzer),
)
ROWS = ((0, 1, 2), (3, 4, 5), (6, 7))


def draw() -> schemdraw.Drawing:
    """Each block drawn on its own, titled, then laid out in rows."""
    d = schemdraw.Drawing(show=False, fontsize=10)
    d.config(font="sans-serif")
    y = 0.0
    for row in ROWS:
        x, height = 0.0, 0.0
        for index in row:
            name, make = BLOCKS[index]
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
    return d


def replace_block(text: str, name: str, body: str) -> str:
    """Swap the generated block ``name`` of a Markdown file for ``body``."""
    start, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"docs/hardware.md: no {start} block")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", text)


def main() -> None:
    svg = draw().get_imagedata("svg")
    (HERE / "schematic.svg").write_bytes(svg if isinstance(svg, bytes) else svg.encode())
    md = HERE / "hardware.md"
    text = md.read_text(encoding="utf-8")
    text = replace_block(text, "wiring", pinmap.wiring_table())
    text = replace_block(text, "power budget", battery.budget_tables())
    md.write_text(text, encoding="utf-8")
    print("wrote docs/schematic.svg and the tables of docs/hardware.md")


if __name__ == "__main__":
    main()
