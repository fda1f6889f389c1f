"""The global options: declared once, with their ``SHUFFLER_*`` environment variables.

Kept free of our heavier modules so that ``shuffler --help`` stays quick; values
are checked here, so a bad one is exit 2 naming the option before anything opens.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from shuffler.constants import SOCKET_PATH_BYTES

#: the default --sim-speed: a 24-card hand of four passes takes about two seconds
#: (the same figure as shuffler.device.registry.DEFAULT_SIM_SPEED; a test keeps them equal)
DEFAULT_SIM_SPEED = 20.0
#: the --sim-dealer habits, as hardware_sim.dealer.DealerHabit spells them (a test checks)
SIM_DEALERS = ["instructed", "other", "both", "follows-but-last", "taller", "last-card",
               "first-card"]


@dataclass(frozen=True)
class GlobalOptions:
    device_name: str | None = None
    config_path: str | None = None
    state_dir: str | None = None
    socket_path: str | None = None
    no_service: bool = False
    as_json: bool = False
    color: bool | None = None
    verbose: int = 0
    log_json: bool = False
    sim_speed: float = DEFAULT_SIM_SPEED
    sim_seed: int | None = None
    sim_faults: tuple[str, ...] = ()
    sim_dealer: str = "instructed"
    sim_uptime: float = 0.0
    sim_ignores: bool = False


class FiniteFloat(click.ParamType):
    """A float in [lo, hi]: NaN and infinities are refused (FloatRange lets NaN through)."""

    name = "float"

    def __init__(self, lo: float, hi: float, *, min_open: bool = False) -> None:
        self.lo, self.hi, self.min_open = lo, hi, min_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        low_ok = number > self.lo if self.min_open else number >= self.lo
        if not (math.isfinite(number) and low_ok and number <= self.hi):
            above = "above" if self.min_open else "from"
            self.fail(f"{value!r} is not a number {above} {self.lo:g} to {self.hi:g}", param,
                      ctx)
        return number


class SafePath(click.ParamType):
    """A path as text: no NUL byte, not absurdly long (the OS would raise, not we)."""

    name = "path"

    def __init__(self, max_len: int = 4096) -> None:
        self.max_len = max_len

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        text = os.fspath(value)
        if "\0" in text:
            self.fail("a path cannot hold a NUL byte", param, ctx)
        if not text:
            self.fail("an empty path", param, ctx)
        if len(os.fsencode(text)) > self.max_len:
            self.fail(f"path longer than {self.max_len} bytes", param, ctx)
        return text


#: --device's help: the built-in backends (shuffler.device.registry.builtin(), from our
#: shuffler.devices entry points) as registry.usage() says them (tests/test_registry.py);
#: a backend another package registers is added when the help is shown (DeviceOption)
DEVICE_HELP = "sim (default), sim-avr, sim-gpio, sim-serial, gpio or serial:PORT"


def device_help() -> str:
    """:data:`DEVICE_HELP` and, after it, every backend another package (or a test)
    registers: only theirs are imported, and only when the help is shown."""
    from shuffler.device import registry

    extra = [b.usage for b in registry.others()]
    if not extra:
        return DEVICE_HELP
    head, _, last = DEVICE_HELP.rpartition(" or ")
    return ", ".join([head, last, *extra[:-1]]) + f" or {extra[-1]}"


class DeviceOption(click.Option):
    """``--device``: its help names the backends installed beside ours too."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = device_help()
        return super().get_help_record(ctx)


def _devices(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    from click.shell_completion import CompletionItem

    if incomplete.startswith("serial:"):  # serial:PORT: the serial ports there are
        import glob

        ports = sorted(glob.glob("/dev/tty[AUS]*") + glob.glob("/dev/shuffler*"))
        return [CompletionItem(f"serial:{p}") for p in ports if f"serial:{p}".startswith(
            incomplete)]
    from shuffler.device.registry import backends

    names = [f"{b.name}:" if b.argument else b.name for b in backends()]
    return [CompletionItem(d) for d in names if d.startswith(incomplete)]


def _option(*decls: Any, **kwargs: Any) -> Callable[..., Any]:
    """A global option, its variable SHUFFLER_ and its long name in capitals (shown)."""
    long = next(d for d in decls if d.startswith("--")).split("/")[0]
    return click.option(*decls, envvar=f"SHUFFLER_{long[2:].replace('-', '_').upper()}",
                        show_envvar=True, **kwargs)


def global_options(f: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        _option("--device", "device_name", cls=DeviceOption, metavar="NAME", default=None,
                shell_complete=_devices, help=DEVICE_HELP),
        _option("--config", "config_path", type=SafePath(), default=None,
                help="TOML config file  [default: /etc/shuffler/config.toml, then "
                     "~/.config/shuffler/config.toml over it]"),
        _option("--state-dir", type=SafePath(), default=None,
                help="where counters and latched faults are kept  "
                     "[default: $XDG_STATE_HOME/shuffler]"),
        _option("--socket", "socket_path", type=SafePath(SOCKET_PATH_BYTES), default=None,
                help="the service's socket  [default: the config's [service] socket, else "
                     "/run/shuffler/shuffler.sock when a service is installed]"),
        _option("--no-service", is_flag=True, help="drive the device in-process even if a "
                "service's socket is there (the machine's lock still applies)"),
        _option("--json", "as_json", is_flag=True, help="one JSON object on stdout (docs/json.md)"),
        _option("--color/--no-color", "color", default=None, show_default=False,
                help="colour on stdout and stderr  [default: on a terminal unless "
                     "NO_COLOR is set]"),
        _option("-v", "--verbose", count=True, help="log more (-v info, -vv debug) on stderr"),
        _option("--log-json", is_flag=True,
                help="log JSON lines on stderr: every line, its notes and errors too"),
        _option("--sim-speed", type=FiniteFloat(0.01, 1e6), default=DEFAULT_SIM_SPEED,
                help="simulated seconds per real second (1 = real time)"),
        _option("--sim-seed", type=click.IntRange(0, 2**63 - 1), default=None,
                help="seed the simulator (and its plans)"),
        _option("--sim-fault", "sim_faults", multiple=True, metavar="SPEC",
                help="inject a fault (repeatable): jam:CARD[:FREES_AFTER], "
                     "jam:CARD:stuck (the first clear still finds the card), "
                     "misfeed:CARD[:FREES_AFTER], double:CARD, battery:VOLTS, "
                     "dropout:MS (the beam clears MS ms inside every card)"),
        _option("--sim-uptime", type=FiniteFloat(0, 4e9), default=0.0,
                help="the simulated device starts as if powered this many seconds "
                     "(its clocks past their wraps: 4295 s, 4294968 s)"),
        _option("--sim-dealer", type=click.Choice(SIM_DEALERS), default="instructed",
                help="how the simulated dealer restacks: as the LED says, the other "
                     "pile on top, both piles at once, as the LED says but for the "
                     "last pass, the taller pile on top, the pile the last (or first) "
                     "card fell on"),
        _option("--sim-ignores", is_flag=True, default=False,
                help="the simulated dealer ignores the machine's warning of the other "
                     "pile lifted first, tries to go on and to keep its stack with a "
                     "long press, is refused, and corrects then "
                     "[default: it puts the pile back and lifts the right one at once]"),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


#: the simulator's options (their parameter names): for a simulator run in-process
SIM_OPTIONS = ("sim_speed", "sim_seed", "sim_faults", "sim_dealer", "sim_uptime",
               "sim_ignores")


def given(ctx: click.Context, names: tuple[str, ...]) -> tuple[str, ...]:
    """Those of the parameters ``names`` that were given, as the user spelled them: the
    option (``--sim-fault``) from the command line, its variable (``SHUFFLER_SIM_FAULT``)
    from the environment."""
    spelled: list[str] = []
    by_name = {p.name: p for p in ctx.command.params}
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is click.core.ParameterSource.COMMANDLINE:
            spelled.append(max(by_name[name].opts, key=len))
        elif source is click.core.ParameterSource.ENVIRONMENT:  # a global option's one
            spelled.append(str(by_name[name].envvar))
    return tuple(spelled)


def option_names(params: list[click.Parameter]) -> tuple[set[str], set[str]]:
    """The options among ``params``: (those taking a value, flags)."""
    takes_value: set[str] = set()
    flags: set[str] = set()
    for p in params:
        if isinstance(p, click.Option):
            (flags if p.is_flag or p.count else takes_value).update([*p.opts, *p.secondary_opts])
    return takes_value, flags


def follow_the_envvar_rule(command: str, param: click.Option) -> None:
    """A command's option reads SHUFFLER_, the command and the option's long name in
    capitals (``--new`` of ``pair``: SHUFFLER_PAIR_NEW). Where click's own name (from the
    parameter's name) differs, that one stays as an alias, with a deprecation note."""
    if param.envvar is not None or param.name is None:
        return
    longs = [o for o in param.opts if o.startswith("--")]
    if not longs:
        return
    rule = f"SHUFFLER_{command}_{longs[0][2:]}".replace("-", "_").upper()
    old = f"SHUFFLER_{command}_{param.name}".replace("-", "_").upper()
    if rule == old:
        return
    param.envvar = [rule, old]
    if os.environ.get(old) is not None and os.environ.get(rule) is None:
        click.echo(f"shuffler: {old} is deprecated: set {rule} instead", err=True)


def wants_json(argv: list[str]) -> bool:
    args = argv[: argv.index("--")] if "--" in argv else argv
    env = os.environ.get("SHUFFLER_JSON", "").lower()
    return "--json" in args or env in ("1", "true", "yes", "on", "t", "y")
