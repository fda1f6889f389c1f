"""A real browser for the page tests: Debian's headless Chromium driven by Selenium
through Debian's chromedriver (no driver or browser is downloaded)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)

try:
    import selenium  # noqa: F401
    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

needs_browser = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER and HAVE_SELENIUM),
    reason="needs a real browser: apt-get install chromium chromium-driver (Debian "
           "packages) and pip install selenium (in the test extra)")

#: a phone held in one hand, and a desktop window (CSS pixels)
PHONE = (390, 844)
DESKTOP = (1280, 800)

ROOT = Path(__file__).resolve().parent.parent
#: axe-core, the accessibility engine (npm package `axe-core`; .ci/run installs it here)
AXE_JS = next((p for p in (
    Path(os.environ.get("SHUFFLER_AXE_JS", "/nonexistent")),
    ROOT / "tests" / ".axe" / "node_modules" / "axe-core" / "axe.min.js",
    ROOT / "node_modules" / "axe-core" / "axe.min.js",
    Path("/usr/lib/node_modules/axe-core/axe.min.js"),
    Path("/usr/share/nodejs/axe-core/axe.min.js")) if p.is_file()), None)

needs_axe = pytest.mark.skipif(
    AXE_JS is None, reason="needs axe-core (the npm package): npm install --prefix tests/.axe "
                           "axe-core (.ci/run does it)")

RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then((r) => done(r.violations.map((v) => (
  {id: v.id, impact: v.impact, help: v.help,
   nodes: v.nodes.map((n) => n.target.join(" ") + ": " + n.failureSummary)}))))
  .catch((e) => done([{id: "axe-failed", impact: "critical", help: String(e), nodes: []}]));
"""


def view(driver, dark: bool, size: tuple[int, int]) -> None:
    """Light or dark, phone or desktop, without reloading the page."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})
    phone = size == PHONE
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": size[0], "height": size[1], "deviceScaleFactor": 2 if phone else 1,
        "mobile": phone})


def axe_violations(driver) -> list[dict]:
    """What axe-core finds on the page as it stands (every rule, every impact)."""
    assert AXE_JS is not None
    if not driver.execute_script("return !!window.axe"):
        driver.execute_script(AXE_JS.read_text(encoding="utf-8"))
    return driver.execute_async_script(RUN_AXE)


#: every control a player can tap, and the smallest it may be (CSS px, WCAG 2.5.5)
TAPPABLE = "button, a[href], input, select, textarea, summary, [role=button], [onclick]"
TARGET_PX = 48

SMALL_TARGETS = """
const [css, least] = arguments;
return [...document.querySelectorAll(css)].filter((el) => {
  const s = getComputedStyle(el), r = el.getBoundingClientRect();
  const gone = !el.getClientRects().length || s.visibility === "hidden" || s.display === "none"
    || el.closest("[hidden]") || el.closest(".invisible");
  return !gone && (r.width < least - 0.01 || r.height < least - 0.01);
}).map((el) => {
  const r = el.getBoundingClientRect(), what = el.textContent.trim().slice(0, 30);
  return `${el.tagName.toLowerCase()}#${el.id || "?"} "${what}" ` +
         `${Math.round(r.width)}x${Math.round(r.height)}`;
});
"""


def small_targets(driver) -> list[str]:
    """Every control on screen (or scrolled to) smaller than 48 x 48 CSS px, at the
    phone's size."""
    return driver.execute_script(SMALL_TARGETS, TAPPABLE, TARGET_PX)


def audit(driver, state: str, dark: bool = False) -> None:
    """axe-core in light and dark, on a phone and a desktop, and every tappable control at
    least 48 x 48 CSS px on the phone (390 x 844): nothing may be found. The page is left
    as it was (phone, ``dark``)."""
    found = {}
    try:
        view(driver, dark, PHONE)
        if small := small_targets(driver):
            found["targets under 48 x 48 px at 390x844"] = small
        for d in (False, True):
            for size in (PHONE, DESKTOP):
                view(driver, d, size)
                if violations := axe_violations(driver):
                    found[f"{'dark' if d else 'light'} {size[0]}x{size[1]}"] = violations
    finally:
        view(driver, dark, PHONE)
    assert not found, f"axe-core on the {state} page: {found}"


@contextmanager
def phone_browser(dark: bool = False) -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="shuffler-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                 f"--user-data-dir={profile}", f"--window-size={PHONE[0]},{PHONE[1]}",
                 "--force-device-scale-factor=1"):
        options.add_argument(flag)
    options.add_experimental_option("mobileEmulation", {
        "deviceMetrics": {"width": PHONE[0], "height": PHONE[1], "pixelRatio": 2.0}})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(60)
    try:
        if dark:
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
                "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
