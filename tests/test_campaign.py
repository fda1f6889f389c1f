"""A small slice of the fault and fuzz campaign (benchmarks/campaign.py), fixed seeds:
no traceback, no hang, no lost latch, no false completion."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import structlog

pytestmark = pytest.mark.slow

pytest.importorskip("hypothesis")

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "campaign.py"


@pytest.fixture(scope="module")
def campaign():
    spec = importlib.util.spec_from_file_location("campaign", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["campaign"] = module  # its dataclasses look themselves up there
    sys.path.insert(0, str(SCRIPT.parent))  # its file sections: benchmarks/campaign_files.py
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("campaign", None)
    sys.modules.pop("campaign_files", None)
    sys.path.remove(str(SCRIPT.parent))
    shutil.rmtree(module.RUN_DIR, ignore_errors=True)


@pytest.fixture(autouse=True)
def logs_restored():
    """The campaign silences the program's logs; the other tests read them."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def clean(section) -> bool:
    return section.tried > 0 and not any(section.counts[o] for o in ("traceback", "hang",
                                                                       "lost latch",
                                                                       "false completion",
                                                                       "wrong"))


@pytest.mark.parametrize(("cards", "kind", "pos"), [
    (24, "jam", 1), (24, "jam", 24), (32, "misfeed", 17), (24, "double", 7), (24, "double", 24),
    (104, "jam", 104)])
def test_each_fault_is_reported_and_a_jam_latches(campaign, cards, kind, pos):
    assert campaign.fault_case("sim", cards, kind, pos) == ("ok", "")


def test_the_matrix_would_see_a_lost_latch(campaign, monkeypatch):
    """The check can fail: a controller that forgets the latch is caught."""
    from shuffler.control.controller import PassController

    monkeypatch.setattr(PassController, "_count", staticmethod(
        lambda s, counted, fault: setattr(s, "passes", s.passes + 1)))
    assert campaign.fault_case("sim", 24, "jam", 5)[0] == "lost latch"


@pytest.mark.parametrize(("fuzzer", "examples", "seed"), [
    ("run_fuzz_state", 12, 3),   # state files: no crash, no latch dropped
    ("run_fuzz_config", 12, 2),  # config files, a FIFO, /dev/zero, a folder
    ("run_fuzz_serial", 150, 5),  # serial bytes and frames: decoded or dropped
    ("run_fuzz_cli", 8, 1),      # the command line: never a traceback
    ("run_fuzz_socket", 12, 4),  # requests to a running `shuffler serve`, deep ones included
])
def test_generated_inputs_are_ok_or_a_clean_error(campaign, fuzzer, examples, seed):
    section = getattr(campaign, fuzzer)(examples, seed=seed)
    assert clean(section), section.failures
    assert section.counts["clean error"] > 0  # the bad inputs were tried and refused


def test_a_sigkill_mid_pass_keeps_the_state_and_the_latch(campaign):
    outcome, detail = campaign.kill_case(
        "sim", ["--sim-speed", "4", "--sim-fault", "jam:3", "pass"], 0.9)
    assert outcome == "ok", detail


@pytest.fixture
def files(campaign):
    import campaign_files

    return campaign_files


@pytest.mark.parametrize("scenario", ["pass", "hand jam", "clear"])
def test_a_kill_or_io_error_at_file_operations_loses_no_latch_and_no_record(files, scenario):
    """A slice of ``files``: the first, middle and last writing operation, each killed
    before and after, failed with EIO and with ENOSPC from there on."""
    section = files.run_files(scenario, False)
    assert clean(section) and section.tried == 12, section.failures


def test_the_injection_would_see_a_lost_latch(files, monkeypatch):
    """The check can fail: a recovery that forgets the pass cut off is caught."""
    from shuffler.control.controller import PassController

    def forgetful(self):
        self.update(lambda s: (setattr(s, "fault", None), setattr(s, "in_flight", None)))

    monkeypatch.setattr(PassController, "recover", forgetful)
    section = files.run_files("pass", False)
    assert section.counts["lost latch"] > 0


@pytest.mark.parametrize("section", ["run_torn", "run_symlinks", "run_tmpfs", "run_socket"])
def test_torn_tails_symlinks_a_full_disk_and_the_socket_lose_nothing(files, section):
    result = getattr(files, section)(False)
    if result.skipped and not result.tried:
        pytest.skip(result.skipped)
    assert clean(result), result.failures


def test_the_table_and_json_show_every_outcome(campaign, capsys):
    section = campaign.Section("demo")
    section.add("ok")
    section.add("hang", "a request", "shuffler status", "no answer")
    campaign.print_table([section.to_dict()])
    out = capsys.readouterr().out
    assert "demo" in out and "repro: shuffler status" in out
    row = json.loads(json.dumps(section.to_dict()))
    assert (row["tried"], row["ok"], row["hang"]) == (2, 1, 1)
