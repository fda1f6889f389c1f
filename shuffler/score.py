"""The euchre score keeper: hands entered as (makers, tricks, alone), game to 10.

Points: the makers take 1 for three or four tricks, 2 for all five, 4 for all five
alone; makers held under three tricks are euchred and the defenders take 2. Partners
sit opposite, so with the seats in clockwise order team 0 is seats 0 and 2 and team 1
seats 1 and 3.

    >>> game = Game(teams=(("North", "South"), ("East", "West")))
    >>> Result(makers=0, tricks=5, alone=True).points   # (team, points)
    (0, 4)
    >>> game.add(Result(makers=0, tricks=5, alone=True)).totals
    (4, 0)
    >>> game.add(Result(makers=1, tricks=2)).totals   # euchred: 2 to the defenders
    (6, 0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import BadInputError

DEFAULT_TARGET = 10


class ScoreError(BadInputError):
    """A score entry that cannot be taken (bad values, or the game is over)."""

    kind = "bad_score"


@dataclass(frozen=True)
class Result:
    """One hand: which team named trump, how many tricks it took, whether alone."""

    makers: int
    tricks: int
    alone: bool = False

    def __post_init__(self) -> None:
        if self.makers not in (0, 1):
            raise ScoreError(f"makers: expected team 0 or 1, got {self.makers!r}")
        if type(self.tricks) is not int or not 0 <= self.tricks <= 5:
            raise ScoreError(f"tricks: expected a whole number from 0 to 5, got {self.tricks!r}")
        if type(self.alone) is not bool:
            raise ScoreError(f"alone: expected true or false, got {self.alone!r}")

    @property
    def points(self) -> tuple[int, int]:
        """(team, points) this hand scores."""
        if self.tricks < 3:
            return 1 - self.makers, 2
        if self.tricks < 5:
            return self.makers, 1
        return self.makers, 4 if self.alone else 2

    def to_dict(self) -> dict[str, Any]:
        team, points = self.points
        return {"makers": self.makers, "tricks": self.tricks, "alone": self.alone,
                "scored_by": team, "points": points, "euchre": self.tricks < 3}


@dataclass
class Game:
    teams: tuple[tuple[str, ...], tuple[str, ...]]
    target: int = DEFAULT_TARGET
    number: int = 1
    results: list[Result] = field(default_factory=list)

    @property
    def totals(self) -> tuple[int, int]:
        score = [0, 0]
        for r in self.results:
            team, points = r.points
            score[team] += points
        return score[0], score[1]

    @property
    def winner(self) -> int | None:
        for team, total in enumerate(self.totals):
            if total >= self.target:
                return team
        return None

    def add(self, result: Result) -> Game:
        if self.winner is not None:
            raise ScoreError(f"the game is over: {self.team_name(self.winner)} won; "
                             "start a new game")
        self.results.append(result)
        return self

    def undo(self) -> Result:
        if not self.results:
            raise ScoreError("nothing to undo: no hand has been scored in this game")
        return self.results.pop()

    def team_name(self, team: int) -> str:
        return " & ".join(self.teams[team])

    def to_dict(self) -> dict[str, Any]:
        winner = self.winner
        return {"number": self.number, "target": self.target,
                "teams": [list(t) for t in self.teams],
                "team_names": [self.team_name(0), self.team_name(1)],
                "totals": list(self.totals), "winner": winner,
                "hands": [r.to_dict() for r in self.results]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Game:
        """The stored game; raises ScoreError (a bad-input error) if it is malformed."""
        try:
            teams = tuple(tuple(str(s) for s in t) for t in data["teams"])
            results = [Result(int(h["makers"]), int(h["tricks"]), bool(h["alone"]))
                       for h in data["hands"]]
            game = cls((teams[0], teams[1]), int(data["target"]), int(data["number"]), results)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ScoreError(f"the stored score is damaged ({e!r})") from None
        return game


def teams_for(seats: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Partners sit opposite: alternate seats make a team."""
    return tuple(seats[0::2]), tuple(seats[1::2])


def new_game(seats: tuple[str, ...], target: int = DEFAULT_TARGET, number: int = 1) -> Game:
    return Game(teams_for(seats), target, number)
