"""The score as the table keeps it: the game in the state file, beside the dealer.

Both the service and the CLI (when no service runs) use this; neither needs the
machine for it, so scoring never opens the device.

Every change names the ``version`` of the game it was made against (the page always
does; a script may leave it out and act on whatever is current). A request naming any
other version is refused with ``stale_score``, so two phones entering the same hand
score it once, two Undos of the same version undo one change, and a double tap's second
request does nothing. Every change (a hand scored, edited or deleted, the target or the
names changed, a new game) can be undone and redone, up to :data:`HISTORY` steps; a new
version number is taken by undo and redo too, so nothing made before them applies after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shuffler.config import Config
from shuffler.constants import EXIT_OK
from shuffler.core.record import Record
from shuffler.core.score import (
    Game,
    Result,
    ScoreError,
    StaleScoreError,
    after,
    check_target,
    new_game,
)
from shuffler.store.state import State, StateStore

HISTORY = 20  # undo steps kept with the game


@dataclass(frozen=True)
class ScoredHand(Record):
    """A hand scored (score.json's ``hands``)."""

    makers: int
    tricks: int
    alone: bool
    renege: int | None
    scored_by: int
    points: int
    euchre: bool


@dataclass(frozen=True)
class PlayedGame(Record):
    """A game the table played before this one (score.json's ``played``)."""

    number: int
    target: int
    names: tuple[str, ...] | None
    team_names: tuple[str, ...]
    totals: tuple[int, ...]
    winner: int | None
    hands: int

    @classmethod
    def kept(cls, g: dict[str, Any]) -> PlayedGame:
        names = g["names"]
        return cls(g["number"], g["target"], None if names is None else tuple(names),
                   tuple(g["team_names"]), tuple(g["totals"]), g["winner"], g["hands"])


@dataclass(frozen=True)
class Score(Record):
    """The game in play (score.json's ``score``), with what Undo and Redo would do."""

    number: int
    target: int
    version: int
    teams: tuple[tuple[str, ...], ...]
    names: tuple[str, str] | None
    team_names: tuple[str, str]
    totals: tuple[int, int]
    winner: int | None
    hands: tuple[ScoredHand, ...]
    played: tuple[PlayedGame, ...]
    undo: str | None  # what Undo would take back; None: nothing
    redo: str | None

    @classmethod
    def of(cls, game: Game, undo: list[dict[str, Any]], redo: list[dict[str, Any]]) -> Score:
        return cls(game.number, game.target, game.version, game.teams, game.names,
                   (game.team_name(0), game.team_name(1)), game.totals, game.winner,
                   tuple(ScoredHand(**r.to_dict()) for r in game.results),
                   tuple(PlayedGame.kept(g) for g in game.played),
                   undo[-1]["label"] if undo else None, redo[-1]["label"] if redo else None)


@dataclass(frozen=True)
class ScoreAnswer(Record):
    """The score's commands (shuffler/schemas/score.json)."""

    score: Score
    done: str | None  # what the change did, in words; None: a reading
    exit: int


class ScoreBook:
    def __init__(self, store: StateStore, config: Config) -> None:
        self.store = store
        self.config = config

    # -- the stored game and its history ----------------------------------------------
    def _load(self) -> tuple[Game, list[dict[str, Any]], list[dict[str, Any]]]:
        stored = self.store.load().score
        if stored is None:
            return new_game(self.config.table.seats, self.config.table.game_to), [], []
        return Game.from_dict(stored), list(stored.get("undo", [])), list(stored.get("redo", []))

    def _reply(self, game: Game, undo: list[dict[str, Any]], redo: list[dict[str, Any]],
               done: str | None = None) -> ScoreAnswer:
        return ScoreAnswer(Score.of(game, undo, redo), done, EXIT_OK)

    def _save(self, game: Game, undo: list[dict[str, Any]], redo: list[dict[str, Any]],
              dealer: int | None = None) -> None:
        state: State = self.store.load()
        state.score = {**game.to_dict(), "undo": undo[-HISTORY:], "redo": redo[-HISTORY:]}
        if dealer is not None:
            state.dealer = dealer
        self.store.save(state)

    def _change(self, version: int | None, change: Callable[[Game], str | tuple[Game, str]],
                dealer: int | None = None) -> ScoreAnswer:
        """Apply ``change`` to the current game, if ``version`` is current: it edits the
        game in place and names what it did, or returns the game that replaces it and the
        name. It can be undone."""
        game, undo, _redo = self._load()
        check_version(game, version, undo)
        before = game.to_dict()
        done = change(game)
        if isinstance(done, tuple):
            fresh, label = done
            fresh.version = game.version
            game = fresh
        else:
            label = done
        game.version += 1
        undo.append({"label": label, "game": before})
        self._save(game, undo, [], dealer)
        return self._reply(game, undo, [], label)

    # -- what a table asks -------------------------------------------------------------
    def show(self) -> ScoreAnswer:
        return self._reply(*self._load())

    def record(self, makers: int, tricks: int, alone: bool = False, *,
               renege: int | None = None, hand: int | None = None,
               version: int | None = None) -> ScoreAnswer:
        """Score the next hand, or with ``hand`` put this result in that hand's place."""
        result = Result(makers, tricks, alone, renege)

        def change(game: Game) -> str:
            if hand is None:
                game.add(result)
                return game.describe(len(game.results))
            game.edit(hand, result)
            return "the edit of " + game.describe(hand)
        return self._change(version, change)

    def delete(self, hand: int, version: int | None = None) -> ScoreAnswer:
        def change(game: Game) -> str:
            old = game.delete(hand)
            return "the deletion of " + game.describe(hand, old)
        return self._change(version, change)

    def settings(self, target: int | None = None, names: Any = None,
                 version: int | None = None) -> ScoreAnswer:
        """Change the game's target or the teams' names."""
        def change(game: Game) -> str:
            said, reopened = [], ""
            if target is not None:
                won = game.winner
                game.retarget(target)
                said.append(f"the target ({target})")
                if won is not None and game.winner is None:  # the page asks before this
                    reopened = (f"; {game.team_name(won)} had won at {game.totals[won]}, so "
                                "the game goes on")
            if names is not None:
                before = game.names
                game.rename(names)
                if game.names != before or not said:
                    said.append(f"the names ({game.team_name(0)}, {game.team_name(1)})")
            if not said:
                raise ScoreError("give a target or names to change")
            return " and ".join(said) + reopened
        return self._change(version, change)

    def undo(self, version: int | None = None) -> ScoreAnswer:
        return self._step(version, back=True)

    def redo(self, version: int | None = None) -> ScoreAnswer:
        return self._step(version, back=False)

    def _step(self, version: int | None, back: bool) -> ScoreAnswer:
        game, undo, redo = self._load()
        check_version(game, version, undo)
        source, sink = (undo, redo) if back else (redo, undo)
        if not source:
            raise ScoreError("nothing to undo: no change has been made to the score" if back
                             else "nothing to redo: undo something first")
        step = source.pop()
        restored = Game.from_dict(step["game"])
        restored.version = game.version + 1  # a new version: requests made before are stale
        sink.append({"label": step["label"], "game": game.to_dict()})
        # undoing a new game leaves the dealer where the deal is now: only the score goes back
        self._save(restored, undo, redo)
        return self._reply(restored, undo, redo, ("undid " if back else "redid ") + step["label"])

    def new_game(self, first_dealer: str | None = None, *, target: int | None = None,
                 names: Any = None, version: int | None = None,
                 replace_in_progress: bool = True) -> ScoreAnswer:
        """A new game; the deal starts again with ``first_dealer`` (the configured one if
        None). The target is the one given, else the last game's (chosen on screen),
        else ``[table] game_to``. ``replace_in_progress=False`` (remote commands that name
        no version) refuses to replace a game with hands scored and no winner."""
        seats = self.config.table.seats
        first = first_dealer or self.config.table.first_dealer
        if first not in seats:
            raise ScoreError(f"first_dealer: expected one of {', '.join(seats)}, got {first!r}")
        stored = self.store.load().score is not None
        if target is not None:
            check_target(target)

        def change(game: Game) -> tuple[Game, str]:
            if not replace_in_progress and game.in_progress:
                a, b = game.totals
                raise ScoreError(f"a game is in progress ({game.team_name(0)} {a}, "
                                 f"{game.team_name(1)} {b}): name its version to replace it")
            a, b = game.totals
            label = f"the new game (game {game.number} stood {a} to {b})"
            fresh = new_game(seats, target or (game.target if stored else
                                               self.config.table.game_to),
                             game.next_number(), game.names if names is None else None,
                             after(game))
            if names is not None:
                fresh.rename(names)
            return fresh, label
        return self._change(version, change, dealer=seats.index(first))


def check_version(game: Game, version: int | None, undo: list[dict[str, Any]]) -> None:
    if version is None or version == game.version:
        return
    last = f" (the last change: {undo[-1]['label']})" if undo else ""
    raise StaleScoreError(f"the score changed since this was sent: it is at version "
                          f"{game.version}, the request named {version}{last}; look at the "
                          "score and enter it again if it is still needed")

