"""``shuffler-safe``'s command line: the motor, diverter and buzzer pins driven low,
nothing started (:mod:`shuffler.gpio.safe_pins` does it; systemd runs it after the
service, ``ExecStopPost=`` in docs/deploy/shuffler.service). click's, as ``shuffler``'s
is: ``-h``/``--help``, ``-V``/``--version``, each option's variable in its help, a
usage error exit 2 naming it. It imports neither the CLI's commands nor a backend."""

from __future__ import annotations

import click

EPILOG = ("The pins come from the record the service left (driven-pins.json), else the "
          "config, else the default pin map (docs/hardware.md). Exit codes: 0 done (or no "
          "GPIO pins to drive), 2 usage, 3 the pins cannot be opened.")


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from shuffler.version import describe

    click.echo(f"shuffler-safe {describe()}")
    ctx.exit()


@click.command(name="shuffler-safe", epilog=EPILOG,
               context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version,
              help="Show the version (and the commit, from a checkout or a build of one) and "
                   "exit.")
@click.option("--config", "config_path", metavar="PATH", envvar="SHUFFLER_CONFIG",
              show_envvar=True,
              help="TOML config file  [default: /etc/shuffler/config.toml, then "
                   "~/.config/shuffler/config.toml over it]")
@click.option("--device", metavar="NAME", default=None,
              help="override the config's device; only gpio has pins to drive")
@click.option("--state-dir", metavar="PATH", envvar="SHUFFLER_STATE_DIR", show_envvar=True,
              help="the state folder the service used, where it recorded its pins when no "
                   "runtime folder is set  [default: the config's]")
@click.pass_context
def safe(ctx: click.Context, config_path: str | None, device: str | None,
         state_dir: str | None) -> None:
    """Drive the shuffler's motor, diverter and buzzer pins low, without starting
    anything."""
    from shuffler.gpio.safe_pins import run

    ctx.exit(run(config_path or None, device, state_dir or None))


def main(argv: list[str] | None = None) -> None:
    safe.main(args=argv, prog_name="shuffler-safe")


if __name__ == "__main__":
    main()
