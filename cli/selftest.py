"""``shuffler selftest``: bring a freshly wired machine up, part by part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from shuffler.constants import EXIT_FAULT, EXIT_OK
from shuffler.limits import TYPED_READING_MAX_VOLTS, TYPED_READING_MIN_VOLTS

from .app import App

STEPS = ("battery", "touch", "tray", "pile_left", "pile_right", "beam", "light", "buzzer",
         "motor", "flap")


class Person:
    """The builder at a terminal: instructions on stderr, answers from the keyboard."""

    can_act = True

    def act(self, action: str, text: str) -> None:
        click.echo(f"  {text}", err=True)

    def confirm(self, question: str, text: str) -> bool:
        return self.ask(question, text, {"y": "run it"}) == "y"

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
            if TYPED_READING_MIN_VOLTS <= volts <= TYPED_READING_MAX_VOLTS:
                return volts  # above the driver's limit the battery step fails, naming it
            click.echo(f"  the 9 V side reads between {TYPED_READING_MIN_VOLTS:g} and "
                       f"{TYPED_READING_MAX_VOLTS:g} V: type the volts, e.g. 9.12", err=True)


class Nobody:
    """``--yes`` on a real machine: nobody is at the bench to act or answer."""

    can_act = False

    def act(self, action: str, text: str) -> None:
        pass

    def confirm(self, question: str, text: str) -> bool:
        return False  # nothing moves with nobody there

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


#: where a deployed machine keeps its config and its state (docs/deploy/shuffler.service)
SYSTEM_CONFIG = "/etc/shuffler/config.toml"
SYSTEM_STATE_DIR = "/var/lib/shuffler"
STOP_SERVICE = "sudo systemctl stop shuffler"


def refuse_over_voltage(app: App) -> None:
    """On a board with no GPIO bench the limit still comes first: a supply above the
    driver's limit is named (exit 4) before the self-test's GPIO-only refusal."""
    from shuffler.device.contract import opening_still
    from shuffler.errors import OverVoltageError
    from shuffler.limits import over_voltage

    with opening_still():
        device = open_alone(app)
    try:
        reading = device.battery()
        over = over_voltage(reading.volts, reading.reads_low_by)
    finally:
        device.close()
    if over is not None:
        raise OverVoltageError(f"{over} The self-test was not started.")


@click.command()
@click.option("--yes", "unattended", is_flag=True,
              help="no questions, and nothing that moves: the motor and flap steps are "
                   "skipped and say so; on sim-gpio the rig plays the builder for the rest, "
                   "on a real machine the steps that need hands are skipped too")
@click.option("--skip", "skip", multiple=True, type=click.Choice(STEPS), metavar="STEP",
              help=f"leave a step out (repeatable): {', '.join(STEPS)}")
@click.option("--timeout", type=click.FloatRange(0.2, 600), default=20.0, show_default=True,
              help="seconds to wait for each thing the builder is asked to do")
@click.option("--sim-miswire", "miswire", default=None, metavar="NAME",
              help="sim-gpio only: wire the rig wrong (piles_swapped, dead_beam, "
                   "motor_reversed, ...) to see the self-test find it")
@click.pass_obj
def selftest(app: App, unattended: bool, skip: tuple[str, ...], timeout: float,
             miswire: str | None) -> int:
    """Bring a freshly wired machine up, one part at a time, in the order of the
    first-power-on procedure (docs/hardware.md).

    First the 9 V rail at the battery monitor (given a multimeter reading it calibrates
    the divider); then it asks you to touch the sensor, cover and uncover the tray and
    each pile sensor and pass a card through the beam; it shows each colour and sounds
    the buzzer; last, only after you say hands are clear, it runs the motor forward and
    back for 1.5 s each at full speed (the duty cap) and throws the flap left and right.
    Each step passes, fails with what to check, or is skipped. The calibration goes into
    the config file the service reads (--config, else /etc/shuffler/config.toml on a real
    machine: root's, hence sudo), shown as a diff first. Stop the service before you run
    it (sudo systemctl stop shuffler).

    \b
    Examples:
      sudo systemctl stop shuffler
      sudo shuffler --device gpio --config /etc/shuffler/config.toml selftest
      shuffler --device sim-gpio selftest --yes --json
      shuffler --device sim-gpio selftest --yes --sim-miswire piles_swapped
    """
    from shuffler.device.contract import opening_still
    from shuffler.errors import BadInputError
    from shuffler.gpio.selftest import GpioBench, SelfTest

    app.use_service = False
    if app.device_name not in ("gpio", "sim-gpio"):
        refuse_over_voltage(app)
        raise BadInputError(f"selftest drives GPIO pins: use --device gpio (or sim-gpio), "
                            f"not {app.device_name}")
    if miswire is not None and app.device_name != "sim-gpio":
        raise BadInputError("--sim-miswire applies only to --device sim-gpio")
    with opening_still():  # nothing moves until a pass, or a step the builder confirmed
        device = open_alone(app)
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
            builder = RigBuilder(rig, moves=False)
    test = SelfTest(GpioBench(device), builder, timeout=min(timeout, 2.0) if rig and
                    unattended else timeout, skip=skip)
    if not app.json:
        click.echo("selftest: each step says what to do; answer s to skip a question",
                   err=True)
    report = test.run(on_step=None if app.json else lambda r: click.echo(
        step_line(r.to_dict(), app.color)))
    written = write_calibration(app, report.divider_ratio, simulated=rig is not None,
                                ask=not unattended)
    result = {"selftest": report.to_dict(), "written_to": written}
    summary = ("selftest: every step passed" if report.passed else
               f"selftest: {len(report.failed())} step(s) failed: "
               f"{', '.join(s.part for s in report.failed())}")
    if unattended:
        summary += ("\n--yes: nothing that moves was run (motor, flap); run selftest "
                    "without --yes at the bench to test them")
    if written:
        summary += f"\ndivider_ratio = {report.divider_ratio:.4f} written to {written}"
    app.emit(result, summary)
    return EXIT_OK if report.passed else EXIT_FAULT


def open_alone(app: App) -> Any:
    """Open the device under the machine lock, and on a real machine under the deployed
    service's lock too: a self-test beside a running service is refused (exit 3) with the
    command that stops the service."""
    from shuffler.store.lock import LOCK_NAME, MachineBusyError, MachineLock

    system = Path(SYSTEM_STATE_DIR)
    try:
        # only a lock file the service made: never create one it could not open later
        if app.device_name == "gpio" and (system / LOCK_NAME).is_file() and \
                system.resolve() != Path(app.state_dir).resolve():
            lock = MachineLock(SYSTEM_STATE_DIR)
            lock.acquire("shuffler selftest")
            app.locks.append(lock)
        return app.open(app.config.hand.cards)
    except MachineBusyError as e:
        raise MachineBusyError(f"{e}. The self-test drives the motor pins itself: stop the "
                               f"service first ({STOP_SERVICE}), run the self-test, then "
                               "start it again (sudo systemctl start shuffler)") from None


def config_target(app: App, simulated: bool) -> Path | None:
    """The config file the calibration belongs in: the one named with --config, else on a
    real machine the deployed service's (/etc/shuffler/config.toml). A simulated machine
    writes only to a config named with --config."""
    if app.options.config_path is not None:
        return Path(app.options.config_path)
    return None if simulated else Path(SYSTEM_CONFIG)


def write_calibration(app: App, ratio: float | None, *, simulated: bool,
                      ask: bool) -> str | None:
    """Write ``[gpio] divider_ratio`` into the service's config file: the change shown as a
    diff first (and confirmed, at a terminal), checked before it replaces the old file."""
    path = config_target(app, simulated)
    if ratio is None or path is None:
        return None
    import difflib

    from shuffler.config import load_config_text
    from shuffler.files import read_limited, write_file
    from shuffler.gpio.selftest import set_divider_ratio

    raw = read_limited(path, "config file")
    old = raw.decode("utf-8", "replace") if raw else ""
    new = set_divider_ratio(old, ratio)
    load_config_text(new, str(path))  # never write a config that would not load
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        str(path), f"{path} (calibrated)"))
    click.echo(diff, err=True, nl=False)
    if ask and not click.confirm(f"  write the calibration to {path}?", default=True,
                                 err=True):
        return None
    write_file(path, new.encode(), "config file")
    return str(path)
