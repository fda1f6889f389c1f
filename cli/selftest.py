"""``shuffler selftest``: bring a freshly wired machine up, part by part."""

from __future__ import annotations

from typing import Any

import click

from .app import EXIT_OK, App, run_guarded

STEPS = ("touch", "tray", "pile_left", "pile_right", "beam", "motor", "flap", "light",
         "buzzer", "battery")
EXIT_FAULT = 3


class Person:
    """The builder at a terminal: instructions on stderr, answers from the keyboard."""

    can_act = True

    def act(self, action: str, text: str) -> None:
        click.echo(f"  {text}", err=True)

    def ask(self, question: str, text: str, choices: dict[str, str]) -> str | None:
        keys = "/".join(choices) + "/s"
        listing = ", ".join(f"{k}: {v}" for k, v in choices.items())
        answer = click.prompt(f"  {text} ({listing}, s: skip)", type=click.Choice(
            [*choices, "s"]), show_choices=False, err=True, prompt_suffix=f" [{keys}] ")
        return None if answer == "s" else answer

    def measure(self, question: str, text: str) -> float | None:
        while True:
            raw = click.prompt(f"  {text}", default="", show_default=False, err=True).strip()
            if not raw:
                return None
            try:
                volts = float(raw.removesuffix("V").strip())
            except ValueError:
                volts = -1.0
            if 3.0 <= volts <= 12.0:
                return volts
            click.echo("  a 9 V block reads between 3 and 12 V: type the volts, e.g. 9.12",
                       err=True)


class Nobody:
    """``--yes`` on a real machine: nobody is at the bench to act or answer."""

    can_act = False

    def act(self, action: str, text: str) -> None:
        pass

    def ask(self, question: str, text: str, choices: dict[str, str]) -> str | None:
        return None

    def measure(self, question: str, text: str) -> float | None:
        return None


def step_line(step: dict[str, Any], color: bool) -> str:
    mark = {"pass": ("ok", "green"), "fail": ("FAIL", "red"), "skip": ("skip", "yellow")}
    word, fg = mark[step["outcome"]]
    line = f"{click.style(f'{word:>4}', fg=fg, bold=True) if color else f'{word:>4}'} " \
           f"{step['step']:<10} {step['part']}: {step['detail']}"
    if step["check"]:
        line += f"\n{'':15}check: {step['check']}"
    return line


@click.command()
@click.option("--yes", "unattended", is_flag=True,
              help="no questions: on sim-gpio the rig plays the builder; on a real machine "
                   "the steps that need hands are skipped")
@click.option("--skip", "skip", multiple=True, type=click.Choice(STEPS), metavar="STEP",
              help=f"leave a step out (repeatable): {', '.join(STEPS)}")
@click.option("--timeout", type=click.FloatRange(0.2, 600), default=20.0, show_default=True,
              help="seconds to wait for each thing the builder is asked to do")
@click.option("--sim-miswire", "miswire", default=None, metavar="NAME",
              help="sim-gpio only: wire the rig wrong (piles_swapped, dead_beam, "
                   "motor_reversed, ...) to see the self-test find it")
@click.pass_obj
def selftest(app: App, unattended: bool, skip: tuple[str, ...], timeout: float,
             miswire: str | None) -> None:
    """Bring a freshly wired machine up, one part at a time.

    It asks you to touch the sensor, cover and uncover the tray and each pile sensor and
    pass a card through the beam; it runs the motor forward and back for half a second,
    throws the flap left and right, shows each colour, sounds the buzzer and reads the
    battery. Given a multimeter reading it writes the battery divider's calibration to
    the config file. Each step passes, fails with what to check, or is skipped.

    \b
    Examples:
      shuffler --device gpio selftest
      shuffler --device sim-gpio selftest --yes --json
      shuffler --device sim-gpio selftest --yes --sim-miswire piles_swapped
    """
    from shuffler.errors import BadInputError
    from shuffler.selftest import GpioBench, SelfTest

    def body() -> int:
        if app.device_name not in ("gpio", "sim-gpio"):
            raise BadInputError(f"selftest drives GPIO pins: use --device gpio (or sim-gpio), "
                                f"not {app.device_name}")
        if miswire is not None and app.device_name != "sim-gpio":
            raise BadInputError("--sim-miswire applies only to --device sim-gpio")
        app.use_service = False
        device = app.open(app.config.hand.cards)
        rig = getattr(device, "rig", None)
        builder: Any = Nobody() if unattended else Person()
        if rig is not None:
            from hardware_sim.bench import MISWIRES, RigBuilder
            from hardware_sim.bench import miswire as rewire

            if miswire is not None:
                if miswire not in MISWIRES:
                    raise BadInputError(f"--sim-miswire: unknown {miswire!r}; one of "
                                        f"{', '.join(MISWIRES)}")
                rewire(rig, miswire)
            if unattended:
                builder = RigBuilder(rig)
        test = SelfTest(GpioBench(device), builder, timeout=min(timeout, 2.0) if rig and
                        unattended else timeout, skip=skip)
        if not app.json:
            click.echo("selftest: each step says what to do; answer s to skip a question",
                       err=True)
        report = test.run(on_step=None if app.json else lambda r: click.echo(
            step_line(r.to_dict(), app.color)))
        written = write_calibration(app, report.divider_ratio, simulated=rig is not None)
        result = {"selftest": report.to_dict(), "written_to": written}
        summary = ("selftest: every step passed" if report.passed else
                   f"selftest: {len(report.failed())} step(s) failed: "
                   f"{', '.join(s.part for s in report.failed())}")
        if written:
            summary += f"\ndivider_ratio = {report.divider_ratio:.4f} written to {written}"
        app.emit(result, summary)
        return EXIT_OK if report.passed else EXIT_FAULT

    run_guarded(app, body)


def write_calibration(app: App, ratio: float | None, *, simulated: bool) -> str | None:
    """Write ``[gpio] divider_ratio`` into the config file, checked before it replaces the
    old one. A simulated machine writes only to a config named with --config."""
    if ratio is None:
        return None
    from pathlib import Path

    from shuffler.config import default_config_path, load_config_text
    from shuffler.files import read_limited, write_file
    from shuffler.selftest import set_divider_ratio

    named = app.options.config_path
    if named is None and simulated:
        return None
    path = default_config_path() if named is None else Path(named)
    old = read_limited(path, "config file")
    new = set_divider_ratio(old.decode("utf-8", "replace") if old else "", ratio)
    load_config_text(new, str(path))  # never write a config that would not load
    write_file(path, new.encode(), "config file")
    return str(path)
