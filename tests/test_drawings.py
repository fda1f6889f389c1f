"""Every drawing in docs/ rendered in a real browser (headless Chromium): no line of text
may extend past the drawing's edge, where a viewer cuts it mid-word; no two texts overlap
as rendered, and no wire runs through a text (a label a wire crosses reads as joined to it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import needs_browser, phone_browser

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parent.parent / "docs"
SVGS = sorted(p.name for p in DOCS.glob("*.svg"))

#: each <text> whose rendered box leaves the root <svg>'s box, by how much on each side
OUTSIDE = """
const svg = document.documentElement, box = svg.getBoundingClientRect();
return [...svg.querySelectorAll('text')].map((t) => {
  const r = t.getBoundingClientRect();
  return [t.textContent.slice(0, 60), box.left - r.left, box.top - r.top, r.right - box.right,
          r.bottom - box.bottom];
}).filter((x) => Math.max(x[1], x[2], x[3], x[4]) > 0.5);
"""


@needs_browser
def test_every_text_lies_inside_its_drawing():
    assert {"schematic.svg", "schematic-nano.svg", "firmware-wiring.svg"} <= set(SVGS)
    with phone_browser() as driver:
        found = {}
        for name in SVGS:
            driver.get((DOCS / name).as_uri())
            assert driver.execute_script("return document.querySelectorAll('text').length")
            if outside := driver.execute_script(OUTSIDE):
                found[name] = outside
    assert found == {}


@needs_browser
def test_the_check_sees_a_line_past_the_edge(tmp_path):
    svg = tmp_path / "wide.svg"
    svg.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="100" height="40">'
                   '<text x="10" y="20" font-size="12">a line far too long for it</text></svg>')
    with phone_browser() as driver:
        driver.get(svg.as_uri())
        assert len(driver.execute_script(OUTSIDE)) == 1




def test_the_nano_overview_says_it_is_not_a_wiring_diagram():
    svg = (DOCS / "firmware-wiring.svg").read_text(encoding="utf-8")
    assert "An overview, not a wiring diagram" in svg and "schematic-nano.svg" in svg
    assert "an overview, not a wiring diagram" in (DOCS / "firmware.md").read_text(
        encoding="utf-8")


#: each pair of texts whose rendered boxes overlap, and each text a drawn line runs through
#: (the line sampled every half point; the text's box less the line spacing above and below)
COLLISIONS = """
const svg = document.documentElement;
const texts = [...svg.querySelectorAll('text')].filter((t) => t.textContent.trim()).map((t) => {
  const b = t.getBBox(); return [t.textContent.slice(0, 40), b.x, b.y, b.x + b.width,
                                 b.y + b.height];});
const found = [];
for (let i = 0; i < texts.length; i++) {
  for (let j = i + 1; j < texts.length; j++) {
    const a = texts[i], b = texts[j];
    const w = Math.min(a[3], b[3]) - Math.max(a[1], b[1]);
    const h = Math.min(a[4], b[4]) - Math.max(a[2], b[2]);
    if (w > 0.5 && h > 0.5) found.push(['texts overlap', a[0], b[0]]);
  }
}
for (const p of svg.querySelectorAll('path, line, polyline')) {
  const length = p.getTotalLength(), points = [];
  for (let s = 0; s <= length; s += 0.5) { const q = p.getPointAtLength(s); points.push(q); }
  for (const [name, x0, y0, x1, y1] of texts) {
    const m = (y1 - y0) * 0.2;
    const inside = points.filter((q) => q.x > x0 + 1 && q.x < x1 - 1 && q.y > y0 + m
                                        && q.y < y1 - m).length;
    if (inside > 1) found.push(['a line through', name, (p.getAttribute('d') || '').slice(0, 30)]);
  }
}
return found;
"""


@needs_browser
def test_no_label_collides_with_another_or_with_a_wire():
    with phone_browser() as driver:
        found = {}
        for name in SVGS:
            driver.get((DOCS / name).as_uri())
            if hits := driver.execute_script(COLLISIONS):
                found[name] = hits
    assert found == {}


@needs_browser
def test_the_collision_check_sees_a_wire_through_a_label_and_two_labels_on_each_other(
        tmp_path):
    svg = tmp_path / "crossed.svg"
    svg.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="300" height="100">'
                   '<text x="10" y="30" font-size="12">TP4</text>'
                   '<path d="M 5,26 L 60,26" style="stroke:black"/>'
                   '<text x="100" y="60" font-size="12">C5 100 nF</text>'
                   '<text x="110" y="62" font-size="12">R10 1 kΩ</text></svg>')
    with phone_browser() as driver:
        driver.get(svg.as_uri())
        kinds = sorted(hit[0] for hit in driver.execute_script(COLLISIONS))
    assert kinds == ["a line through", "texts overlap"]


def test_the_nano_limits_box_says_the_chip_clamps_the_duty_and_measures_avcc():
    """The Nano's own limits: the firmware enforces the duty cap CONFIG sends (not the host
    alone), and scales each battery reading by AVCC measured against the bandgap."""
    import re

    svg = (DOCS / "schematic-nano.svg").read_text(encoding="utf-8")
    text = " ".join(re.sub(r"<[^>]+>", " ", svg).split())
    assert "the firmware clamps it to the cap CONFIG sends" in text
    assert "derives it from motor_volts and the battery" in text
    assert "measured against the 1.1 V bandgap" in text
    assert "capped by the host's config" not in text
    hardware = " ".join((DOCS / "hardware.md").read_text(encoding="utf-8").split())
    assert "the firmware clamps it to the cap CONFIG carries" in hardware
    assert "1.1 V bandgap before every battery reading" in hardware
