"""What the global options set up, and how every command reports and fails."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from .options import GlobalOptions, wants_json

if TYPE_CHECKING:
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.session import Session
    from shuffler.device.contract import ShufflerDevice
    from shuffler.errors import ShufflerError
    from shuffler.service.client import ServiceClient
    from shuffler.store.lock import MachineLock

#: the version of every JSON object we print (docs/json.md); bump on a breaking change
SCHEMA = 1
EXIT_OK, EXIT_BUG, EXIT_USAGE = 0, 1, 2


def use_color(flag: bool | None, stream: Any = None) -> bool:
    """--color/--no-color if given; else on a terminal unless NO_COLOR is set."""
    if flag is not None:
        return flag
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", None) and stream.isatty())


@dataclass
class App:
    """The global options, resolved; commands reach the machine through it."""

    #: the config read from its files; None when there is none (see :attr:`config`)
    loaded: Config | None
    options: GlobalOptions
    json: bool
    color: bool
    device_name: str
    state_dir: Path
    socket: Path
    use_service: bool = True
    devices: list[ShufflerDevice] = field(default_factory=list)
    clients: list[ServiceClient] = field(default_factory=list)
    locks: list[MachineLock] = field(default_factory=list)
    #: the passes a command has seen end, kept for the report if it fails half-way
    pass_reports: list[dict[str, Any]] = field(default_factory=list)
    warned_sim: bool = False

    @property
    def config(self) -> Config:
        """The config: read by make_app when a file exists; else the defaults, made only
        when a command needs them (one that asks a service never does)."""
        if self.loaded is None:
            from shuffler.config import Config

            self.loaded = Config()
        return self.loaded

    @property
    def sim(self):
        from shuffler.backends import SimOptions

        o = self.options
        return SimOptions(o.sim_speed, o.sim_seed, tuple(o.sim_faults), o.sim_dealer,
                          o.sim_uptime)

    def lock(self, holder: str | None = None, *, reading: bool = False) -> None:
        """Take the machine: exit 3 naming the holder if someone else drives it. With
        ``reading`` a state folder that cannot be written is a look, not an error."""
        from shuffler.store.lock import MachineLock

        if not self.locks:
            lock = MachineLock(self.state_dir)
            lock.acquire(holder or command_path(), reading=reading)
            self.locks.append(lock)

    @property
    def read_only(self) -> bool:
        """The state folder cannot be written: this command only looks."""
        return bool(self.locks) and self.locks[0].read_only

    def open(self, cards: int, *, reading: bool = False) -> ShufflerDevice:
        from shuffler.backends import open_device
        from shuffler.control.signals import leave_if_pending

        self.check_fault_specs(cards)
        first_run = not self.json and not self.state_dir.exists()
        leave_if_pending()  # a signal whose exit was swallowed while we imported
        self.lock(reading=reading)
        device = open_device(self.device_name, self.config, cards=cards, sim=self.sim)
        self.devices.append(device)
        leave_if_pending()
        if first_run:  # said once the machine opened: a failure stays one line naming its cause
            click.echo(f"shuffler: first run here: the counters, a latched fault and a hand "
                       f"left unfinished are kept in {self.state_dir} (--state-dir, or "
                       "state_dir in the config, to keep them elsewhere)", err=True)
        return device

    def check_fault_specs(self, cards: int) -> None:
        """--sim-fault at a card the load does not have would never fire: refuse it."""
        if not self.options.sim_faults:
            return
        from hardware_sim.faults import parse_fault_specs
        from shuffler.errors import BadInputError

        plan = parse_fault_specs(self.options.sim_faults)
        beyond = sorted(c for c in (*plan.jams, *plan.misfeeds, *plan.doubles) if c > cards)
        if beyond:
            raise BadInputError(f"--sim-fault: card {beyond[0]} is beyond the load of {cards} "
                                "cards, so that fault would never happen")

    def controller(self, device: ShufflerDevice) -> PassController:
        from shuffler.control.controller import PassController
        from shuffler.store.state import StateStore

        controller = PassController(device, StateStore(self.state_dir), self.config.battery,
                                    self.config.hand.passes)
        from shuffler.control.signals import leave_if_pending

        verify = self.locks[0].verify if self.locks else None

        def guard() -> None:  # before every pass: a lost signal, a removed lock file
            leave_if_pending()
            if verify is not None:
                verify()

        controller.guard = guard
        if self.read_only:  # a look only: nothing is settled, nothing written
            device.stop()
            self.warn(f"the state folder {self.state_dir} cannot be written (read-only?): "
                      "showing the last state it holds; commands that must write refuse "
                      "(exit 2)")
            return controller
        settled = controller.recover()
        if settled and settled.get("interrupted"):
            click.echo(f"shuffler: pass {settled.get('pass', '?')} of hand "
                       f"{settled.get('hand', '?')} was interrupted (recorded in the audit "
                       "log); the motor is off", err=True)
        return controller

    def service(self) -> ServiceClient | None:
        """The running service; None when there is none (or told to work in-process).
        A socket that is there but cannot be used is an error, never a silent fallback;
        so is a missing one on a machine whose service drives a real device."""
        if not self.use_service:
            return None
        if not os.path.lexists(self.socket):  # no socket: no service
            self.no_service_here()
            return None
        from shuffler.service.client import ServiceClient, trusted_uids

        user = self.loaded.service.user if self.loaded is not None else None
        client = ServiceClient.reach(self.socket, trusted=trusted_uids(user))
        if client is not None:
            self.clients.append(client)
        return client

    def no_service_here(self) -> None:
        """No service answers: on a machine with one installed, a real device is the
        service's to drive (exit 3, saying so), and the simulator is named on stderr."""
        from shuffler.paths import service_installed

        if not service_installed():
            return
        if not self.device_name.startswith("sim"):
            from shuffler.service.client import ServiceUnreachableError

            raise ServiceUnreachableError(
                f"cannot reach the service at {self.socket}: no socket there, so the "
                f"{self.device_name} machine's service is not running: start it (sudo "
                "systemctl start shuffler; `journalctl -u shuffler` says why it stopped), "
                "name its socket with --socket, or pass --no-service to drive the device "
                "from this command", "service_not_running")
        if not self.warned_sim:
            self.warned_sim = True
            self.warn(f"no service answers at {self.socket}: running the simulator here, "
                      f"state in {self.state_dir}")

    def ask(self, cmd: str, *, load: int | None, local: Callable[[Session], dict[str, Any]],
            on_event: Callable[[dict[str, Any]], None] | None = None,
            **args: Any) -> dict[str, Any]:
        """The running service's answer to ``cmd``, or ``local(session)`` in-process on a
        device loaded with ``load`` cards (the configured load if None)."""
        if client := self.service():
            return client.request(cmd, on_event, **args)
        return local(self.session(load or self.config.hand.cards))

    def read(self, cmd: str, local: Callable[[PassController, Config], dict[str, Any]], *,
             load: int | None = None, **args: Any) -> dict[str, Any]:
        """A query that moves nothing (status, battery): the service's answer, or
        ``local(controller, config)`` on the device opened here without a whole session,
        so a quick look imports only what it needs."""
        if client := self.service():
            return client.request(cmd, None, **args)
        device = self.open(load or self.config.hand.cards, reading=True)
        return local(self.controller(device), self.config)

    def session(self, cards: int) -> Session:
        from shuffler.backends import plan_source
        from shuffler.control.session import Session

        device = self.open(cards)
        return Session(self.controller(device), self.config, plan_source(device, self.sim.seed))

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for device in self.devices:
            device.close()
        for lock in self.locks:
            lock.release()
        self.clients.clear()
        self.devices.clear()
        self.locks.clear()

    def emit(self, obj: dict[str, Any], text: str | None = None) -> None:
        """The command's result: JSON (checked against the command's schema when
        SHUFFLER_CHECK_SCHEMAS is set) with --json, else ``text``."""
        if self.json:
            out = {"schema": SCHEMA, **obj}
            check_json(out, top_command())
            click.echo(json.dumps(out))
        elif text is not None:
            click.echo(text, color=self.color)

    def emit_result(self, result: dict[str, Any], key: str, text: str) -> int:
        """A pass's or a hand's result, its exit code returned. One that failed (a jam, a
        misfeed, a stall: exit 3 or 4) is, with --json, the one failure shape: ``error``
        from its fault, the passes that ran as ``pass_reports``, its report beside them."""
        code = int(result.pop("exit"))
        report = result[key]
        if code and self.json and report["fault"]:
            fault = report["fault"]
            passes = report["pass_reports"] if key == "hand" else [report]
            click.echo(json.dumps(error_object(fault["kind"], fault["message"], code,
                                               pass_reports=passes, **result)))
        else:
            self.emit(result, text)
            if report["fault"] and not self.json:
                self.warn(report["fault"]["message"])
        return code

    def warn(self, message: str) -> None:
        """A line for the dealer on stderr, ``shuffler:`` in red when colour is on."""
        click.echo(click.style("shuffler:", fg="red", bold=True) + " " + message, err=True,
                   color=self.color)


def top_command() -> str:
    """The name of the command running under ``shuffler`` (``score`` for ``score add``):
    its JSON schema's name."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None and ctx.parent is not None and ctx.parent.parent is not None:
        ctx = ctx.parent
    return ctx.info_name if ctx is not None and ctx.info_name else "?"


def command_path() -> str:
    """The command running, as the next one's "busy" message names it: ``shuffler hand``,
    ``shuffler score add`` (never a global option such as ``--json``)."""
    ctx = click.get_current_context(silent=True)
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name or "?")
        ctx = ctx.parent
    return " ".join(["shuffler", *reversed(names)])


def check_json(obj: dict[str, Any], name: str) -> None:
    if os.environ.get("SHUFFLER_CHECK_SCHEMAS"):
        from shuffler.schemas import check

        check(obj, name)


def error_object(kind: str, message: str, code: int, **partial: Any) -> dict[str, Any]:
    obj = {"schema": SCHEMA, "error": {"kind": kind, "message": message, "exit": code},
           **partial}
    check_json(obj, "error")
    return obj


def fail(app: App | None, error: ShufflerError, *, as_json: bool = False) -> NoReturn:
    from shuffler.errors import error_kind

    code = error.exit_code
    if (app is not None and app.json) or as_json:  # stdout only: stderr says nothing twice
        partial = {"pass_reports": app.pass_reports} if app and app.pass_reports else {}
        click.echo(json.dumps(error_object(error_kind(error), str(error), code, **partial)))
    elif app is not None:
        app.warn(str(error))
    else:
        click.echo(f"shuffler: {error}", err=True)
    sys.exit(code)


def command_failure(app: App | None, error: Exception) -> NoReturn:
    """A command raised: a ShufflerError is its message and exit code; a file or folder
    that cannot be used is exit 2 naming it; anything else is a bug and propagates."""
    from shuffler.errors import BadInputError, ShufflerError

    if app is not None:
        app.close()
    if isinstance(error, ShufflerError):
        fail(app, error)
    if isinstance(error, OSError) and not isinstance(error, BrokenPipeError):
        where = f"{error.filename}: " if error.filename else ""
        fail(app, BadInputError(f"{where}{error.strerror or error}"))
    raise error


def run_guarded(app: App, body: Callable[[], int | None]) -> NoReturn:
    """Run a command's body and exit with its code."""
    try:
        code = body()
    except Exception as e:
        command_failure(app, e)
    sys.exit(code or EXIT_OK)


def usage_failure(error: click.ClickException, argv: list[str]) -> NoReturn:
    """A usage error: click's message on stderr, and with --json the error on stdout."""
    if wants_json(argv):  # stdout only: stderr says nothing twice
        click.echo(json.dumps(error_object("usage", error.format_message(), EXIT_USAGE)))
    else:
        error.show()
    sys.exit(EXIT_USAGE)


def make_app(ctx: click.Context, o: GlobalOptions) -> App:
    from shuffler.errors import ShufflerError
    from shuffler.files import default_state_dir
    from shuffler.logs import configure
    from shuffler.paths import discovered_config_paths

    color = use_color(o.color)
    ctx.color = color
    configure(o.verbose, o.log_json, colors=use_color(o.color, sys.stderr))
    config: Config | None = None  # no file: the defaults, made when a command needs them
    found = discovered_config_paths()
    try:
        if o.config_path is not None:
            from shuffler.config import load_config

            config = load_config(o.config_path)
        elif any(os.path.lexists(p) for p in found):
            from shuffler.config import load_configs

            config = load_configs(found)  # the machine's (/etc/shuffler), the user's over it
    except ShufflerError as e:
        fail(None, e, as_json=o.as_json)
    sim_given = (o.sim_seed is not None or bool(o.sim_faults) or o.sim_dealer != "instructed"
                 or o.sim_uptime > 0)
    app = App(config, o, o.as_json, color,
              o.device_name or (config.device if config is not None else "sim"),
              Path(o.state_dir) if o.state_dir else (
                  (config.state_dir if config is not None else None) or default_state_dir()),
              Path(o.socket_path) if o.socket_path else client_socket(config),
              # simulator options and an explicit device are for an in-process run
              use_service=not (o.no_service or sim_given or o.device_name))
    ctx.call_on_close(app.close)
    if o.verbose >= 2:  # -vv: where everything comes from (logging loads only when asked)
        from shuffler.logs import get_logger

        get_logger("shuffler.cli").debug(
            "resolved", config=app.config.source, device=app.device_name,
            state=str(app.state_dir), socket=str(app.socket), service=app.use_service)
    return app


def client_socket(config: Config | None) -> Path:
    """Where a command asks the service, given no --socket: the config's ``[service]
    socket``, else the deployed service's (/run/shuffler/shuffler.sock) when it is there or
    a service is installed, else the user's own service's."""
    from shuffler.paths import default_socket_path, service_installed, service_socket_path

    if config is not None and config.service.socket is not None:
        return config.service.socket
    deployed = service_socket_path()
    if os.path.lexists(deployed) or service_installed():
        return deployed
    return default_socket_path()


class Progress:
    """Progress events (from the session or the service) onto the terminal; keeps the
    passes that ended, so a hand stopped half-way still reports them."""

    def __init__(self, app: App) -> None:
        from . import render

        self.app = app
        self.render = render
        self.bar = render.Progress()
        self.announced = False

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "pass_start":
            self.bar.start(event["number"], event["of"])
        elif kind == "card":
            self.bar.card(event["counted"], event["expected"])
        elif kind == "pass":
            self.bar.end()
            self.app.pass_reports.append(event["pass"])
            if not self.app.json:
                click.echo(self.render.pass_line(event["pass"], event["of"]))
        elif kind == "stack" and not self.app.json:
            self.bar.end()
            if not self.announced and self.app.device_name.startswith("sim"):
                self.announced = True
                click.echo("(the simulator plays the dealer: piles restacked, touched)",
                           err=True)
            click.echo(click.style(event["prompt"], bold=True), err=True, color=self.app.color)
        elif kind == "resume" and not self.app.json:
            click.echo(f"resuming hand {event['number']} at pass {event['at_pass']} of "
                       f"{event['of']}", err=True)
