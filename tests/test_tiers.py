"""The suite says its tiers: a test marks itself slow (tests/conftest.py), a quick test
that starts a real part fails naming it, and the one rule by parameter names tests that
exist."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import COLLECTED, REAL_PARTS, SLOW_BACKENDS, real_part

ROOT = Path(__file__).resolve().parents[1]

FAKE_BROKER = """
import subprocess
import pytest

def test_quick_but_starts_a_broker(tmp_path):
    subprocess.run([{program!r}, "-h"], check=False)

@pytest.mark.slow
def test_marked_slow_and_starts_a_broker(tmp_path):
    subprocess.run([{program!r}, "-h"], check=False)

def test_quick_and_starts_only_true():
    subprocess.run(["true"], check=True)
"""


def test_a_quick_test_that_starts_a_real_part_fails_naming_it(tmp_path):
    program = tmp_path / "bin" / "mosquitto"  # a stand-in: the name is what counts
    program.parent.mkdir()
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    (tmp_path / "test_fake.py").write_text(FAKE_BROKER.format(program=str(program)))
    done = subprocess.run(
        # without hypothesis's plugin (a second of imports): the guard is the conftest's;
        # no conftest above the test's folder, nor a walk of /tmp's entries to find one
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "no:hypothesispytest", "-p", "tests.conftest", "-c", str(ROOT / "pyproject.toml"),
         "--rootdir", str(tmp_path), "--confcutdir", str(tmp_path),
         str(tmp_path / "test_fake.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    out = done.stdout
    assert done.returncode == 1, out
    assert "1 failed, 2 passed" in out, out
    assert ("test_quick_but_starts_a_broker starts a broker but is not marked slow: add "
            "@pytest.mark.slow") in out


@pytest.mark.parametrize(("argv", "part"), [
    (["/usr/sbin/mosquitto", "-c", "x.conf"], "a broker"),
    ("chromedriver", "a browser"),
    ([b"/work/firmware/build/simavr-harness", "--cards=24"], "the firmware in simavr"),
    (["/venv/bin/shuffler", "--device", "sim-avr", "pass"], "the firmware in simavr"),
    ([Path("/usr/bin/qemu-system-x86_64"), "-m", "512"], "the VM"),
    (["systemd-analyze", "verify"], "systemd"),
    (["/venv/bin/shuffler", "--device", "sim-serial", "pass"], None),
    (["make", "-C", "firmware"], None),
    ([], None),
    (None, None),
])
def test_the_real_parts_are_known_by_their_program(argv, part):
    assert real_part(argv) == part
    assert part is None or part in REAL_PARTS.values()


def params_of(item: pytest.Item) -> dict[str, str]:
    callspec = getattr(item, "callspec", None)
    return {k: v for k, v in (callspec.params.items() if callspec else ())
            if isinstance(v, str)}


#: the collection of the whole suite in a subprocess: each test's id and parameters
COLLECT = """
import json, pytest
from tests.test_tiers import params_of
class Items:
    def pytest_collection_finish(self, session):
        self.found = [(item.nodeid, params_of(item)) for item in session.items]
items = Items()
pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[items])
print(json.dumps(items.found))
"""


def collected(config: pytest.Config) -> list[tuple[str, dict[str, str]]]:
    """Every test's id and parameters: this session's own collection when it took the
    whole suite (the quick tier and CI), else a collection of it in a subprocess."""
    items = config.stash.get(COLLECTED, [])
    if len({item.path for item in items}) == len(list((ROOT / "tests").rglob("test_*.py"))):
        return [(item.nodeid, params_of(item)) for item in items]
    done = subprocess.run([sys.executable, "-c", COLLECT], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=True)
    return [tuple(found) for found in json.loads(done.stdout.splitlines()[-1])]


def test_every_slow_parameter_names_collected_tests(request):
    items = collected(request.config)
    for name in SLOW_BACKENDS:
        assert any(name in params.values() for _, params in items), (
            f"no collected test has a parameter {name!r}: drop it from SLOW_BACKENDS")
