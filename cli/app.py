"""What the global options set up: the config, the device, the service, the machine's lock
(routing and composition); how every command reports and fails is cli/output.py's."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from . import options
from .options import GlobalOptions
from .output import Output, fail, use_color
from .quickstop import default_socket, service_keys

if TYPE_CHECKING:
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.session import Session
    from shuffler.device.contract import ShufflerDevice
    from shuffler.errors import ShufflerError
    from shuffler.service.client import ServiceClient
    from shuffler.store.lock import DeviceLock, MachineLock



@dataclass
class App(Output):
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
    #: the device's own lock (:class:`~shuffler.store.lock.DeviceLock`), when it has one
    device_locks: list[DeviceLock] = field(default_factory=list)
    #: the passes a command has seen end, kept for the report if it fails half-way
    pass_reports: list[dict[str, Any]] = field(default_factory=list)
    warned_sim: bool = False
    #: the config's error when it did not load for a command that asks the service first
    #: (stop, status): raised only if the command needs the config after all
    config_error: ShufflerError | None = None
    #: ``[service] user`` as written, for a config that did not load
    service_user: str | None = None
    #: how the socket was named (``--socket``, ``SHUFFLER_SOCKET``, ``[service] socket in
    #: FILE``), None when it is the default: a named socket that is missing is an error
    socket_named: str | None = None
    #: the simulator's options given (as spelled: ``--sim-fault``, ``SHUFFLER_SIM_SPEED``):
    #: for a simulator run here, refused beside a service (:meth:`service`)
    sim_given: tuple[str, ...] = ()

    @property
    def config(self) -> Config:
        """The config: read by make_app when a file exists; else the defaults, made only
        when a command needs them (one that asks a service never does). A config that did
        not load is its error here, exit 2."""
        if self.config_error is not None:
            raise self.config_error
        if self.loaded is None:
            from shuffler.config import Config

            self.loaded = Config()
        return self.loaded

    @property
    def sim(self):
        from shuffler.device.registry import SimOptions

        o = self.options
        return SimOptions(o.sim_speed, o.sim_seed, tuple(o.sim_faults), o.sim_dealer,
                          o.sim_uptime, o.sim_ignores)

    def lock(self, holder: str | None = None, *, reading: bool = False) -> None:
        """Take the machine: exit 3 naming the holder if someone else drives it. With
        ``reading`` a state folder that cannot be written is a look, not an error."""
        from shuffler.device.registry import device_identity
        from shuffler.store.lock import DeviceLock, MachineLock

        if not self.locks:
            # the holder as the next command's "busy" names it: ``shuffler score add``,
            # never a global option such as --json
            ctx, names = click.get_current_context(silent=True), []
            while ctx is not None and ctx.parent is not None:
                names.append(ctx.info_name or "?")
                ctx = ctx.parent
            lock = MachineLock(self.state_dir)
            lock.acquire(holder or " ".join(["shuffler", *reversed(names)]), reading=reading)
            self.locks.append(lock)
            # and the machine itself, whatever the state folder (a second --state-dir)
            if (identity := device_identity(self.device_name)) is not None:
                path, create = identity
                self.device_locks.append(
                    DeviceLock(path, self.device_name, create=create).acquire())

    def open(self, cards: int, *, reading: bool = False) -> ShufflerDevice:
        from shuffler.control.signals import leave_if_pending
        from shuffler.device.registry import open_device

        if self.options.sim_faults:  # a fault at a card the load lacks would never fire
            from hardware_sim.faults import parse_fault_specs
            from shuffler.errors import BadInputError

            plan = parse_fault_specs(self.options.sim_faults)
            if beyond := sorted(c for c in (*plan.jams, *plan.misfeeds, *plan.doubles)
                                if c > cards):
                raise BadInputError(f"--sim-fault: card {beyond[0]} is beyond the load of "
                                    f"{cards} cards, so that fault would never happen")
        first_run = not self.json and not self.state_dir.exists()
        leave_if_pending()  # a signal whose exit was swallowed while we imported
        self.lock(reading=reading)
        # the state folder this command uses, for what a backend keeps there (driven pins)
        config = replace(self.config, state_dir=self.state_dir)
        device = open_device(self.device_name, config, cards=cards, sim=self.sim)
        self.devices.append(device)
        leave_if_pending()
        if first_run:  # said once the machine opened: a failure stays one line naming its cause
            self.say(f"first run here: the counters, a latched fault and a hand left "
                     f"unfinished are kept in {self.state_dir} (--state-dir, or state_dir in "
                     "the config, to keep them elsewhere)")
        return device

    def controller(self, device: ShufflerDevice) -> PassController:
        from shuffler.control.controller import PassController
        from shuffler.control.signals import leave_if_pending
        from shuffler.store.state import StateStore

        controller = PassController(device, StateStore(self.state_dir), self.config.battery,
                                    self.config.hand.passes)
        verify = self.locks[0].verify if self.locks else None

        def guard() -> None:  # before every pass: a lost signal, a removed lock file
            leave_if_pending()
            if verify is not None:
                verify()

        controller.guard = guard
        if self.locks and self.locks[0].read_only:  # a look: nothing settled, nothing written
            device.stop()
            self.warn(f"the state folder {self.state_dir} cannot be written (read-only?): "
                      "showing the last state it holds; commands that must write refuse "
                      "(exit 2)")
            return controller
        settled = controller.recover()
        if settled and settled.get("interrupted"):
            self.say(f"pass {settled.get('pass', '?')} of hand {settled.get('hand', '?')} was "
                     "interrupted (recorded in the audit log); the motor is off")
        return controller

    def service(self) -> ServiceClient | None:
        """The running service; None when there is none (or told to work in-process).
        A socket that is there but cannot be used is an error, never a silent fallback;
        so is a missing one on a machine whose service drives a real device."""
        if not self.use_service:
            return None
        if self.sim_given or not something_at(self.socket):  # no service to ask
            if self.sim_given:
                self.no_service_for_sim()
            elif self.socket_named is not None:
                from shuffler.service.client import NO_SERVICE_HINT, ServiceUnreachableError

                raise ServiceUnreachableError(
                    f"{self.socket}: no such socket ({self.socket_named} names it), so no "
                    "service answers there: start the service (sudo systemctl start "
                    f"shuffler, or shuffler --socket {self.socket} serve), name the socket "
                    f"it listens on, {NO_SERVICE_HINT}", "service_not_running")
            if self.config_error is None:
                self.no_service_here()
            return None
        client = self.reach()
        if client is not None:
            self.clients.append(client)
        return client

    def reach(self) -> ServiceClient | None:
        from shuffler.service.client import ServiceClient, trusted_uids

        user = self.loaded.service.user if self.loaded is not None else self.service_user
        return ServiceClient.reach(self.socket, trusted=trusted_uids(user))

    def no_service_for_sim(self) -> None:
        """The simulator's options are for a simulator this command runs itself: beside a
        named socket or a service that answers they would never reach the machine that
        deals, so they are refused (exit 2), saying why."""
        from shuffler.service.client import ServiceUnreachableError, SimBesideServiceError

        given = " and ".join(self.sim_given)
        where, answers = None, False
        if something_at(self.socket):
            try:
                client = self.reach()
            except ServiceUnreachableError:  # none answers: nothing else deals
                client = None
            if client is not None:
                client.close()
                where, answers = f"a service answers at {self.socket}", True
        if self.socket_named is not None:
            where = f"{self.socket_named} names the service's socket {self.socket}"
        if where is not None:
            # a service that runs holds the machine's lock in its state folder: the
            # simulator here needs one of its own
            here = ("--no-service --state-dir DIR to run the simulator here in a state "
                    "folder the running service does not hold" if answers else
                    f"--no-service to run the simulator here (state in {self.state_dir})")
            raise SimBesideServiceError(
                f"{given}: for a simulator this command runs itself, but {where}, and "
                f"the service's machine would not get it: pass {here}, or give it to a "
                "service as it starts (they are options of `shuffler serve` too)")

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

    def ask(self, cmd: str, on_event: Callable[[dict[str, Any]], None] | None = None,
            **args: Any) -> dict[str, Any]:
        """The running service's answer to ``cmd``, or the same command run in-process
        (shuffler.service.machine, as the CLI may send it). A look (a command the service
        answers from its snapshot: status, battery) opens the device to read, with no
        session, so a quick look imports only what it needs; the score's commands need no
        device at all."""
        if client := self.service():
            return client.request(cmd, on_event, **args)
        from shuffler.service.machine import CLI, Machine, admit
        from shuffler.service.request import check

        request = check({"cmd": cmd, **args})
        command = admit(cmd, CLI)
        if command.score:  # the scorebook's: the state file under the lock, no device
            from shuffler.control.scorebook import ScoreBook
            from shuffler.store.state import StateStore

            self.lock()
            machine = Machine(scores=ScoreBook(StateStore(self.state_dir), self.config))
        elif command.cached:
            device = self.open(request["cards"] or self.config.hand.cards, reading=True)
            machine = Machine(look=(self.controller(device), self.config))
        else:
            machine = Machine(self.session(self.load(request)))
        emit = None if on_event is None else (lambda event: on_event(event.to_json()))
        return machine.run(request, emit, CLI).to_json()

    def load(self, request: dict[str, Any]) -> int:
        """The cards the device opened here starts with: a hand's terms (a pending hand's
        own load), else the cards asked for, else the config's."""
        if request["cmd"] == "hand":
            from shuffler.control.hand import hand_terms
            from shuffler.store.state import StateStore

            # the hand runs on them (service.machine._hand): resolved once
            request["terms"] = terms = hand_terms(StateStore(self.state_dir).load(), self.config,
                                                  request["passes"], request["cards"],
                                                  request["mode"])
            return terms.cards
        return request["cards"] or self.config.hand.cards

    def session(self, cards: int) -> Session:
        from shuffler.control.session import Session
        from shuffler.device.registry import plan_source

        device = self.open(cards)
        return Session(self.controller(device), self.config, plan_source(device, self.sim.seed))

    def close(self) -> None:
        for let_go in [*(c.close for c in self.clients), *(d.close for d in self.devices),
                       *(k.release for k in self.locks), *(k.release for k in self.device_locks)]:
            let_go()
        for held in (self.clients, self.devices, self.locks, self.device_locks):
            held.clear()

def something_at(path: Path) -> bool:
    """Whether anything is at ``path``, without loading the client: a folder on the way
    that cannot be entered counts as there, so the client says why (the group to join)."""
    try:
        os.lstat(path)
    except OSError as e:
        return not isinstance(e, (FileNotFoundError, NotADirectoryError))
    return True


def read_config(o: GlobalOptions) -> Config | None:
    """The config the options name (``--config``), else the files found (the machine's
    in /etc/shuffler, the user's over it); None when there is none. Raises its error."""
    if o.config_path is not None:
        from shuffler.config import load_config

        return load_config(o.config_path)
    from shuffler.paths import discovered_config_paths

    found = discovered_config_paths()
    if any(os.path.lexists(p) for p in found):
        from shuffler.config import load_configs

        return load_configs(found)
    return None


def make_app(ctx: click.Context, o: GlobalOptions) -> App:
    from shuffler.errors import ShufflerError
    from shuffler.files import default_state_dir
    from shuffler.logs import configure
    from shuffler.paths import discovered_config_paths

    color = use_color(o.color)
    ctx.color = color
    configure(o.verbose, o.log_json, colors=use_color(o.color, sys.stderr))
    # an explicit device is for an in-process run (the simulator's options too: they are
    # refused beside a service, App.no_service_for_sim)
    use_service = not (o.no_service or o.device_name)
    config: Config | None = None  # no file: the defaults, made when a command needs them
    config_error: ShufflerError | None = None
    found = [Path(o.config_path)] if o.config_path is not None else discovered_config_paths()
    try:
        config = read_config(o)
    except ShufflerError as e:
        # stop and status ask the service first, whatever the config on disk holds: a
        # config that does not load is a warning for them, an error only if it is needed
        if not (use_service and ctx.invoked_subcommand in ("stop", "status")):
            fail(None, e, as_json=o.as_json, log_json=o.log_json)
        config_error = e  # stop and status still reach the service
    written = service_keys(found) if config_error is not None else {}
    app = App(config, o, o.as_json, color,
              o.device_name or (config.device if config is not None else "sim"),
              Path(o.state_dir) if o.state_dir else (
                  (config.state_dir if config is not None else None) or default_state_dir()),
              Path(o.socket_path) if o.socket_path else (
                  # the config's [service] socket, as written if it does not load; else as
                  # the fast stop finds it
                  config.service.socket if config is not None and config.service.socket
                  else default_socket(written.get("socket"))),
              use_service=use_service, config_error=config_error,
              service_user=written.get("user"),
              socket_named=socket_named(ctx, o, config, found),
              sim_given=options.given(ctx, options.SIM_OPTIONS))
    if config_error is not None and not o.as_json:  # with --json stderr stays clean
        app.warn(f"the config does not load ({config_error}); asking the service at "
                 f"{app.socket} without it")
    ctx.call_on_close(app.close)
    if o.verbose >= 2:  # -vv: where everything comes from (logging loads only when asked)
        from shuffler.logs import get_logger

        get_logger("shuffler.cli").debug(
            "resolved", config=app.config.source if config_error is None else "(broken)",
            device=app.device_name,
            state=str(app.state_dir), socket=str(app.socket), service=app.use_service)
    return app


def socket_named(ctx: click.Context, o: GlobalOptions, config: Config | None,
                 found: list[Path]) -> str | None:
    """How the socket was named, if it was: ``--socket`` (or its ``SHUFFLER_SOCKET``),
    else ``[service] socket`` in the user's config (``--config``'s file, or the user's own
    under ~/.config). The machine's config (/etc/shuffler) names the deployed service's
    socket: that one missing is :meth:`App.no_service_here`'s."""
    if o.socket_path is not None:
        return options.given(ctx, ("socket_path",))[0]
    users = [p for p in found[-1:] if os.path.lexists(p)]
    if users and (config is None or config.service.socket is not None) and (
            service_keys(users).get("socket") is not None):
        return f"[service] socket in {users[0]}"
    return None
