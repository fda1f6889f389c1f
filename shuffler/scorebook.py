"""The score as the table keeps it: the game in the state file, beside the dealer.

Both the service and the CLI (when no service runs) use this; neither needs the
machine for it, so scoring never opens the device.
"""

from __future__ import annotations

from typing import Any

from .config import Config
from .score import Game, Result, ScoreError, new_game
from .state import State, StateStore


class ScoreBook:
    def __init__(self, store: StateStore, config: Config) -> None:
        self.store = store
        self.config = config

    def game(self) -> Game:
        """The game being scored: the stored one, or a first game for the seats."""
        stored = self.store.load().score
        if stored is None:
            return new_game(self.config.table.seats, self.config.table.game_to)
        return Game.from_dict(stored)

    def _save(self, game: Game, dealer: int | None = None) -> dict[str, Any]:
        state: State = self.store.load()
        state.score = game.to_dict()
        if dealer is not None:
            state.dealer = dealer
        self.store.save(state)
        return {"score": game.to_dict(), "exit": 0}

    def show(self) -> dict[str, Any]:
        return {"score": self.game().to_dict(), "exit": 0}

    def record(self, makers: int, tricks: int, alone: bool = False) -> dict[str, Any]:
        return self._save(self.game().add(Result(makers, tricks, alone)))

    def undo(self) -> dict[str, Any]:
        game = self.game()
        game.undo()
        return self._save(game)

    def new_game(self, first_dealer: str | None = None) -> dict[str, Any]:
        """A new game; the deal starts again with ``first_dealer`` (the configured one if
        None)."""
        seats = self.config.table.seats
        first = first_dealer or self.config.table.first_dealer
        if first not in seats:
            raise ScoreError(f"first_dealer: expected one of {', '.join(seats)}, got {first!r}")
        number = self.game().number + 1 if self.store.load().score else 1
        return self._save(new_game(seats, self.config.table.game_to, number),
                          dealer=seats.index(first))

    def team_of(self, seat: str) -> int:
        """The team a seat plays for (partners sit opposite)."""
        seats = self.config.table.seats
        if seat not in seats:
            raise ScoreError(f"expected one of the seats {', '.join(seats)}, got {seat!r}")
        return seats.index(seat) % 2
