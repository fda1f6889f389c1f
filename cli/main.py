"""``shuffler``: run passes and hands from the dealer's seat.

When a service (``shuffler serve``) answers on its socket, the commands ask it;
otherwise they open the device in-process. The output is the same either way.

Exit codes: 0 ok; 1 an unexpected error (a bug: please report it); 2 usage or
bad input (options, config, state file); 3 a device fault (jam, misfeed, count
mismatch, timeout), a latched fault, or a busy service; 4 refused or stopped for
low battery.
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
from shuffler.client import ServiceClient
from shuffler.config import Config, default_config_path, load_config
from shuffler.controller import PassController
from shuffler.device import ShufflerDevice
from shuffler.errors import ShufflerError
from shuffler.hand import pending_hand
from shuffler.logs import configure, get_logger
from shuffler.planning import Mode
from shuffler.reports import EXIT_OK
from shuffler.session import Session
from shuffler.state import StateStore, default_state_dir

from . import render, study

log = get_logger("shuffler.cli")


@dataclass
class App:
    """What the global options set up; commands reach the machine through it."""

    config: Config
    json: bool
    device_name: str
    state_dir: Path
    sim: SimOptions
    socket: Path
    use_service: bool = True
    devices: list[ShufflerDevice] = field(default_factory=list)
    clients: list[ServiceClient] = field(default_factory=list)

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

    def service(self) -> ServiceClient | None:
        """The running service, unless told to work in-process."""
        if not self.use_service:
            return None
        client = ServiceClient.connect(self.socket)
        if client is not None:
            self.clients.append(client)
        return client

    def ask(self, cmd: str, *, load: int | None, local, on_event=None, **args) -> dict:
        """The running service's answer to ``cmd``, or ``local(session)`` in-process on a
        device loaded with ``load`` cards (the configured load if None)."""
        if client := self.service():
            return client.request(cmd, on_event, **args)
        return local(self.session(load or self.config.hand.cards))

    def session(self, cards: int) -> Session:
        device = self.open(cards)
        return Session(self.controller(device), self.config, plan_source(device, self.sim.seed))

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for device in self.devices:
            device.close()
        self.clients.clear()
        self.devices.clear()

    def emit(self, obj: dict[str, Any], text: str | None = None) -> None:
        if self.json:
            click.echo(json.dumps(obj))
        elif text is not None:
            click.echo(text)


def fail(app: App | None, error: ShufflerError) -> NoReturn:
    code = error.exit_code
    if app is not None and app.json:
        kind = getattr(error, "kind", type(error).__name__)
        click.echo(json.dumps({"error": {"kind": kind, "message": str(error), "exit": code}}))
    click.echo(f"shuffler: {error}", err=True)
    sys.exit(code)


def run_guarded(app: App, body) -> None:
    try:
        code = body()
    except ShufflerError as e:
        app.close()
        fail(app, e)
    sys.exit(code or EXIT_OK)


def mode_option():
    return click.option("--mode", type=click.Choice([m.value for m in Mode]), default=None,
                        help="planned: reach the physical limit (default); coin: the plain "
                             "machine")


def cards_option():
    return click.option("--cards", type=click.IntRange(1, MAX_CARDS), default=None,
                        help=f"cards in the load, 1 to {MAX_CARDS} (default: from the config, "
                             "24)")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="shuffler")
@click.option("--device", "device_name", metavar="NAME", default=None,
              help="sim (default), sim-gpio, sim-serial, gpio or serial:PORT")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              envvar="SHUFFLER_CONFIG", help="TOML config file")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              envvar="SHUFFLER_STATE_DIR", help="where counters and latched faults are kept")
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False), default=None,
              envvar="SHUFFLER_SOCKET", help="the service's socket (default: from the config)")
@click.option("--no-service", is_flag=True,
              help="open the device in-process even if a service is running")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
@click.option("-v", "--verbose", count=True, help="log more (-v info, -vv debug) on stderr")
@click.option("--log-json", is_flag=True, help="log JSON lines on stderr")
@click.option("--sim-speed", type=click.FloatRange(min=0.01, max=1e6), default=DEFAULT_SIM_SPEED,
              show_default=True, help="simulated time per real second (1 = real time)")
@click.option("--sim-seed", type=int, default=None, help="seed the simulator (and its plans)")
@click.option("--sim-fault", "sim_faults", multiple=True, metavar="SPEC",
              help="inject a fault: jam:CARD, misfeed:CARD, double:CARD, battery:VOLTS")
@click.option("--sim-dealer", type=click.Choice(["instructed", "other", "both"]),
              default="instructed", show_default=True,
              help="how the simulated dealer restacks: as the LED says, the other pile on "
                   "top, or both piles at once")
@click.pass_context
def cli(ctx: click.Context, device_name, config_path, state_dir, socket_path, no_service,
        as_json, verbose, log_json, sim_speed, sim_seed, sim_faults, sim_dealer) -> None:
    """Drive a two-pile card shuffler; the simulated one unless told otherwise."""
    configure(verbose, log_json)
    try:
        if config_path is not None:
            config = load_config(config_path)
        else:
            config = load_config(default_config_path(), explicit=False)
    except ShufflerError as e:
        fail(None, e)
    sim = SimOptions(sim_speed, sim_seed, tuple(sim_faults), sim_dealer)
    app = App(config, as_json, device_name or config.device,
              Path(state_dir) if state_dir else (config.state_dir or default_state_dir()),
              sim, Path(socket_path) if socket_path else config.service.socket_path,
              # simulator options and an explicit device are for an in-process run
              use_service=not (no_service or sim.given or device_name))
    ctx.obj = app
    ctx.call_on_close(app.close)


class Progress:
    """Progress events (from the session or the service) onto the terminal."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.bar = render.Progress()

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "pass_start":
            self.bar.start(event["number"], event["of"])
        elif kind == "card":
            self.bar.card(event["counted"], event["expected"])
        elif kind == "pass":
            self.bar.end()
            if not self.app.json:
                click.echo(render.pass_line(event["pass"], event["of"]))
        elif kind == "resume" and not self.app.json:
            click.echo(f"resuming hand {event['number']} at pass {event['at_pass']} of "
                       f"{event['of']}", err=True)


@cli.command("pass")
@cards_option()
@mode_option()
@click.pass_obj
def pass_cmd(app: App, cards: int | None, mode: str | None) -> None:
    """Run one pass of the loaded pack."""

    def body() -> int:
        progress = Progress(app)
        result = app.ask("pass", load=cards, on_event=progress, cards=cards, mode=mode,
                         local=lambda s: s.do_pass(cards, mode, progress))
        progress.bar.end()
        code = result.pop("exit")
        app.emit(result, render.pass_line(result["pass"]))
        if result["pass"]["fault"] and not app.json:
            click.echo(f"shuffler: {result['pass']['fault']['message']}", err=True)
        return code

    run_guarded(app, body)


@cli.command()
@click.option("--passes", type=click.IntRange(1, 30), default=None,
              help="passes in this hand, 1 to 30 (default: from the config, 4)")
@cards_option()
@mode_option()
@click.pass_obj
def hand(app: App, passes: int | None, cards: int | None, mode: str | None) -> None:
    """Run one euchre hand: N passes, then the deal moves to the left.

    A hand left unfinished (a jam, a crash, no touch) is finished first."""

    def body() -> int:
        progress = Progress(app)
        pending = pending_hand(StateStore(app.state_dir).load())  # its load goes in the tray
        result = app.ask("hand", load=pending["cards"] if pending else cards, on_event=progress,
                         passes=passes, cards=cards, mode=mode,
                         local=lambda s: s.do_hand(passes, cards, mode, progress))
        code = result.pop("exit")
        app.emit(result, render.hand_summary(result["hand"]))
        if result["hand"]["fault"] and not app.json:
            click.echo(f"shuffler: {result['hand']['fault']['message']}", err=True)
        return code

    run_guarded(app, body)


@cli.command()
@click.pass_obj
def status(app: App) -> None:
    """The device, its health, the latched fault if any, and the counters."""

    def body() -> int:
        result = app.ask("status", load=None, local=Session.status)
        app.emit(result, render.status_text(result))
        return EXIT_OK

    run_guarded(app, body)


@cli.command()
@cards_option()
@click.pass_obj
def battery(app: App, cards: int | None) -> None:
    """Battery volts and charge, and how many passes and hands it has left."""

    def body() -> int:
        result = app.ask("battery", load=cards, cards=cards, local=lambda s: s.battery(cards))
        app.emit(result, render.battery_text(result))
        return EXIT_OK

    run_guarded(app, body)


@cli.command()
@click.pass_obj
def clear(app: App) -> None:
    """Clear a latched fault once the machine reports itself clear."""

    def body() -> int:
        result = app.ask("clear", load=None, local=Session.do_clear)
        code = result.pop("exit")
        if not result["cleared"]:
            text = "the machine still reports a fault: see `shuffler status`"
        elif result["was"]:
            text = f"cleared: {result['was']['kind']}"
        else:
            text = "no fault was latched"
        app.emit(result, text)
        return code

    run_guarded(app, body)


@cli.command()
@click.option("--cards", type=click.IntRange(1, MAX_CARDS), default=None,
              help="the load the simulated device starts with")
@click.pass_obj
def serve(app: App, cards: int | None) -> None:
    """Own the machine: touch-driven passes and hands, and the control socket."""
    from shuffler.service import Service, install_signal_handlers

    def body() -> int:
        session = app.session(cards or app.config.hand.cards)
        service = Service(session, app.socket, group=app.config.service.group,
                          max_clients=app.config.service.max_clients)
        install_signal_handlers(service)
        service.run()
        return EXIT_OK

    app.use_service = False
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
