"""The ``shuffler-setup`` command line (docs/deploy/README.md, "Install"); its exit codes
are :data:`EPILOG`'s, as ``--help`` says them."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import click

from shuffler.constants import EXIT_BUG, EXIT_OK, EXIT_SYSTEM, EXIT_USAGE
from shuffler.paths import SYSTEM_ROOT_ENV

from .system import System

EPILOG = ("Exit codes: 0 done or nothing to change; 2 bad input (the config, a backup, "
          "not root); 3 the system refused (a command failed, the service runs); status: 3 "
          "when something differs from the install. --root (or SHUFFLER_SYSTEM_ROOT) works "
          "on a tree: an image's, or a test's.")


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"shuffler-setup: {message}", err=True)
    sys.exit(code)


def done(line: str) -> int:
    click.echo(line)
    return EXIT_OK


def guarded(body: Callable[[], int], *, as_root: bool = True) -> NoReturn:
    """Run ``body``: every failure one line on stderr and its exit code, never a
    traceback."""
    from shuffler.errors import ShufflerError

    if as_root and os.geteuid() != 0:
        fail("run it as root: sudo shuffler-setup " + " ".join(sys.argv[1:]), EXIT_USAGE)
    try:
        code = body()
    except ShufflerError as e:
        fail(str(e), e.exit_code)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        fail(f"{where}{e.strerror or e}; nothing after this was done (run it again once "
             f"fixed: it finishes what it started)", EXIT_SYSTEM)
    except Exception as e:  # a bug: one line, not a traceback
        fail(f"internal error: {type(e).__name__}: {e}", EXIT_BUG)
    sys.exit(code)


@click.group(epilog=EPILOG)
@click.option("--root", type=click.Path(file_okay=False, path_type=Path),
              envvar=SYSTEM_ROOT_ENV, default=Path("/"), show_default=True,
              help="the system to work on (env SHUFFLER_SYSTEM_ROOT)")
@click.version_option(package_name="shuffler", prog_name="shuffler-setup")
@click.pass_context
def setup(ctx: click.Context, root: Path) -> None:
    """Install, upgrade or remove the shuffler service on this machine."""
    ctx.obj = System(root.resolve())


@setup.command(epilog=EPILOG)
@click.pass_obj
def install(system: System) -> None:
    """The account and groups, udev rules, unit, the drop-ins the config calls for, SPI,
    the config (if absent) and the state folder; run it again after changing [web] or
    [mqtt] in the config. Twice: nothing to change."""
    from .apply import Installer

    guarded(lambda: Installer(system, click.echo).install())


@setup.command(epilog=EPILOG)
@click.pass_obj
def upgrade(system: System) -> None:
    """After `pip install` of a new version: the package's unit, rules and drop-ins put in
    place (an edited one replaced), the config and the state kept, the service started."""
    from .apply import Installer

    guarded(lambda: Installer(system, click.echo).install(upgrade=True))


@setup.command(epilog=EPILOG)
@click.option("--purge", is_flag=True, help="also the config and the state folder")
@click.pass_obj
def uninstall(system: System, purge: bool) -> None:
    """Stop the service and remove exactly what install made (drop-ins of your own stay);
    the config and /var/lib/shuffler are kept unless --purge."""
    from .apply import Installer

    guarded(lambda: Installer(system, click.echo).uninstall(purge=purge))


@setup.command(epilog=EPILOG)
@click.pass_obj
def status(system: System) -> None:
    """What install made and how it is now (ok, edited, missing, out of date), what the
    config calls for that is missing, and the unit's state."""
    from .status import status as report

    guarded(lambda: report(system, click.echo), as_root=False)


@setup.command(epilog=EPILOG)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def backup(system: System, file: Path) -> None:
    """The state folder (score, pairings, battery history, counters, audit) to FILE, a
    tar with a checksummed index."""
    from .backup import backup as save

    guarded(lambda: done(f"backed up {len(save(system, file))} file(s) to {file}"))


@setup.command(epilog=EPILOG)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def restore(system: System, file: Path) -> None:
    """The state folder from FILE, with the service stopped: the whole file is checked
    first, and the folder is swapped at once (never half-written)."""
    from .backup import restore as load

    guarded(lambda: done(f"restored {len(load(system, file))} file(s) from {file}; start "
                         "the service: sudo systemctl start shuffler"))


def main() -> None:
    try:
        setup.main(standalone_mode=False)  # --help and --version return: exit 0
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt):
        fail("interrupted: run it again, it finishes what it started", 130)
