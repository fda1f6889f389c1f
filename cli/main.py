"""``shuffler``: run passes and hands from the dealer's seat.

Exit codes: 0 ok; 1 an unexpected error (a bug: please report it); 2 usage or
bad input (options, config, state file); 3 a device fault (jam, misfeed, count
mismatch, timeout) or a latched fault; 4 refused or stopped for low battery.
"""

from __future__ import annotations

import json
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import click

from shuffler import __version__
from shuffler.backends import DEFAULT_SIM_SPEED, SimOptions, open_device, plan_source
from shuffler.cards import MAX_CARDS
from shuffler.config import Config, default_config_path, load_config
from shuffler.controller import PassController
from shuffler.device import FaultKind, ShufflerDevice
from shuffler.errors import ShufflerError
from shuffler.hand import dealer_index, pending_hand, play_hand
from shuffler.logs import configure, get_logger
from shuffler.planning import Mode, PackTracker, make_planner
from shuffler.state import StateStore, default_state_dir

from . import render, study

EXIT_OK, EXIT_BUG, EXIT_USAGE, EXIT_FAULT, EXIT_BATTERY = 0, 1, 2, 3, 4

log = get_logger("shuffler.cli")


@dataclass
class App:
    """What the global options set up; commands open the device through it."""

    config: Config
    json: bool
    device_name: str
    state_dir: Path
    sim: SimOptions
    devices: list[ShufflerDevice] = field(default_factory=list)

    def open(self, cards: int) -> ShufflerDevice:
        device = open_device(self.device_name, self.config, cards=cards, sim=self.sim)
        self.devices.append(device)
        return device

    def controller(self, device: ShufflerDevice) -> PassController:
        controller = PassController(device, StateStore(self.state_dir), self.config.battery,
                                    self.config.hand.passes)
        settled = controller.recover()
        if settled and settled.get("interrupted"):
            click.echo(f"shuffler: pass {settled.get('pass', '?')} of hand "
                       f"{settled.get('hand', '?')} was interrupted (recorded in the audit "
                       "log); the motor is off", err=True)
        return controller

    def close(self) -> None:
        for device in self.devices:
            device.close()

    def emit(self, obj: dict[str, Any], text: str | None = None) -> None:
        if self.json:
            click.echo(json.dumps(obj))
        elif text is not None:
            click.echo(text)


def result_passes(pending: dict | None, passes: int) -> int:
    return pending["passes"] if pending else passes


def fault_exit(kind: FaultKind | None) -> int:
    if kind is None:
        return EXIT_OK
    return EXIT_BATTERY if kind is FaultKind.LOW_BATTERY else EXIT_FAULT


def fail(app: App | None, error: ShufflerError) -> NoReturn:
    code = error.exit_code
    if app is not None and app.json:
        kind = type(error).__name__
        click.echo(json.dumps({"error": {"kind": kind, "message": str(error), "exit": code}}))
    click.echo(f"shuffler: {error}", err=True)
    sys.exit(code)


def mode_option():
    return click.option(
        "--mode",
        type=click.Choice([m.value for m in Mode]),
        default=None,
        help="planned: reach the physical limit (default); coin: the plain machine",
    )


def cards_option():
    return click.option(
        "--cards",
        type=click.IntRange(1, MAX_CARDS),
        default=None,
        help=f"cards in the load, 1 to {MAX_CARDS} (default: from the config, 24)",
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="shuffler")
@click.option(
    "--device",
    "device_name",
    metavar="NAME",
    default=None,
    help="sim (default), sim-gpio, sim-serial, gpio or serial:PORT",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    envvar="SHUFFLER_CONFIG",
    help="TOML config file",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default=None,
    envvar="SHUFFLER_STATE_DIR",
    help="where counters and latched faults are kept",
)
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
@click.option("-v", "--verbose", count=True, help="log more (-v info, -vv debug) on stderr")
@click.option("--log-json", is_flag=True, help="log JSON lines on stderr")
@click.option(
    "--sim-speed",
    type=click.FloatRange(min=0.01, max=1e6),
    default=DEFAULT_SIM_SPEED,
    show_default=True,
    help="simulated time per real second (1 = real time)",
)
@click.option("--sim-seed", type=int, default=None, help="seed the simulator (and its plans)")
@click.option(
    "--sim-fault",
    "sim_faults",
    multiple=True,
    metavar="SPEC",
    help="inject a fault: jam:CARD, misfeed:CARD, double:CARD, battery:VOLTS",
)
@click.option(
    "--sim-dealer",
    type=click.Choice(["instructed", "other", "both"]),
    default="instructed",
    show_default=True,
    help="how the simulated dealer restacks: as the LED says, the other pile "
    "on top, or both piles at once",
)
@click.pass_context
def cli(
    ctx: click.Context,
    device_name,
    config_path,
    state_dir,
    as_json,
    verbose,
    log_json,
    sim_speed,
    sim_seed,
    sim_faults,
    sim_dealer,
) -> None:
    """Drive a two-pile card shuffler; the simulated one unless told otherwise."""
    configure(verbose, log_json)
    try:
        if config_path is not None:
            config = load_config(config_path)
        else:
            config = load_config(default_config_path(), explicit=False)
    except ShufflerError as e:
        fail(None, e)
    app = App(
        config,
        as_json,
        device_name or config.device,
        Path(state_dir) if state_dir else (config.state_dir or default_state_dir()),
        SimOptions(sim_speed, sim_seed, tuple(sim_faults), sim_dealer),
    )
    ctx.obj = app
    ctx.call_on_close(app.close)


def run_guarded(app: App, body) -> None:
    try:
        code = body()
    except ShufflerError as e:
        app.close()
        fail(app, e)
    sys.exit(code or EXIT_OK)


@cli.command("pass")
@cards_option()
@mode_option()
@click.pass_obj
def pass_cmd(app: App, cards: int | None, mode: str | None) -> None:
    """Run one pass of the loaded pack."""
    cards = cards or app.config.hand.cards
    planning_mode = Mode(mode) if mode else app.config.hand.mode

    def body() -> int:
        device = app.open(cards)
        controller = app.controller(device)
        progress = render.Progress()
        planner = make_planner(planning_mode, 1, plan_source(device, app.sim.seed))
        report = controller.run_pass(
            planner.plan(0, cards, PackTracker(cards, device.info.feed)), progress.card
        )
        progress.end()
        app.emit(
            {"device": device.info.to_dict(), "pass": render.pass_dict(report)},
            render.pass_line(report),
        )
        if report.fault and not app.json:
            click.echo(f"shuffler: {report.fault.message}", err=True)
        return fault_exit(report.fault.kind if report.fault else None)

    run_guarded(app, body)


@cli.command()
@click.option(
    "--passes",
    type=click.IntRange(1, 30),
    default=None,
    help="passes in this hand, 1 to 30 (default: from the config, 4)",
)
@cards_option()
@mode_option()
@click.pass_obj
def hand(app: App, passes: int | None, cards: int | None, mode: str | None) -> None:
    """Run one euchre hand: N passes, then the deal moves to the left."""
    passes = passes or app.config.hand.passes
    cards = cards or app.config.hand.cards
    planning_mode = Mode(mode) if mode else app.config.hand.mode

    def body() -> int:
        pending = pending_hand(StateStore(app.state_dir).load())
        device = app.open(pending["cards"] if pending else cards)
        controller = app.controller(device)
        progress = render.Progress()
        if pending and not app.json:
            click.echo(f"resuming hand {pending['number']} at pass {pending['done'] + 1} of "
                       f"{pending['passes']}", err=True)

        def done(record) -> None:
            progress.end()
            if not app.json:
                click.echo(render.pass_line(record.report, record.number,
                                            result_passes(pending, passes)))

        result = play_hand(controller, app.config, passes=passes, cards=cards,
                           mode=planning_mode, rng=plan_source(device, app.sim.seed),
                           on_pass_start=progress.start, on_card=progress.card,
                           on_pass_done=done)
        app.emit(
            {"device": device.info.to_dict(), "hand": render.hand_dict(result)},
            render.hand_summary(result),
        )
        if result.fault and not app.json:
            click.echo(f"shuffler: {result.fault.message}", err=True)
        return fault_exit(result.fault.kind if result.fault else None)

    run_guarded(app, body)


@cli.command()
@click.pass_obj
def status(app: App) -> None:
    """The device, its health, the latched fault if any, and the counters."""

    def body() -> int:
        device = app.open(app.config.hand.cards)
        controller = app.controller(device)
        state = controller.store.load()
        fault = controller.latched_fault()
        health = device.health()
        est = controller.battery_estimate(app.config.hand.cards)
        seats = app.config.table.seats
        obj = {
            "device": device.info.to_dict(),
            "health": health.to_dict() | {"ok": health.ok and fault is None},
            "fault": fault.to_dict() if fault else None,
            "battery": est.to_dict(),
            "counters": {
                "hands": state.hands_completed,
                "passes": state.passes,
                "cards": state.cards,
                "jams": state.jams,
                "faults": state.faults,
            },
            "dealer": seats[dealer_index(state, app.config)],
        }
        text = (
            f"device: {device.info.name} ({device.info.kind}), feed from the "
            f"{device.info.feed.value}\n"
            f"health: {'ok' if obj['health']['ok'] else 'FAULT'}\n"
            f"fault: {fault.message if fault else 'none'}\n"
            f"battery: {est.volts:.2f} V, {est.percent:.0f}%, {est.state}, about "
            f"{est.passes_left} passes left\n"
            f"counters: {state.hands_completed} hands, {state.passes} passes, "
            f"{state.cards} cards, {state.jams} jams\n"
            f"dealer: {obj['dealer']}"
        )
        app.emit(obj, text)
        return EXIT_OK

    run_guarded(app, body)


@cli.command()
@cards_option()
@click.pass_obj
def battery(app: App, cards: int | None) -> None:
    """Battery volts and charge, and how many passes and hands it has left."""
    cards = cards or app.config.hand.cards

    def body() -> int:
        device = app.open(cards)
        est = app.controller(device).battery_estimate(cards)
        per_hand = app.config.hand.passes
        obj = est.to_dict() | {"chemistry": app.config.battery.chemistry, "cards": cards,
                               "passes_per_hand": per_hand}
        low, high = est.passes_left_range
        text = (f"battery: {est.volts:.2f} V {'under load' if est.under_load else 'at rest'}, "
                f"{est.percent:.0f}% ({app.config.battery.chemistry}), {est.state}\n"
                f"about {est.passes_left} passes of {cards} cards left ({low} to {high}), "
                f"{est.hands_left} hands of {per_hand} passes")
        if not est.learned:
            text += "\n(from the battery's curve alone: no passes recorded on it yet)"
        app.emit(obj, text)
        return EXIT_OK

    run_guarded(app, body)


@cli.command()
@click.pass_obj
def clear(app: App) -> None:
    """Clear a latched fault once the machine reports itself clear."""

    def body() -> int:
        device = app.open(app.config.hand.cards)
        controller = app.controller(device)
        had = controller.latched_fault()
        if not controller.clear():
            app.emit({"cleared": False}, "the machine still reports a fault: see `shuffler status`")
            return EXIT_FAULT
        app.emit(
            {"cleared": True, "was": had.to_dict() if had else None},
            f"cleared: {had.kind.value}" if had else "no fault was latched",
        )
        return EXIT_OK

    run_guarded(app, body)


cli.add_command(study.mixing)
cli.add_command(study.simulate)


def _terminate(signum, frame) -> NoReturn:
    # unwind through every finally: the devices stop their motors on the way out
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        cli.main(prog_name="shuffler", standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("shuffler: interrupted; the motor is off", err=True)
        sys.exit(130)
