"""The documents a builder wires from agree with each other and with the code: every part
of the BOM is on the schematic and the other way round, each pin of the pin map is
written once at the header, the schematic's labels do not overlap, and the battery
figures the guide, the README and docs/hardware.md quote are the computed budget."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path

import pytest

from shuffler import pinmap
from shuffler.core import battery

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: a reference designator: R12, C5, Q3, SW1, BZ1, ... (test points are pads, not parts)
REF = re.compile(r"\b(?:R|C|D|Q|U|M|J|F|A|SW|BT|BZ)\d+\b")


def read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def svg() -> str:
    return read("docs/schematic.svg")


def svg_text() -> str:
    return re.sub(r"<[^>]+>", " ", svg()).replace("&amp;", "&")


NANO_SECTION = "## The microcontroller build"


def bom_refs(nano: bool = False) -> set[str]:
    """The references of the BOM's parts tables: the Pi build's, or the Nano build's."""
    bom = read("docs/bom.md")
    start = bom.index(NANO_SECTION)
    section = bom[start:bom.index("\n## ", start + 1)] if nano else bom[:start]
    refs, in_parts = set(), False
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 3:
            in_parts = False
            continue
        if cells[1] in ("ref", "qty"):  # a parts table, or the tools'
            in_parts = cells[1] == "ref"
            continue
        if in_parts and cells[1] != "—" and not set(cells[1]) <= {"-"}:
            found = REF.findall(cells[1])
            assert found, f"docs/bom.md: {cells[1]!r} is not a reference"
            refs |= set(found)
    return refs


def test_every_bom_part_is_on_the_schematic_and_the_other_way_round():
    drawn = set(REF.findall(svg_text()))
    listed = bom_refs()
    assert listed - drawn == set(), "in docs/bom.md, not on the schematic"
    assert drawn - listed == set(), "on the schematic, not in docs/bom.md"
    # the protection and the pull-downs the review asked for are among them
    assert {"F1", "Q3", "R10", "D4", "C5", "R11", "R12", "R13"} <= drawn


def nano_svg_text() -> str:
    """The Nano schematic's text without the Nano's pin names (D2 to D12, A0, A1), which
    read like diodes' references."""
    text = re.sub(r"<[^>]+>", " ", read("docs/schematic-nano.svg")).replace("&amp;", "&")
    text = re.sub(r"· [DA]\d+\b", "· pin", text)  # a tag: BEAM · D2
    text = re.sub(r"\b[DA]\d+ \(P[BCD]\d\)", "pin", text)  # the Nano's own: D2 (PD2)
    return re.sub(r"\bA0\b", "pin", text)  # the ADC input, in the notes


def test_the_nano_build_is_drawn_with_its_own_bom():
    text = nano_svg_text()
    drawn, listed = set(REF.findall(text)), bom_refs(nano=True)
    assert listed - drawn == set(), "in the BOM's Nano section, not on schematic-nano.svg"
    assert drawn - listed == set(), "on schematic-nano.svg, not in the BOM's Nano section"
    assert {"A1", "F1", "Q3", "SW1", "R10", "D4", "R11", "R12", "R13"} <= drawn
    raw = re.sub(r"<[^>]+>", " ", read("docs/schematic-nano.svg"))
    for nano, port in pinmap.NANO_PINS.values():
        assert raw.count(f"{nano} ({port})") == 1, nano  # once, at the Nano
    assert text_boxes(read("docs/schematic-nano.svg")) and not [
        (a[4], b[4]) for a, b in itertools.combinations(text_boxes(
            read("docs/schematic-nano.svg")), 2)
        if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]


def test_each_pin_of_the_pin_map_is_written_once_and_each_net_meets_its_other_end():
    text = svg_text()
    for wire in pinmap.WIRES.values():
        assert text.count(wire.label) == 1, wire.label  # at the header, once
        assert text.count(f"GPIO{wire.bcm} ") + text.count(f"GPIO{wire.bcm}\n") >= 1
    tags = re.findall(r"\b([A-Z][A-Z0-9_]+) · GPIO\d+", text)
    assert sorted(set(tags)) == sorted({t for t in tags})
    for net in tags:  # the part's end carries the net name; the header's end too
        assert len(re.findall(rf"\b{net}\b", text)) >= 2, net


def text_boxes(raw: str) -> list[tuple[float, float, float, float, str]]:
    """Each line of text on the schematic as a box (an estimate of a sans font's width)."""
    boxes = []
    for m in re.finditer(r'<text x="([-\d.]+)" y="([-\d.]+)"[^>]*font-size="([\d.]+)"'
                         r'[^>]*text-anchor="(\w+)">(.*?)</text>', raw):
        x, y, size, anchor = float(m[1]), float(m[2]), float(m[3]), m[4]
        for dy, line in re.findall(r'<tspan[^>]*dy="([-\d.]+)">(.*?)</tspan>', m[5]):
            y += float(dy)
            line = re.sub(r"&\w+;", "x", line)
            if line.strip():
                width = 0.55 * size * len(line)
                left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
                boxes.append((left, y - 0.45 * size, left + width, y + 0.45 * size, line))
    return boxes


def test_no_two_labels_on_the_schematic_overlap():
    boxes = text_boxes(svg())
    assert len(boxes) > 200
    clashes = [(a[4], b[4]) for a, b in itertools.combinations(boxes, 2)
               if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]
    assert clashes == []


def test_the_test_points_are_on_the_schematic_and_in_the_procedure():
    text, hardware = svg_text(), read("docs/hardware.md")
    procedure = hardware[hardware.index("## First power-on"):]
    for tp in pinmap.TEST_POINTS:
        assert tp in text and tp in procedure, tp


QUOTE = re.compile(r"\b(alkaline|lithium|NiMH) (?:block|one) (?:runs )?(?:about )?(\d+)"
                   r"(?: passes \((\d+) hands\))?")


@pytest.mark.parametrize("name", ["README.md", "docs/guide.md", "docs/hardware.md"])
def test_the_battery_figures_quoted_are_the_computed_budget(name):
    figures = battery.quoted_figures()
    text = " ".join(read(name).split())
    quotes = QUOTE.findall(text)
    assert any(chem == "alkaline" for chem, _, _ in quotes), f"{name} quotes no figure"
    for chem, passes, hands in quotes:
        key = chem.lower()
        assert int(passes) == figures[f"{key}_passes"], (name, chem, passes)
        if hands:
            assert int(hands) == figures[f"{key}_hands"], (name, chem, hands)
    assert "600 passes" not in text
    # at the default passes a hand, not four
    assert battery.EVENING_PASSES_PER_HAND == 5


def test_the_module_table_is_generated_from_the_pin_map():
    hardware = read("docs/hardware.md")
    m = re.search(r"<!-- generated: modules -->\n(.*)\n<!-- end generated: modules -->",
                  hardware, re.S)
    assert m and m.group(1) == pinmap.modules_table()
    for module in pinmap.MODULES:
        assert module.ref in svg_text(), module.ref


def test_the_limits_box_and_the_protection_are_where_the_builder_looks():
    hardware = read("docs/hardware.md")
    limits = hardware[hardware.index("## Limits"):hardware.index("## Protection")]
    for words in ("10.8 V", "500 mA", "16 mA", "1.5 A", "10 kHz", "motor_volts", "20 ms"):
        assert words in limits, words
        assert words in svg_text(), words
    protection = hardware[hardware.index("## Protection"):]
    for part in ("F1", "Q3", "R10", "D4", "C5", "R11", "R12", "R13", "0.03 V"):
        assert part in protection, part


def test_the_nano_schematic_is_what_the_generator_draws():
    pytest.importorskip("schemdraw", reason="pip install -e '.[docs]' draws the schematic")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_schematic", DOCS / "make_schematic.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    svg = module.draw(module.NANO).get_imagedata("svg")
    svg = svg.decode() if isinstance(svg, bytes) else svg
    assert svg == read("docs/schematic-nano.svg"), (
        "docs/schematic-nano.svg is stale: run python docs/make_schematic.py")


def generator():
    pytest.importorskip("schemdraw", reason="pip install -e '.[docs]' draws the schematic")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_schematic", DOCS / "make_schematic.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: pins drawn but deliberately left open (the TCRT5000 modules' analogue output)
OPEN_PINS = {"AO"}


def test_every_wire_meets_a_pin_or_another_wire():
    """Each end of every wire and two-terminal part lands on an IC pin, a transistor's
    terminal or another element's end (a wire that joins another mid-way ends on a dot);
    every IC pin but the open ones has something on it."""
    import schemdraw
    import schemdraw.elements as elm

    module = generator()

    def key(point) -> tuple[float, float]:
        return (round(point[0], 2), round(point[1], 2))

    loose = []
    for host, blocks in ((module.PI, module.BLOCKS), (module.NANO, module.NANO_BLOCKS)):
        module.HOST = host
        for title, make in blocks:
            d = schemdraw.Drawing(show=False)
            make(d)
            ends: Counter[tuple[float, float]] = Counter()
            wanted, pins = [], []
            for e in d.elements:
                anchors = e.absanchors
                if isinstance(e, elm.Ic):
                    pins += [(p.name, key(anchors[p.anchorname]))
                             for side in e.pins.values() for p in side]
                    continue
                if isinstance(e, elm.NFet | elm.BjtNpn):
                    ends.update(key(p) for p in anchors.values())
                    continue
                if isinstance(e, elm.Label):
                    continue
                ends.update(key(anchors[k]) for k in ("start", "end") if k in anchors)
                free = isinstance(e, elm.Tag | elm.Ground | elm.Vdd | elm.Dot)
                wanted += [(type(e).__name__, key(anchors[k])) for k in
                           (("start",) if free else ("start", "end")) if k in anchors]
            ends.update(at for _, at in pins)
            loose += [(host.name, title, what, at) for what, at in wanted
                      if ends[at] < 2]
            loose += [(host.name, title, f"pin {name}", at) for name, at in pins
                      if ends[at] < 2 and name not in OPEN_PINS]
        module.HOST = module.PI
    assert loose == []


def bom_rows() -> list[list[str]]:
    """Every parts row of docs/bom.md, both builds: its cells."""
    rows = []
    for line in read("docs/bom.md").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and REF.match(cells[0]) and "as above" not in cells[1]:
            rows.append(cells)
    return rows


def test_every_bom_part_has_a_part_number_and_every_resistor_its_rating_and_package():
    """What a builder orders from: a part number on every row, and each resistor's
    tolerance, wattage and package (none left to guess)."""
    rows = bom_rows()
    assert len(rows) > 30
    for ref, _qty, part, number, *_ in rows:
        assert number and number != "—", ref
        if re.match(r"R\d", ref):
            assert "1/4 W" in part and "axial" in part and re.search(r"±[15] %", part), ref
            assert re.search(r"Yageo (CFR-25JB-52|MFR-25FBF52)-\d+[RK]", number), ref
    # the clamp's pinout is given where it is bought, and the tools' meter is the one the
    # first power-on's bounds assume
    d4 = next(r for r in rows if r[0] == "D4")
    assert "pin 1 (anode) to GND" in d4[6] and "pin 2 (cathode) to 3V3" in d4[6]
    assert "diode test" in read("docs/bom.md") and "±(0.5 % + 2 digits)" in read("docs/bom.md")
