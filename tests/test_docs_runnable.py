"""Docs agree with the code: every block marked ```sh runnable in README.md and docs/
runs as written, and every page quotes the one default number of passes per hand."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shuffler.core.planning import default_passes

# the lines of a page run in order in one state folder: in one worker under xdist
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("docs-runnable")]

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```sh runnable\n(.*?)^```", re.M | re.S)
EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")


def runnable_lines() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for block in BLOCK.findall(page.read_text(encoding="utf-8")):
            for line in block.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    found.append((page.relative_to(ROOT).as_posix(), line))
    return found


LINES = runnable_lines()


def test_there_are_runnable_blocks():
    pages = {page for page, _ in LINES}
    assert {"README.md", "CONTRIBUTING.md", "docs/guide.md"} <= pages


@pytest.fixture(scope="module")
def shell_env(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("docs")
    return {**os.environ, "SHUFFLER_STATE_DIR": str(tmp / "state"), "SHUFFLER_CONFIG": "",
            "SHUFFLER_NO_SERVICE": "1", "SHUFFLER_SIM_SPEED": "1000000",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.parametrize(("page", "line"), LINES, ids=[f"{p}: {line}" for p, line in LINES])
def test_a_runnable_line_runs_as_written(page, line, shell_env):
    """Lines of a page run in order, in one state folder; `.venv/bin/` is the venv
    running the tests (the README's set-up puts it at .venv)."""
    expected = int(m.group(1)) if (m := EXIT.search(line)) else 0
    command = line.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    proc = subprocess.run(["bash", "-c", command], cwd=ROOT, env=shell_env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == expected, f"{page}: {line}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr


def test_every_page_quotes_the_one_default_of_passes_per_hand():
    """Where a page states the default number of passes for a euchre pack, it is
    default_passes(24); config examples leave [hand] passes unset and name the rule."""
    words = {4: "four", 5: "five", 6: "six", 7: "seven"}
    k = default_passes(24)
    assert k == 5
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"\b(\w+) by default\b", text):
            if "pass" in text[max(0, m.start() - 80):m.start()]:
                assert m.group(1) in (str(k), words[k]), f"{page}: {m.group(0)}"
    for config in (ROOT / "docs" / "config.md", ROOT / "docs" / "deploy" / "config.toml"):
        text = config.read_text(encoding="utf-8")
        assert not re.search(r"^passes\s*=", text, re.M), f"{config}: sets passes"
        assert "default_passes" in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"**{k} for a 24-card" in readme and "default_passes" in readme
