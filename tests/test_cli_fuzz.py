"""The CLI's parser under generated arguments: every outcome is an exit code we
document, never a traceback (a property-based test; issue 13 and 17)."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shuffler_cli.main import cli

GLOBAL = ["--device", "--config", "--state-dir", "--socket", "--sim-speed", "--sim-seed",
          "--sim-fault", "--sim-dealer", "--json", "--no-service", "--color", "--no-color",
          "-v", "-vv", "--log-json", "-V"]
COMMAND_OPTIONS = ["--cards", "--passes", "--mode", "--target", "--trials", "--seed",
                   "--start", "--orders", "--feed", "--double-rate", "--alone", "-h"]
# commands that only parse and check here: no hardware, no long work, no waiting
COMMANDS = ["pass", "hand", "status", "battery", "clear", "mixing", "simulate", "score",
            "nonsense", ""]
VALUES = st.one_of(
    st.sampled_from(["0", "1", "-1", "24", "105", "1e309", "nan", "inf", "-inf", "²", "١",
                     "jam:99", "jam:²", "battery:nan", "double:", "sim", "usb", "planned",
                     "x" * 300, "a\0b", "/proc/x", "", " ", "--", "-"]),
    st.text(max_size=12),
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
TOKENS = st.one_of(st.sampled_from(GLOBAL + COMMAND_OPTIONS), VALUES)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    here = os.getcwd()
    os.chdir(tmp)  # a generated --orders FILE lands here, not in the checkout
    yield {"SHUFFLER_STATE_DIR": str(tmp / "state"), "SHUFFLER_CONFIG": "",
            "SHUFFLER_NO_SERVICE": "1", "SHUFFLER_SIM_SPEED": "1000000",
            "SHUFFLER_SIM_FAULT": ""}
    os.chdir(here)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=st.lists(TOKENS, max_size=4), command=st.sampled_from(COMMANDS),
       tail=st.lists(TOKENS, max_size=5))
def test_generated_arguments_never_give_a_traceback(env, head, command, tail):
    args = [*head, *([command] if command else []), *tail]
    if "simulate" in args or "mixing" in args:
        args += ["--trials", "10"]  # keep a study short (the last --trials wins)
    result = CliRunner().invoke(cli, args, env=env)
    if isinstance(result.exception, SystemExit) or result.exception is None:
        assert result.exit_code in (0, 2, 3, 4), (args, result.output)
        if result.exit_code == 2:
            assert "Traceback" not in result.output
        return
    raise AssertionError(f"{args!r} raised {result.exception!r}") from result.exception
