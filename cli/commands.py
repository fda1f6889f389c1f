"""The machine's commands: hand, pass, status, battery, clear, stop, serve."""

from __future__ import annotations

import click

from shuffler.constants import EXIT_OK, MAX_CARDS

from . import render
from .app import App, read_config
from .output import Progress

MODES = ["planned", "coin"]


def mode_option():
    return click.option("--mode", type=click.Choice(MODES), default=None,
                        help="planned: reach the physical limit; coin: the plain machine  "
                             "[default: from the config, planned]")


def cards_option(help_text: str = "cards in the load  [default: from the config, 24]"):
    return click.option("--cards", type=click.IntRange(1, MAX_CARDS), default=None,
                        help=f"{help_text}; 1 to {MAX_CARDS}")


@click.command()
@click.option("--passes", type=click.IntRange(1, 30), default=None,
              help="passes in this hand, 1 to 30  [default: the config's [hand] passes, "
                   "else the fewest k with 2^k >= cards: 5 for 24 (docs/mixing.md)]")
@cards_option()
@mode_option()
@click.pass_obj
def hand(app: App, passes: int | None, cards: int | None, mode: str | None) -> int:
    """Run one euchre hand: N passes, then the deal moves to the left.

    A hand left unfinished (a jam, a crash, no touch) is finished first.

    \b
    Examples:
      shuffler hand                 the configured passes, the configured load
      shuffler hand --passes 7      seven passes this time
    """
    result = app.ask("hand", Progress(app), passes=passes, cards=cards, mode=mode)
    return app.emit_result(result, "hand", render.hand_summary(result["hand"]))


@click.command("pass")
@cards_option()
@mode_option()
@click.pass_obj
def pass_cmd(app: App, cards: int | None, mode: str | None) -> int:
    """Run one pass of the loaded pack.

    \b
    Examples:
      shuffler pass                 one pass of the configured load
      shuffler pass --cards 32      one pass of a 32-card load
    """
    progress = Progress(app)
    result = app.ask("pass", progress, cards=cards, mode=mode)
    progress.end()
    return app.emit_result(result, "pass", render.pass_line(result["pass"]))


@click.command()
@click.pass_obj
def status(app: App) -> int:
    """The device, its health, the latched fault if any, the battery and the counters.

    \b
    Examples:
      shuffler status
      shuffler status --json        for a script (docs/json.md)
    """
    result = app.ask("status")
    app.emit(result, render.status_text(result, app.color))
    return EXIT_OK


@click.command()
@cards_option("the load to estimate for  [default: from the config, 24]")
@click.pass_obj
def battery(app: App, cards: int | None) -> int:
    """Battery volts and charge, and how many passes and hands it has left.

    \b
    Examples:
      shuffler battery
      shuffler battery --cards 32
    """
    result = app.ask("battery", cards=cards)
    app.emit(result, render.battery_text(result))
    return EXIT_OK


@click.command()
@click.pass_obj
def stop(app: App) -> int:
    """Stop the pass or hand the service is running: the motor off at once.

    The stop is the service's (its socket's ``stop``): it answers once the motor is off.
    A pass stopped latches nothing; the hand ends. Exit 0 whether or not anything ran.

    \b
    Example, from a second terminal while the service deals:
      shuffler stop
    """
    from shuffler.service.client import ServiceUnreachableError

    in_terminal = "a pass or hand run in a terminal stops with Ctrl-C"

    try:
        client = app.service()
    except ServiceUnreachableError as e:
        if e.kind != "service_not_running":
            raise
        raise ServiceUnreachableError(f"{e} ({in_terminal})", e.kind) from None
    if client is None:
        raise ServiceUnreachableError(
            f"no service is running here, so no pass of its to stop ({in_terminal})",
            "service_not_running")
    result = client.request("stop", None)
    from .quickstop import NOTHING, STOPPED  # the fast stop's words are the same

    app.emit(result, STOPPED if result["stopped"] else NOTHING)
    return EXIT_OK


@click.command()
@click.pass_obj
def clear(app: App) -> int:
    """Clear a latched fault once the machine reports itself clear.

    \b
    Example, after freeing a jam and putting every card back in the tray:
      shuffler clear
    """

    result = app.ask("clear")
    code = result.pop("exit")
    if not result["cleared"]:
        text = ("not cleared: " + result["still"]["message"] if result.get("still")
                else "the machine still reports a fault: see `shuffler status`")
    elif result["cleared_fault"]:
        text = f"cleared: {result['cleared_fault']['kind']}"
    else:
        text = "no fault was latched"
    app.emit(result, text)
    return code


@click.command()
@cards_option("the load the simulated device starts with")
@click.pass_obj
def serve(app: App, cards: int | None) -> int:
    """Own the machine: touch-driven passes and hands, and the control socket.

    \b
    Examples:
      shuffler serve                              the configured device (systemd runs this)
      shuffler --socket /tmp/s.sock serve         the simulator, a socket of your own
    """
    from shuffler.faces.router import Faces
    from shuffler.logs import under_journal
    from shuffler.service.listening import ServiceRunningError
    from shuffler.service.loop import Service, install_signal_handlers, restart_in_place
    from shuffler.store.lock import MachineBusyError

    app.use_service = False
    try:
        app.lock(f"shuffler serve on {app.socket}")
        session = app.session(cards or app.config.hand.cards)
    except MachineBusyError as e:  # a second serve: the command is what is wrong
        raise ServiceRunningError(f"a shuffler service is already running: {e}") from None
    service = Service(session, app.socket, group=app.config.service.group,
                      max_clients=app.config.service.max_clients, lock=app.locks[0],
                      faces=Faces)
    if not under_journal():  # the journal has the "serving" line at info
        service.announce = lambda w: app.warn(
            f"serving the {w['device']} machine on {w['socket']}; page: {w['page']}; "
            f"state in {w['state']}")
    service.reload_check = lambda: read_config(app.options)  # SIGHUP: the config loads?
    install_signal_handlers(service)
    try:
        service.run()
    finally:  # a start that failed half-way (a face that would not start) leaves no socket
        service.listener.close()
    if service.reloading:  # SIGHUP and the config loads: the same command, started again
        app.close()
        restart_in_place()
    return EXIT_OK
