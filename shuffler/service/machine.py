"""The one dispatcher: every command the machine answers, declared once.

A :class:`Command` names its handler, its traits (claimed, moves, machine, score,
cached), the faces that may send it (:data:`SOCKET`, :data:`CLI` in-process, the
:data:`PAGE`, :data:`MQTT`) and the schema of its result. Everything else is read from
:data:`COMMANDS`: the request's check and its schema's enum
(:mod:`shuffler.service.request`), the service's loop (the socket), the CLI without a
service (the same :class:`Machine` in-process), the page's actions and the remote
commands MQTT takes, and the client's check of a result. Adding a command is one
:func:`declare` and its handler.

    >>> [c.name for c in COMMANDS.values() if MQTT in c.faces]
    ['clear', 'new_game']
    >>> COMMANDS["undo"].result
    'score'

Light on purpose: the client imports it, so a handler reaches the session and the
scorebook only through the :class:`Machine` it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shuffler.errors import BadInputError
from shuffler.service.results import Result

if TYPE_CHECKING:
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.events import Emit
    from shuffler.control.scorebook import ScoreBook
    from shuffler.control.session import Session
    from shuffler.core.record import Record

#: the faces a command may come from: the control socket, the CLI running the machine
#: itself (no service), the dealer's page, MQTT's remote commands
SOCKET, CLI, PAGE, MQTT = "socket", "cli", "page", "mqtt"
FACES = (SOCKET, CLI, PAGE, MQTT)

def _quiet(event: object) -> None:
    pass


#: a command's handler: its record
Handler = Callable[["Machine", dict[str, Any], "Emit"], "Record"]


class NotAllowedError(BadInputError):
    """A command its face may not send (the declaration does not list the face)."""

    kind = "bad_request"


@dataclass(frozen=True)
class Command:
    """One command and how every face treats it."""

    name: str
    handler: Handler
    faces: frozenset[str]
    result: str = ""  # the schema of its result (shuffler/schemas); "": its own name
    claimed: bool = False  # runs in the deciding loop, one at a time (else "busy")
    moves: bool = False  # may turn the motor: a stop while it is accepted or runs stops it
    machine: bool = False  # acts on the machine: a service gone mid-way leaves it unknown
    score: bool = False  # the scorebook's: a change from the page names the score's version
    cached: bool = False  # the service answers it from its last snapshot, at once

    @property
    def schema(self) -> str:
        return self.result or self.name


#: every command, in the order the schema's enum and the messages list them
COMMANDS: dict[str, Command] = {}


def declare(command: Command) -> Command:
    """Add ``command`` (or replace the one of its name) to :data:`COMMANDS`."""
    COMMANDS[command.name] = command
    return command


def sent_by(face: str) -> tuple[str, ...]:
    """The commands ``face`` may send, in declaration order."""
    return tuple(name for name, c in COMMANDS.items() if face in c.faces)


def admit(cmd: str, face: str) -> Command:
    """The command ``cmd`` if ``face`` may send it, else :class:`NotAllowedError`."""
    command = COMMANDS.get(cmd)
    if command is None or face not in command.faces:
        raise NotAllowedError(f"cmd: {cmd!r} is not a command the {face} may send (it may "
                              f"send {', '.join(sent_by(face))})")
    return command


class Machine:
    """The commands run on one session (the service's, or the CLI's own in-process): or,
    for the looks alone (status, battery), on a controller and its config with no session
    (the CLI's quick look imports no session); or, for the score alone, on a scorebook
    with no device (the CLI's ``score``)."""

    def __init__(self, session: Session | None = None, *, scores: ScoreBook | None = None,
                 tick: Callable[[], None] | None = None,
                 look: tuple[PassController, Config] | None = None) -> None:
        self._session = session
        self._scores = scores
        self.tick = tick  # called while a pass or hand runs (the service's watchdog)
        self._look = look

    @property
    def look(self) -> tuple[PassController, Config]:
        """What status and battery read: the controller and its config."""
        if self._look is not None:
            return self._look
        return self.session.controller, self.session.config

    @property
    def session(self) -> Session:
        if self._session is None:
            raise RuntimeError("this machine has no device: only the score's commands run")
        return self._session

    @property
    def scores(self) -> ScoreBook:
        return self._scores if self._scores is not None else self.session.scores

    def run(self, request: dict[str, Any], emit: Emit | None = None, face: str = SOCKET
            ) -> Result:
        """Run one checked request (:func:`shuffler.service.request.check`) sent by
        ``face``, its progress events to ``emit``; returns its result, frozen (JSON
        only at the edges: :meth:`Result.to_json`)."""
        command = admit(request["cmd"], face)
        return Result(command.schema, command.handler(self, request, emit or _quiet))


# -- the handlers ----------------------------------------------------------------------

def _pass(m: Machine, req: dict[str, Any], emit: Emit) -> Record:
    return m.session.do_pass(req["cards"], req["mode"], on_event=emit, on_tick=m.tick)


def _hand(m: Machine, req: dict[str, Any], emit: Emit) -> Record:
    # the CLI resolved the terms to open the device (cli/app.py, App.load), before it took
    # the machine: kept unless a command in between changed the pending hand (the store
    # reads the file again only if it changed)
    terms = req.get("terms")
    if terms is None or terms.pending != m.session.controller.store.load().hand:
        terms = m.session.terms(req["passes"], req["cards"], req["mode"])
    return m.session.do_hand(terms, on_event=emit, on_tick=m.tick)


def _score(m: Machine, req: dict[str, Any], emit: Emit) -> Record:
    """``score``: read it, or score a hand, edit or delete one, or change the game's
    target or names (the request's fields say which; request.RULES keeps them whole)."""
    book, version = m.scores, req.get("version")
    if req.get("delete"):
        return book.delete(req["hand"], version)
    if req.get("makers") is not None:
        return book.record(req["makers"], req["tricks"], req.get("alone", False),
                           renege=req.get("renege"), hand=req.get("hand"), version=version)
    if req.get("target") is not None or req.get("names") is not None:
        return book.settings(req.get("target"), req.get("names"), version)
    return book.show()


def _new_game(m: Machine, req: dict[str, Any], emit: Emit) -> Record:
    return m.scores.new_game(req.get("first_dealer"), target=req.get("target"),
                             names=req.get("names"), version=req.get("version"),
                             replace_in_progress=req.get("replace", True))


def _stop(m: Machine, req: dict[str, Any], emit: Emit) -> Record:
    from shuffler.control.reports import Stopped

    return Stopped(m.session.controller.request_stop())


def _status(m: Machine, req: dict[str, Any], emit: Emit) -> Record:
    from shuffler.control.reports import StatusReport  # on call: the client imports this

    return StatusReport.of(*m.look)


def _battery(m: Machine, req: dict[str, Any], emit: Emit) -> Record:
    from shuffler.control.reports import BatteryReport

    controller, config = m.look
    return BatteryReport.of(controller, config, req.get("cards") or config.hand.cards)


def reads_score(req: dict[str, Any]) -> bool:
    """A score request that only reads: the service answers it at once, unclaimed."""
    return req["cmd"] == "score" and not req.get("delete") and all(
        req.get(k) is None for k in ("makers", "target", "names"))


def _scorer(name: str, handler: Handler, faces: frozenset[str]) -> Command:
    """A command of the scorebook's: claimed (one change at a time), its result the score."""
    return Command(name, handler, faces, result="score", claimed=True, score=True)


_HERE = frozenset({SOCKET, CLI})  # the socket, and the CLI when no service runs
_PAGE_TOO = frozenset({SOCKET, CLI, PAGE})
for _command in (
    Command("status", _status, _HERE, cached=True),
    Command("battery", _battery, _HERE, cached=True),
    # the page's Start pass is the dealer's touch (Service.touch), with all its rules: never
    # a pass the page runs itself
    Command("pass", _pass, _HERE, claimed=True, moves=True, machine=True),
    Command("hand", _hand, _HERE, claimed=True, moves=True, machine=True),
    Command("clear", lambda m, req, emit: m.session.do_clear(), frozenset(FACES),
            claimed=True, machine=True),
    # at once, from the connection's thread: the job keeps the stop, so a pass about to
    # start never starts and a hand ends between its passes (a service's only)
    Command("stop", _stop,
            frozenset({SOCKET, PAGE})),
    _scorer("score", _score, _PAGE_TOO),
    _scorer("undo", lambda m, req, emit: m.scores.undo(req.get("version")), _PAGE_TOO),
    _scorer("redo", lambda m, req, emit: m.scores.redo(req.get("version")), _PAGE_TOO),
    # from across the room too: MQTT's new game names the version to replace one in play
    _scorer("new_game", _new_game, frozenset(FACES)),
):
    declare(_command)
