"""Every drawing in docs/ rendered in a real browser (headless Chromium): no line of text
may extend past the drawing's edge, where a viewer cuts it mid-word."""

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
