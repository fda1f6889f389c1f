"""A real browser for the page tests: Debian's headless Chromium driven by Selenium
through Debian's chromedriver (no driver or browser is downloaded)."""

from __future__ import annotations

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

#: a phone held in one hand (CSS pixels)
PHONE = (412, 915)


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
    try:
        if dark:
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
                "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
