"""The table's commands beyond the machine: the score, pairing a phone, all tables."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import click

from shuffler.constants import EXIT_FAULT, EXIT_OK

from .app import App


def _ask_score(app: App, cmd: str, **args: Any) -> int:
    result = app.ask(cmd, **args)
    code = result.pop("exit", 0)
    g = result["score"]
    lines = [result["done"][0].upper() + result["done"][1:]] if result.get("done") else []
    lines += [f"game {g['number']} to {g['target']}: {g['team_names'][0]} {g['totals'][0]}, "
              f"{g['team_names'][1]} {g['totals'][1]}"]
    if g["winner"] is not None:
        lines.append(f"{g['team_names'][g['winner']]} win! `shuffler score new` starts the "
                     "next game")
    app.emit(result, "\n".join(lines))
    return code


@click.group(invoke_without_command=True)
@click.pass_context
def score(ctx: click.Context) -> int | None:
    """The euchre score: show it, enter a hand, undo, start a new game.

    Points: the makers take 1 for three or four tricks, 2 for all five, 4 for all
    five alone; makers held under three tricks are euchred: 2 to the defenders.
    A game goes to 10 ([table] game_to). Partners sit opposite.

    \b
    Examples:
      shuffler score                     the game so far
      shuffler score add North 5 --alone  North's team made it, all five alone
      shuffler score add East 2          East's team named trump and was euchred
      shuffler score add East 3 --renege North   North reneged: 2 to East & West
      shuffler score add North 5 --hand 2        hand 2 was really North's march
      shuffler score delete 3            hand 3 was never played
      shuffler score undo                take the last change back (a hand, a new game)
      shuffler score redo                bring it back again
      shuffler score new --first-dealer South
    """
    return _ask_score(ctx.obj, "score") if ctx.invoked_subcommand is None else None


def _seat(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A seat as the config spells it, whatever the case it was typed in (north: North)."""
    app = ctx.find_object(App)
    seats = app.config.table.seats if app else ()
    if value is None or not seats:
        return value
    found = next((s for s in seats if s.casefold() == value.casefold()), None)
    if found is None:
        raise click.BadParameter(f"expected one of {', '.join(seats)}, got {value!r}")
    return found


def _seat_names(ctx: click.Context, param: click.Parameter, incomplete: str):
    """Shell completion: the configured seats (the config is read as the command would)."""
    from click.shell_completion import CompletionItem

    try:
        from shuffler.config import discovered_config_paths, load_configs

        seats = load_configs(discovered_config_paths()).table.seats
    except Exception:  # completion must never fail loudly
        seats = ("North", "East", "South", "West")
    return [CompletionItem(s) for s in seats if s.casefold().startswith(incomplete.casefold())]


@score.command("add")
@click.argument("makers_seat", metavar="SEAT", callback=_seat, shell_complete=_seat_names)
@click.argument("tricks", type=click.IntRange(0, 5))
@click.option("--alone", is_flag=True, help="the maker went alone")
@click.option("--renege", "renege_seat", default=None, metavar="SEAT", callback=_seat,
              shell_complete=_seat_names,
              help="a player caught reneging: 2 points to the other side, whatever the tricks")
@click.option("--hand", type=click.IntRange(1, 10_000), default=None,
              help="put this result in place of hand N (1 is the game's first)")
@click.pass_obj
def score_add(app: App, makers_seat: str, tricks: int, alone: bool, renege_seat: str | None,
              hand: int | None) -> int:
    """One hand: a seat of the team that named trump, and the tricks that team took.

    \b
    Examples:
      shuffler score add North 3          North & South named trump, took three: 1 point
      shuffler score add East 5 --alone   East went alone and took all five: 4 points
      shuffler score add East 3 --renege North   North reneged: 2 to East & West
      shuffler score add North 5 --hand 2        hand 2 was really North's march
    """
    seats = app.config.table.seats
    makers = seats.index(makers_seat) % 2
    renege = None if renege_seat is None else seats.index(renege_seat) % 2
    return _ask_score(app, "score", makers=makers, tricks=tricks, alone=alone, renege=renege,
               hand=hand)


@score.command("delete")
@click.argument("hand", type=click.IntRange(1, 10_000))
@click.pass_obj
def score_delete(app: App, hand: int) -> int:
    """Delete hand N of the game (1 is the first); `shuffler score undo` brings it back.

    \b
    Example:
      shuffler score delete 3             hand 3 was never played
    """
    return _ask_score(app, "score", hand=hand, delete=True)


@score.command("undo")
@click.pass_obj
def score_undo(app: App) -> int:
    """Take the last change back: a hand scored, edited or deleted, or a new game.

    \b
    Example:
      shuffler score undo                 says what it took back
    """
    return _ask_score(app, "undo")


@score.command("redo")
@click.pass_obj
def score_redo(app: App) -> int:
    """Bring back what the last undo took back.

    \b
    Example:
      shuffler score redo                 the change undone, made again
    """
    return _ask_score(app, "redo")


@score.command("new")
@click.option("--first-dealer", default=None, metavar="SEAT", callback=_seat,
              shell_complete=_seat_names,
              help="who deals first  [default: [table] first_dealer]")
@click.option("--target", type=click.IntRange(1, 100), default=None,
              help="the points that win it (10, 11, 15, 21)  [default: the last game's]")
@click.pass_obj
def score_new(app: App, first_dealer: str | None, target: int | None) -> int:
    """Start a new game at 0 to 0; the deal starts again with the first dealer.
    `shuffler score undo` brings the old game back.

    \b
    Examples:
      shuffler score new                  to the last game's target, the first dealer
      shuffler score new --first-dealer South --target 11
    """
    return _ask_score(app, "new_game", first_dealer=first_dealer, target=target)


@click.command()
@click.option("--new", "renew", is_flag=True, help="replace the code now (the old one stops "
              "working at once; phones already paired stay paired)")
@click.option("--list", "listing", is_flag=True, help="list the paired phones")
@click.option("--revoke", metavar="ID", default=None,
              help="unpair the phone ID (from --list), or `all`; at once, service running or not")
@click.pass_obj
def pair(app: App, renew: bool, listing: bool, revoke: str | None) -> int:
    """The code a phone enters to act from the dealer's page on the LAN.

    Reading the page needs no code; clearing a jam, scoring, a new game or starting a
    pass from anywhere but the machine itself needs a paired phone. The code is good
    for 10 minutes and one phone; the phone keeps a token of its own.

    \b
    Examples:
      shuffler pair                 the code (a new one if the last was used or expired)
      shuffler pair --list          the paired phones
      shuffler pair --revoke 3fa2c1  unpair one phone
      shuffler pair --revoke all     unpair every phone
    """
    from shuffler.errors import BadInputError
    from shuffler.faces.pairing import Pairing

    if sum((renew, listing, revoke is not None)) > 1:
        raise BadInputError("give one of --new, --list and --revoke")
    pairing = Pairing(app.state_dir)
    if listing or revoke is not None:
        gone = pairing.revoke(revoke) if revoke is not None else []
        if revoke is not None and not gone and revoke != "all":
            raise BadInputError(f"--revoke {revoke}: no paired phone has that id "
                                "(see `shuffler pair --list`)")
        phones = [p.to_dict() for p in pairing.phones()]
        lines = [f"unpaired: {', '.join(gone)}"] if gone else []
        if revoke == "all" and not gone:  # all of none: done, and said so
            lines = ["no phones were paired: nothing to unpair"]
        lines += [f"{p['id']}  paired {p['paired_at']} from {p['address']}  {p['agent']}"
                  for p in phones] or ([] if lines else ["no phones paired"])
        app.emit({"phones": phones, **({"revoked": gone} if revoke is not None else {})},
                 "\n".join(lines))
        return EXIT_OK
    code = pairing.new_code() if renew else pairing.current_or_new()
    left, until = pairing.left(code), pairing.expires(code)
    app.emit({"pairing_code": code.code, "expires_in_s": math.floor(left),
              "expires": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(until))},
             f"pairing code: {code.code} (for {math.ceil(left / 60)} minutes, until "
             f"{time.strftime('%H:%M', time.localtime(until))} by this machine's clock; "
             "for one phone)")
    return EXIT_OK


@click.command()
@click.option("--wait", type=click.FloatRange(0.1, 60), default=2.0, show_default=True,
              help="seconds to listen before --json, --once or --results prints")
@click.option("--once", is_flag=True, help="print one board and exit instead of watching")
@click.option("--round", "round_minutes", type=click.FloatRange(1, 24 * 60), default=None,
              metavar="MINUTES", help="start the next round now, MINUTES long, on every "
              "board on the broker (the horn sounds at the end)")
@click.option("--results", type=click.Choice(["csv", "json"]), default=None,
              help="print the results sheet (the standings) as CSV or JSON and exit")
@click.pass_obj
def tables(app: App, wait: float, once: bool, round_minutes: float | None,
           results: str | None) -> int:
    """Every table on the MQTT broker, problems first, and the tournament board: the
    round clock and the standings from every table's games (the [mqtt] section).

    \b
    Examples:
      shuffler tables                    live, redrawn every second; Ctrl-C to leave
      shuffler tables --round 20         start a 20-minute round on every board
      shuffler tables --results csv > results.csv   the standings to print or keep
      shuffler tables --json             one snapshot for a script
    """
    from shuffler.errors import ConfigError
    from shuffler.faces.tables import TableWatcher, board, render, render_board, results_csv

    if not app.config.mqtt.enabled:
        raise ConfigError(f"{app.config.source}: [mqtt] host: the broker to watch is "
                          "not set (see docs/mqtt.md)")
    watcher = TableWatcher(app.config.mqtt, client_id=f"shuffler-view-{time.time_ns()}")
    watcher.start()

    def text(view: dict[str, Any]) -> str:
        return render(watcher.book.sorted_rows()) + "\n\n" + render_board(view)
    try:
        if round_minutes is not None or app.json or once or results:
            time.sleep(wait)  # the retained states, scores and the last round arrive
        if not watcher.subscribed.is_set() and (round_minutes is not None or results):
            raise ConfigError(f"the broker at {app.config.mqtt.host}:"
                              f"{app.config.mqtt.port} did not answer within {wait:g} s")
        if round_minutes is not None:
            started = watcher.start_round(round_minutes, time.time())
            if not app.json:
                click.echo(f"round {started['round']} started: {round_minutes:g} minutes")
        if results:
            view = board(watcher.book, time.time())
            if results == "csv":
                click.echo(results_csv(view["standings"]), nl=False)
            else:
                click.echo(json.dumps({k: view[k] for k in ("standings", "games", "round")},
                                      indent=2))
            return EXIT_OK
        if app.json or once:
            view = board(watcher.book, time.time())
            app.emit({"broker": f"{app.config.mqtt.host}:{app.config.mqtt.port}",
                      "connected": watcher.subscribed.is_set(), **view}, text(view))
            return EXIT_OK if watcher.subscribed.is_set() else EXIT_FAULT
        while True:
            click.clear()
            click.echo(text(board(watcher.book, time.time())))
            time.sleep(1)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        watcher.close()
