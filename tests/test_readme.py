"""The README's promises that a machine can check."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^python3 -m venv .*$", text, flags=re.M)


def test_the_readme_has_the_two_commands():
    run, test = readme_commands()
    assert run.endswith("shuffler hand")
    assert "pytest" in test


def test_ci_runs_the_readme_test_command():
    assert readme_commands()[1] in (ROOT / ".ci" / "run").read_text()


def test_the_readme_lists_every_exit_code():
    text = (ROOT / "README.md").read_text()
    for code in range(5):
        assert re.search(rf"^\| {code} \|", text, flags=re.M)
