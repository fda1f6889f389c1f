"""``shuffler``: run passes and hands from the dealer's seat.

When a service (``shuffler serve``) answers on its socket, the commands ask it;
otherwise they open the device in-process, holding the machine's lock. The output
is the same either way. The exit codes: README, "Exit codes" (shuffler/constants.py).

This module stays light: ``shuffler --help`` imports click and nothing of ours
beyond it. A command's module is imported only when that command runs (see
:data:`COMMANDS`), so adding a command is one line there.
"""

from __future__ import annotations

import sys
from importlib import import_module
from itertools import islice
from typing import Any

import click

from . import options

#: every command, in the order a dealer meets them: name -> ("module:function", its
#: one-line summary for ``shuffler --help``, so listing the commands imports none)
COMMANDS: dict[str, tuple[str, str]] = {
    "hand": ("commands:hand", "Run one euchre hand: N passes, then the deal moves left."),
    "pass": ("commands:pass_cmd", "Run one pass of the loaded pack."),
    "status": ("commands:status",
               "The device, its health, the latched fault, battery and counters."),
    "battery": ("commands:battery", "Battery volts and charge; passes and hands left."),
    "clear": ("commands:clear", "Clear a latched fault once the machine is clear."),
    "stop": ("commands:stop", "Stop the service's pass or hand: the motor off at once."),
    "score": ("table:score", "The euchre score: show it, enter a hand, undo, a new game."),
    "serve": ("commands:serve", "Own the machine: touch-driven hands, the socket, the page, MQTT."),
    "pair": ("table:pair", "The code a phone enters to act from the dealer's page."),
    "tables": ("table:tables", "Every table on the MQTT broker, problems first."),
    "mixing": ("study:mixing", "How far from random the pack is after each pass."),
    "simulate": ("study:simulate", "Many hands through the simulator, tested against random."),
    "selftest": ("selftest:selftest", "Bring a freshly wired machine up, part by part."),
}

EPILOG = """\b
Examples:
  shuffler hand                      a hand of the configured passes
  shuffler --sim-fault jam:13 pass   a pass that jams at card 13 (simulator)
  shuffler status --json             the machine's state for a script

Every option can also be set in the environment: SHUFFLER_ and its name in capitals
(SHUFFLER_DEVICE=sim-gpio, SHUFFLER_JSON=1; a command's own: SHUFFLER_HAND_PASSES=5).
NO_COLOR=1 turns colour off. Shell completion: eval "$(_SHUFFLER_COMPLETE=bash_source
shuffler)" (zsh_source, fish_source). Exit codes: 0 done, 1 a bug, 2 usage or bad
input, 3 device fault or busy, 4 low battery. JSON: docs/json.md."""


class LazyGroup(click.Group):
    """Commands imported on first use; global options accepted after the command too."""

    def __init__(self, *args: Any, commands_map: dict[str, tuple[str, str]],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands_map = commands_map
        self.json_wanted = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands_map) + [c for c in self.commands if c not in self.commands_map]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name not in self.commands_map:
            return None
        module, _, attr = self.commands_map[cmd_name][0].partition(":")
        command = getattr(import_module(f"{__package__}.{module}"), attr)
        for param in command.params:  # every option's SHUFFLER_* variable is in its --help
            if isinstance(param, click.Option):
                param.show_envvar = True
                options.follow_the_envvar_rule(cmd_name, param)
        self.commands[cmd_name] = command
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        """click's, plus "did you mean" for a mistyped command (hnad: hand)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            import difflib

            close = difflib.get_close_matches(name.lower(), self.list_commands(ctx), n=2,
                                              cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise click.UsageError(f"No such command {name!r}.{hint} (shuffler --help lists "
                                   "them)", ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # the summaries from COMMANDS, so the help imports no command module
        rows = [(name, self.commands_map.get(name, ("", ""))[1])
                for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        """Like click's, except that a usage error with --json is also JSON on stdout."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        argv = list(args) if args is not None else sys.argv[1:]
        self.json_wanted = options.wants_json(argv)  # for --version, read before --json is
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except click.ClickException as e:
            from .output import usage_failure

            usage_failure(e, argv)
        except click.Abort:
            sys.exit(interrupted())
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.Abort):
            raise
        except Exception as e:  # every command: our errors and bad paths, never a traceback
            from .output import command_failure

            command_failure(ctx.obj, e)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self.hoist_global_options(ctx, args))

    def hoist_global_options(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Move global options written after the command name (with their values) in front
        of it; the command's own stay in order, and everything after ``--`` is its own."""
        takes_value, flags = options.option_names(self.params)
        flags -= {"-h", "--help"}  # after the command, --help is the command's own
        i = 0  # the command's name: past the global options (and their values) before it
        while i < len(args) and args[i].startswith("-") and args[i] not in ("-", "--"):
            i += 2 if args[i] in takes_value else 1
        if i >= len(args) or args[i] == "--":
            return args
        name, rest = args[i], iter(args[i + 1:])
        command = self.get_command(ctx, name) if name in self.commands_map else None
        own_value = options.option_names(command.params)[0] if command is not None else set()
        global_value = takes_value - own_value
        moved: list[str] = []
        kept: list[str] = []
        for tok in rest:
            if tok == "--":
                kept += [tok, *rest]
                break
            key = tok.split("=", 1)[0] if tok.startswith("--") else tok
            verbose = key.startswith("-") and set(key[1:]) == {"v"}  # -v, -vv, -vvvvv
            hoist = key in global_value or (key not in own_value and (key in flags or verbose))
            out = moved if hoist else kept
            out.append(tok)
            if "=" not in tok and key in (global_value if hoist else own_value):
                out.extend(islice(rest, 1))  # its value
        return args[:i] + moved + [name] + kept


def _print_version(ctx: click.Context, value: bool) -> None:
    """The release, and the commit where it is known (shuffler/version.py: only here
    does the CLI ask git or read .git)."""
    if not value or ctx.resilient_parsing:
        return
    from shuffler import version

    if getattr(ctx.command, "json_wanted", False):
        from .output import print_json

        print_json(version.as_json(), "version")
    else:
        click.echo(f"shuffler {version.describe()}")
    ctx.exit()


@click.group(cls=LazyGroup, commands_map=COMMANDS, epilog=EPILOG,
             context_settings={"help_option_names": ["-h", "--help"],
                               "auto_envvar_prefix": "SHUFFLER", "show_default": True})
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, param, value: _print_version(ctx, value),
              help="Show the version (and the commit, from a checkout or a build of one) and exit "
                   "(with --json: {\"schema\": 1, \"version\": ...}).")
@options.global_options
@click.pass_context
def cli(ctx: click.Context, **given: Any) -> None:
    """Drive a two-pile card shuffler; the simulated one unless told otherwise."""
    from .app import make_app

    ctx.obj = make_app(ctx, options.GlobalOptions(**given))


def interrupted() -> int:
    """Ctrl-C: said, and its exit code."""
    click.echo("shuffler: interrupted; the motor is off", err=True)
    return 130


def main(argv: list[str] | None = None) -> None:
    from shuffler.control.signals import install

    from .streams import finish, guard

    out, err = guard()  # a full or closed stdout/stderr: a clean exit (cli/streams.py)
    code: Any = 0
    try:
        # every terminal signal: motor off on the way out (shuffler/control/signals.py);
        # inside the try, as one landing while it installs raises at once
        install()
        cli.main(args=argv, prog_name="shuffler")
    except (KeyboardInterrupt, SystemExit, RuntimeError) as e:
        # Python 3.11 wraps what a handler raised in __set_name__ in a RuntimeError
        cause = e.__cause__ if isinstance(e, RuntimeError) else e
        if isinstance(cause, KeyboardInterrupt):
            code = interrupted()
        elif isinstance(cause, SystemExit):
            code = cause.code
        else:
            raise
    finish(code if isinstance(code, int) else (0 if code is None else 1), out, err)
