"""How every command reports and fails: its result (JSON with --json, else text), the
dealer's lines on stderr, progress on the terminal, and the one failure shape (an error
object with --json, its exit code). The routing and the composition are cli/app.py's."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from shuffler.constants import EXIT_USAGE, SCHEMA

from . import render
from .options import GlobalOptions, wants_json

if TYPE_CHECKING:
    from shuffler.errors import ShufflerError
    from shuffler.service.client import ServiceClient


def use_color(flag: bool | None, stream: Any = None) -> bool:
    """--color/--no-color if given; else on a terminal unless NO_COLOR is set."""
    if flag is not None:
        return flag
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", None) and stream.isatty())


class Output:
    """The output half of :class:`~shuffler_cli.app.App`: what a command prints, and
    how."""

    options: GlobalOptions
    json: bool
    color: bool
    clients: list[ServiceClient]
    pass_reports: list[dict[str, Any]]
    device_name: str

    def close(self) -> None:
        """Let go of what the command opened (the App's)."""

    def emit(self, obj: dict[str, Any], text: str | None = None) -> None:
        """The command's result: JSON (checked against the command's schema when
        SHUFFLER_CHECK_SCHEMAS is set) with --json, else ``text``."""
        if self.json:  # its schema: the command's name under shuffler (score for score add)
            ctx = click.get_current_context(silent=True)
            while ctx is not None and ctx.parent is not None and ctx.parent.parent is not None:
                ctx = ctx.parent
            print_json(obj, ctx.info_name if ctx is not None and ctx.info_name else "?")
        elif text is not None:
            click.echo(text, color=self.color)

    def emit_result(self, result: dict[str, Any], key: str, text: str) -> int:
        """A pass's or a hand's result, its exit code returned. One that failed (a jam, a
        misfeed, a stall: exit 3 or 4) is, with --json, the one failure shape: ``error``
        from its fault, the passes that ran as ``pass_reports``, its report beside them."""
        code = int(result.pop("exit"))
        report = result[key]
        if key == "pass":  # as a hand's pass events are (Progress)
            self.log_pass(report)
        if code and self.json and report["fault"]:
            fault = report["fault"]
            passes = report["pass_reports"] if key == "hand" else [report]
            print_error(fault["kind"], fault["message"], code, pass_reports=passes, **result)
        else:
            self.emit(result, text)
            if report["fault"] and not self.json:
                self.warn(report["fault"]["message"])
        return code

    def log_pass(self, report: dict[str, Any]) -> None:
        """A pass the service ran and logged in its own journal: logged here too (-v)."""
        if self.clients:
            from shuffler.control.reports import pass_log

            log_line("pass", "info", **pass_log(report))

    def warn(self, message: str) -> None:
        """A line for the dealer on stderr, ``shuffler:`` in red when colour is on."""
        self.say(message, click.style("shuffler:", fg="red", bold=True))

    def say(self, message: str, head: str = "shuffler:") -> None:
        """A note on stderr, ``head`` before it (with --log-json a JSON log line: every
        line on stderr is JSON then)."""
        if self.options.log_json:
            log_line(message)
        else:
            click.echo(f"{head} {message}", err=True, color=self.color)


def log_line(message: str, level: str = "warning", **fields: Any) -> None:
    """A line for stderr as the JSON log says it (--log-json): the message its event."""
    from shuffler.logs import get_logger

    getattr(get_logger("shuffler.cli"), level)(message, **fields)


def print_json(obj: dict[str, Any], name: str) -> None:
    """``obj`` on stdout, its schema version first (checked against the schema ``name``
    when SHUFFLER_CHECK_SCHEMAS is set)."""
    out = {"schema": SCHEMA, **obj}
    if os.environ.get("SHUFFLER_CHECK_SCHEMAS"):
        from shuffler.schemas import check

        check(out, name)
    click.echo(json.dumps(out))


def print_error(kind: str, message: str, code: int, **partial: Any) -> None:
    print_json({"error": {"kind": kind, "message": message, "exit": code}, **partial}, "error")


def fail(app: Output | None, error: ShufflerError, *, as_json: bool = False,
         log_json: bool = False) -> NoReturn:
    from shuffler.errors import error_kind

    if app is not None:
        as_json, log_json = app.json, app.options.log_json
    if as_json:  # stdout only: stderr says nothing twice
        partial = {"pass_reports": app.pass_reports} if app and app.pass_reports else {}
        print_error(error_kind(error), str(error), error.exit_code, **partial)
    elif log_json:
        log_line(str(error), "error")
    elif app is not None:
        app.warn(str(error))
    else:
        click.echo(f"shuffler: {error}", err=True)
    sys.exit(error.exit_code)


def command_failure(app: Output | None, error: Exception) -> NoReturn:
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


def usage_failure(error: click.ClickException, argv: list[str]) -> NoReturn:
    """A usage error: click's message on stderr, and with --json the error on stdout."""
    if wants_json(argv):  # stdout only: stderr says nothing twice
        print_error("usage", error.format_message(), EXIT_USAGE)
    else:
        error.show()
    sys.exit(EXIT_USAGE)


class Progress:
    """Progress events (from the session or the service) onto the terminal: a one-line bar
    on stderr, drawn only on a terminal; keeps the passes that ended, so a hand stopped
    half-way still reports them."""

    def __init__(self, app: Output) -> None:
        self.app = app
        self.drawn = bool(getattr(sys.stderr, "isatty", None) and sys.stderr.isatty())
        self.label = "pass"
        self.announced = False
        self.said: set[int] = set()  # the passes whose line is out (before their prompt)

    def end(self) -> None:
        """The bar wiped."""
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "pass_start":
            self.label = f"pass {event['number']}/{event['of']}"
        elif kind == "card" and self.drawn:
            counted, expected = event["counted"], event["expected"]
            filled = 30 * counted // max(expected, 1)
            sys.stderr.write(f"\r{self.label} [{'#' * filled}{'-' * (30 - filled)}] "
                             f"{counted}/{expected}")
            sys.stderr.flush()
        elif kind == "pass":
            self.end()
            self.app.pass_reports.append(event["pass"])
            self.app.log_pass(event["pass"])
            if not self.app.json and event["pass"]["number"] not in self.said:
                click.echo(render.pass_line(event["pass"], event["of"]))
        elif kind == "stack" and not self.app.json:
            self.end()
            if (dealt := event.get("pass")) is not None:  # the pass's report, then the prompt
                self.said.add(dealt["number"])
                click.echo(render.pass_line(dealt, event["of"]))
            if not self.announced and self.app.device_name.startswith("sim"):
                self.announced = True
                click.echo("(the simulator plays the dealer: piles restacked, touched)",
                           err=True)
            # the other pile lifted first: the warning, in red as the LED flashes it
            colour = "red" if event.get("warning") else None
            click.echo(click.style(event["prompt"], bold=True, fg=colour), err=True,
                       color=self.app.color)
        elif kind == "resume" and not self.app.json:
            click.echo(f"resuming hand {event['number']} at pass {event['at_pass']} of "
                       f"{event['of']}", err=True)
