"""One pin map: the config's defaults, the wiring table, the schematic and the example
configs all say the same thing as shuffler/pinmap.py."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from shuffler import pinmap
from shuffler.config import SPI0_PINS, GpioConfig
from shuffler.core import battery

DOCS = Path(__file__).resolve().parent.parent / "docs"


def generated(name: str) -> str:
    text = (DOCS / "hardware.md").read_text(encoding="utf-8")
    m = re.search(rf"<!-- generated: {name} -->\n(.*)\n<!-- end generated: {name} -->", text,
                  re.S)
    assert m, f"docs/hardware.md has no generated {name} block"
    return m.group(1)


def test_the_config_defaults_are_the_pin_map():
    cfg = GpioConfig()
    assert cfg.pins() == pinmap.default_pins()
    assert set(SPI0_PINS) == {8, 9, 10, 11}
    assert cfg.divider_ratio == pytest.approx(pinmap.divider_ratio(), abs=0.005)


def test_the_header_map_is_the_raspberry_pi_header():
    physical = list(pinmap.HEADER.values())
    assert len(set(physical)) == len(physical) == 28  # GPIO0 to GPIO27
    power = {p for pins in pinmap.POWER_PINS.values() for p in pins}
    assert not power & set(physical)
    assert sorted(power | set(physical)) == list(range(1, 41))
    # spot checks against the printed header
    assert (pinmap.header_pin(17), pinmap.header_pin(18), pinmap.header_pin(21)) == (11, 12, 40)
    assert {w.bcm for w in pinmap.WIRES.values()} <= set(pinmap.HEADER)
    assert len({w.bcm for w in pinmap.WIRES.values()}) == len(pinmap.WIRES)


def test_the_wiring_table_and_the_budget_in_the_docs_are_generated_from_the_code():
    assert generated("wiring") == pinmap.wiring_table()
    assert generated("power budget") == battery.budget_tables()
    for wire in pinmap.WIRES.values():
        assert f"| GPIO{wire.bcm} | {wire.header} |" in generated("wiring")


@pytest.mark.parametrize("path", ["config.md", "deploy/config.toml"])
def test_the_example_configs_use_the_default_pins(path):
    text = (DOCS / path).read_text(encoding="utf-8")
    block = re.search(r"^\[pins\].*?(?=^\[)", text, re.S | re.M)
    assert block
    pins = tomllib.loads(block.group(0))["pins"]
    defaults = pinmap.default_pins()
    assert pins and all(defaults[role] == bcm for role, bcm in pins.items())


def svg_text() -> str:
    raw = (DOCS / "schematic.svg").read_text(encoding="utf-8")
    return re.sub(r"<[^>]+>", " ", raw).replace("&amp;", "&")


def test_the_schematic_shows_every_pin_rail_and_part():
    text = svg_text()
    for wire in pinmap.WIRES.values():
        assert wire.label in text, wire.label
    for rail in ("9V", "5V_MECH", "5V_PI", "3V3", "GND"):
        assert rail in text
    for _number, (name, _to) in pinmap.MCP3008_PINS.items():
        assert name in text
    for part in ("DRV8833", "nSLEEP", "VM", "C1 100 µF", "1N5819", "gate", "pull-down",
                 "IR emitter", "R6 330 Ω", "R7 10 kΩ", "pull-up", "2N3904", "SG90",
                 "TCRT5000", "TTP223", "5 V buck", "SW1"):
        assert part in text, part
    tol = f"±{pinmap.DIVIDER_TOLERANCE * 100:g}%"
    assert f"R1 100 kΩ {tol}" in text and f"R2 33 kΩ {tol}" in text
    assert "tap" in text


def test_each_led_colour_has_its_own_resistor():
    text = svg_text()
    ohms = [re.search(r"via R\d+ (\d+) Ω", pinmap.WIRES[f"led_{c}"].part).group(1)  # type: ignore
            for c in ("red", "green", "blue")]
    assert len(set(ohms)) == 3
    for value in ohms:
        assert f"{value} Ω" in text


def test_the_schematic_is_what_the_generator_draws():
    pytest.importorskip("schemdraw", reason="pip install -e '.[docs]' draws the schematic")
    spec = importlib.util.spec_from_file_location("make_schematic", DOCS / "make_schematic.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    svg = module.draw().get_imagedata("svg")
    svg = svg.decode() if isinstance(svg, bytes) else svg
    assert svg == (DOCS / "schematic.svg").read_text(encoding="utf-8"), (
        "docs/schematic.svg is stale: run python docs/make_schematic.py")
