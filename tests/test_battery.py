"""The battery model: curves, the learned charge per pass, and honest passes-left figures."""

from __future__ import annotations

import json
import random

import pytest

from hardware_sim import SimBattery, SimDevice
from shuffler.control.controller import PassController
from shuffler.core import battery as batt
from shuffler.core.mechanics import Pile
from shuffler.core.planning import coin_plan
from shuffler.device.clock import VirtualClock
from shuffler.errors import LowBatteryError
from shuffler.store.state import StateStore


@pytest.mark.parametrize("chemistry", sorted(batt.CURVES))
def test_curves_fall_with_charge_and_invert(chemistry):
    curve = batt.CURVES[chemistry]
    for under_load in (False, True):
        volts = [curve.volts(c / 20, under_load) for c in range(21)]
        assert volts == sorted(volts)
        for c in (0.03, 0.3, 0.7, 0.97):
            assert curve.charge_at(curve.volts(c, under_load), under_load) == pytest.approx(c)
    assert all(curve.volts(c / 10, True) < curve.volts(c / 10, False) for c in range(11))


def drain(chemistry: str, scale: float, cards: int = 24, seconds_per_pass: float = 0.0):
    """Drain a simulated battery pass by pass from full, a pass every ``seconds_per_pass``
    (0: the dealer restacks in 4 s). Returns the estimate made before each pass and how many
    passes the battery really finished above the cut-off."""
    dev = SimDevice.for_cards(cards, rng=random.Random(1), clock=VirtualClock(),
                              battery=SimBattery(chemistry, capacity_scale=scale))
    history: list[batt.PassRecord] = []
    estimates = []
    rng = random.Random(2)
    while True:
        reading = dev.battery()
        est = batt.estimate(reading.volts, reading.under_load, history[-200:], cards=cards,
                            passes_per_hand=5, chemistry=chemistry)
        report = dev.run_pass(coin_plan(cards, rng))
        if report.fault or report.min_volts < batt.DEFAULT_CUTOFF_LOAD_VOLTS:
            return estimates, len(estimates)
        estimates.append(est.passes_left)
        history.append(batt.PassRecord(report.counted, report.min_volts))
        dev.mechanism.restack(Pile.LEFT)
        dev.clock.sleep(max(seconds_per_pass - report.seconds, 4.0))  # restack and touch


@pytest.mark.parametrize(("chemistry", "scale"), [("alkaline", 0.2), ("alkaline", 0.05),
                                                  ("nimh", 0.3)])
def test_passes_left_is_within_20_percent_from_the_tenth_pass(chemistry, scale):
    estimates, total = drain(chemistry, scale)
    assert total > 15
    for i, est in enumerate(estimates[9:], start=9):
        actual = total - i
        # a pass is a whole unit: within 20%, or within one pass at the very end
        assert abs(est - actual) <= max(0.2 * actual, 1), (i, est, actual)


@pytest.mark.parametrize("chemistry", ["alkaline", "nimh"])
def test_the_power_budget_the_estimate_and_the_simulator_agree(chemistry):
    """A full block at a euchre evening's pace: the budget's passes per block, the fresh
    estimate (from the budget alone) and what the simulated block really gives."""
    budget = batt.passes_per_block(chemistry)
    scale = 0.25  # a quarter-size block: four times quicker, a quarter of the passes
    estimates, total = drain(chemistry, scale, seconds_per_pass=batt.EVENING_SECONDS_PER_PASS)
    assert abs(total - budget * scale) <= 0.2 * budget * scale, (total, budget)
    fresh = batt.estimate(9.5, False, [], cards=24, passes_per_hand=4, chemistry=chemistry)
    assert abs(fresh.passes_left - budget) <= 0.2 * budget, (fresh.passes_left, budget)
    assert abs(estimates[len(estimates) // 2] - total / 2) <= 0.2 * total / 2


def test_the_block_counts_the_whole_mechanism_and_the_idle_current():
    parts = " ".join(d.part for d in batt.MECHANISM)
    for part in ("motor", "DRV8833", "servo", "IR emitter", "divider"):
        assert part in parts
    assert not any(d.rail.endswith("Pi") for d in batt.MECHANISM)  # the Pi has its own supply
    assert batt.PASS_AMPS > 0.35 and batt.IDLE_AMPS > 0.005
    idle = SimBattery()
    idle.rest(3600)  # an hour switched on, no pass
    used_mah = (1 - idle.charge) * idle.curve.capacity_mah
    assert used_mah == pytest.approx(batt.IDLE_AMPS * 1000)


def test_a_fresh_battery_is_recognised_and_learning_starts_again():
    old = [batt.PassRecord(24, v) for v in (6.1, 6.05, 6.0, 5.95, 5.9, 5.85, 5.81)]
    worn = batt.estimate(6.9, False, old, cards=24, passes_per_hand=4)  # recovered at rest
    assert worn.state == "critical" and worn.passes_left == 0 and worn.learned
    fresh = batt.estimate(9.5, False, old, cards=24, passes_per_hand=4)
    assert fresh.state == "ok" and not fresh.learned and fresh.passes_left > 300


def test_without_history_the_estimate_says_it_is_from_the_curve():
    est = batt.estimate(9.5, False, [], cards=24, passes_per_hand=4)
    assert not est.learned and est.percent == 100
    low, high = est.passes_left_range
    assert low <= est.passes_left <= high
    assert batt.estimate(9.5, False, [], cards=104, passes_per_hand=4).passes_left < low


def test_the_controller_learns_from_each_pass_and_keeps_it(tmp_path):
    dev = SimDevice.for_cards(24, rng=random.Random(1), clock=VirtualClock(),
                              battery=SimBattery(capacity_scale=0.2))
    controller = PassController(dev, StateStore(tmp_path))
    assert not controller.battery_estimate(24).learned
    rng = random.Random(3)
    for _ in range(8):
        controller.run_pass(coin_plan(24, rng))
        dev.mechanism.restack(Pile.LEFT)
    assert len(StateStore(tmp_path).load().battery) == 8
    est = controller.battery_estimate(24)
    assert est.learned and 80 < est.passes_left < 130  # about 113 in all at this scale


def test_the_simulated_battery_sags_under_load_and_recovers_at_rest():
    b = SimBattery()
    rest = b.volts(False)
    b.draw(5.0)
    assert b.volts(True) < b.volts(False) < rest
    dipped = b.volts(False)
    b.rest(60)
    assert dipped < b.volts(False) <= rest


def test_a_machine_without_a_battery_monitor_runs_and_says_it_is_not_measured(tmp_path):
    """[gpio] adc_channel = false on sim-gpio: a hand runs (nothing is refused for a 0 V
    reading), and status and battery say the battery is not measured."""
    import json

    from click.testing import CliRunner

    from shuffler_cli.main import cli

    config = tmp_path / "shuffler.toml"
    config.write_text("[gpio]\nadc_channel = false\n")
    env = {"SHUFFLER_STATE_DIR": str(tmp_path / "state"), "SHUFFLER_CONFIG": "",
           "SHUFFLER_NO_SERVICE": "1"}

    def run(*args: str):
        return CliRunner().invoke(cli, ["--device", "sim-gpio", "--config", str(config),
                                        *args], env=env, catch_exceptions=False)

    hand = run("--json", "hand", "--passes", "2")
    assert hand.exit_code == 0, hand.output
    assert [p["counted"] for p in json.loads(hand.stdout)["hand"]["pass_reports"]] == [24, 24]
    status = json.loads(run("--json", "status").stdout)
    assert status["battery"]["measured"] is False
    assert status["battery"]["state"] == "not_measured" and status["battery"]["volts"] is None
    assert "battery: not measured" in run("status").output
    assert "not measured" in run("battery").output


def cli_battery_and_pass(tmp_path, volts: float, config: str = ""):
    """``battery --json`` and then ``pass`` on a simulated block reading ``volts``."""
    from click.testing import CliRunner

    from shuffler_cli.main import cli

    cfg = tmp_path / "battery.toml"
    cfg.write_text(config)
    env = {"SHUFFLER_STATE_DIR": str(tmp_path / f"state-{volts}"),
           "SHUFFLER_CONFIG": str(cfg), "SHUFFLER_NO_SERVICE": "1"}
    base = ["--sim-speed", "1e6", "--json", f"--sim-fault=battery:{volts}"]
    runner = CliRunner()
    said = runner.invoke(cli, [*base, "battery"], env=env, catch_exceptions=False)
    ran = runner.invoke(cli, [*base, "pass"], env=env, catch_exceptions=False)
    return json.loads(said.stdout), ran


@pytest.mark.slow
@pytest.mark.parametrize("config, low, critical", [
    ("", batt.DEFAULT_LOW_VOLTS, batt.DEFAULT_CRITICAL_VOLTS),
    ("[battery]\nlow_volts = 8.4\ncritical_volts = 7.6\n", 8.4, 7.6),
])
def test_battery_and_pass_agree_at_every_voltage(tmp_path, config, low, critical):
    """One rule: ``battery`` says critical exactly where ``pass`` refuses (exit 4), low
    exactly below the configured low_volts, from below critical up to a full block."""
    seen = set()
    volts = critical - 0.2
    while volts <= 9.5 + 1e-9:
        v = round(volts, 2)
        said, ran = cli_battery_and_pass(tmp_path, v, config)
        state = said["state"]
        seen.add(state)
        refused = ran.exit_code == 4
        assert refused == (state == "critical"), (v, state, ran.stdout)
        if refused:
            assert json.loads(ran.stdout)["error"]["kind"] == "low_battery"
            assert "Change the 9 V battery" in json.loads(ran.stdout)["error"]["message"]
        else:
            assert ran.exit_code == 0, (v, ran.stdout)
        if v <= critical:
            assert state == "critical", v
        elif v >= low + 0.01:
            assert state == "ok", (v, state)
        elif v <= low - 0.01 and state != "critical":
            assert state == "low", (v, state)
        volts += 0.05
    assert seen == {"critical", "low", "ok"}


def test_a_weaker_block_swapped_in_is_noticed_before_the_first_pass(tmp_path):
    """Passes recorded on a fresh block, then a weak one goes in: the estimate drops what
    the old block taught and a hand it cannot finish is refused before anything moves."""
    dev = SimDevice.for_cards(24, rng=random.Random(1), clock=VirtualClock(),
                              battery=SimBattery())
    store = StateStore(tmp_path)
    controller = PassController(dev, store)
    rng = random.Random(3)
    for _ in range(6):
        assert controller.run_pass(coin_plan(24, rng)).ok
        dev.mechanism.restack(Pile.LEFT)  # the pack back in the tray for the next
    assert controller.battery_estimate(24).percent > 95
    dev.mechanism.battery = SimBattery.at_volts(6.9)  # a nearly flat block, at rest
    with pytest.raises(LowBatteryError, match="different block"):
        controller.check_ready(24, 5)
    assert store.load().passes == 6  # nothing ran
    assert store.load().battery == []  # the estimate restarts from the new block
    dev.mechanism.battery = SimBattery.at_volts(7.6)  # a half-used one: its own figures
    est = controller.battery_estimate(24)
    assert not est.learned and 10 < est.percent < 25 and est.state == "ok"


def test_a_fresh_block_after_a_worn_one_is_not_a_swap_down():
    old = [batt.PassRecord(24, 8.0)] * 5
    recovered = batt.estimate(8.5, False, old, cards=24, passes_per_hand=5)
    assert not recovered.swapped  # a rest reading above the load reading: same block
    weaker = batt.estimate(7.9, False, old, cards=24, passes_per_hand=5)
    assert weaker.swapped
