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


def test_ci_checks_the_style_then_runs_the_readme_test_command_last():
    """ruff and mypy run before the tests under `set -e`, so a finding fails CI."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert "set -euo pipefail" in lines
    assert lines[-1] == readme_commands()[1]
    ruff, mypy = lines.index(".venv/bin/ruff check ."), lines.index(".venv/bin/mypy")
    assert ruff < len(lines) - 1 and mypy < len(lines) - 1


def test_the_dev_extra_holds_what_the_tests_and_the_style_need():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["dev"] == ["shuffler[test]"]
    names = {re.split(r"[<>=\[ ]", req)[0] for req in extras["test"]}
    assert {"pytest", "jsonschema", "mypy", "ruff"} <= names


def test_the_readme_lists_every_exit_code():
    text = (ROOT / "README.md").read_text()
    for code in range(5):
        assert re.search(rf"^\| {code} \|", text, flags=re.M)


def test_ci_runs_the_vm_tier_as_its_own_step_and_the_readme_command_the_rest():
    """The whole suite is the two: the README's command on three xdist workers leaves out
    only the VM tier, which .ci/run runs before it, as README says."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    vm = ".venv/bin/python -m pytest -q -m vm"
    assert vm in lines and lines.index(vm) < len(lines) - 1
    test = readme_commands()[1]
    assert test.endswith('pytest -q -n 3 -m "not vm"')
    assert vm in (ROOT / "README.md").read_text()
    import tomllib

    pytest_ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "--dist loadfile" in pytest_ini["ini_options"]["addopts"]  # README says so
