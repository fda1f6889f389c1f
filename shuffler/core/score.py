"""The euchre score keeper: hands entered as (makers, tricks, alone), game to 10.

Points: the makers take 1 for three or four tricks, 2 for all five, 4 for all five
alone; makers held under three tricks are euchred and the defenders take 2. The house
rule for a renege (a player who did not follow suit when they could, caught before the
hand ends): the other side takes 2 and the tricks do not count. Partners sit opposite,
so with the seats in clockwise order team 0 is seats 0 and 2 and team 1 seats 1 and 3.

    >>> game = Game(teams=(("North", "South"), ("East", "West")))
    >>> Result(makers=0, tricks=5, alone=True).points   # (team, points)
    (0, 4)
    >>> game.add(Result(makers=0, tricks=5, alone=True)).totals
    (4, 0)
    >>> game.add(Result(makers=1, tricks=2)).totals   # euchred: 2 to the defenders
    (6, 0)
    >>> game.add(Result(makers=0, tricks=5, renege=0)).totals   # North reneged: 2 to East
    (6, 2)

Every change to a game moves its ``version`` on; a request that names another version
is refused (:class:`StaleScoreError`), so two phones entering the same hand score it
once and a double tap scores nothing twice (see :mod:`shuffler.control.scorebook`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from shuffler.errors import BadInputError

DEFAULT_TARGET = 10
MAX_TARGET = 100
RENEGE_POINTS = 2  # the house rule: the same as a euchre
MAX_NAME = 32
#: finished and abandoned games kept with the score (the evening's results sheet)
MAX_PLAYED = 200


class ScoreError(BadInputError):
    """A score entry that cannot be taken (bad values, or the game is over)."""

    kind = "bad_score"


class StaleScoreError(ScoreError):
    """A request made against a version of the score that is no longer current."""

    kind = "stale_score"


@dataclass(frozen=True)
class Result:
    """One hand: which team named trump, how many tricks it took, whether alone, and
    the team caught reneging (if any)."""

    makers: int
    tricks: int
    alone: bool = False
    renege: int | None = None

    def __post_init__(self) -> None:
        if self.makers not in (0, 1) or type(self.makers) is not int:
            raise ScoreError(f"makers: expected team 0 or 1, got {self.makers!r}")
        if type(self.tricks) is not int or not 0 <= self.tricks <= 5:
            raise ScoreError(f"tricks: expected a whole number from 0 to 5, got {self.tricks!r}")
        if type(self.alone) is not bool:
            raise ScoreError(f"alone: expected true or false, got {self.alone!r}")
        if self.renege is not None and (type(self.renege) is not int
                                        or self.renege not in (0, 1)):
            raise ScoreError(f"renege: expected team 0 or 1 or null, got {self.renege!r}")

    @property
    def points(self) -> tuple[int, int]:
        """(team, points) this hand scores."""
        if self.renege is not None:
            return 1 - self.renege, RENEGE_POINTS
        if self.tricks < 3:
            return 1 - self.makers, 2
        if self.tricks < 5:
            return self.makers, 1
        return self.makers, 4 if self.alone else 2

    def what(self) -> str:
        """How the hand went, in a few words: ``march``, ``euchre``, ``renege``."""
        if self.renege is not None:
            return "renege"
        if self.tricks < 3:
            return "euchre"
        if self.tricks == 5:
            return "loner march" if self.alone else "march"
        return "made it alone" if self.alone else "made it"

    def to_dict(self) -> dict[str, Any]:
        team, points = self.points
        return {"makers": self.makers, "tricks": self.tricks, "alone": self.alone,
                "renege": self.renege, "scored_by": team, "points": points,
                "euchre": self.renege is None and self.tricks < 3}


def _names(names: Any) -> tuple[str, str] | None:
    if names is None:
        return None
    if (not isinstance(names, (list, tuple)) or len(names) != 2
            or not all(isinstance(n, str) and 0 < len(n.strip()) <= MAX_NAME for n in names)):
        raise ScoreError(f"names: expected two team names of 1 to {MAX_NAME} characters, "
                         f"got {names!r}")
    a, b = (n.strip() for n in names)
    if a == b:
        raise ScoreError(f"names: the two teams need different names, got {a!r} twice")
    return a, b


def check_target(target: Any) -> int:
    if type(target) is not int or not 1 <= target <= MAX_TARGET:
        raise ScoreError(f"target: expected a whole number from 1 to {MAX_TARGET} "
                         f"(10, 11, 15 or 21), got {target!r}")
    return target


@dataclass
class Game:
    teams: tuple[tuple[str, ...], tuple[str, ...]]
    target: int = DEFAULT_TARGET
    number: int = 1
    results: list[Result] = field(default_factory=list)
    #: the teams' names on screen (None: the seats, "North & South")
    names: tuple[str, str] | None = None
    #: moves on with every change; a request naming another version is stale
    version: int = 0
    #: the games this table played before this one (:meth:`summary`), oldest first
    played: list[dict[str, Any]] = field(default_factory=list)

    @property
    def totals(self) -> tuple[int, int]:
        score = [0, 0]
        for r in self.results:
            team, points = r.points
            score[team] += points
        return score[0], score[1]

    @property
    def winner(self) -> int | None:
        totals = self.totals
        if max(totals) < self.target:
            return None
        # at or past the target at the end of a hand: the first team to get there
        running = [0, 0]
        for r in self.results:
            team, points = r.points
            running[team] += points
            if running[team] >= self.target:
                return team
        return None  # pragma: no cover - the totals say someone got there

    @property
    def in_progress(self) -> bool:
        """Hands scored and nobody has won: a game a new one would throw away."""
        return bool(self.results) and self.winner is None

    def add(self, result: Result) -> Game:
        if self.winner is not None:
            raise ScoreError(f"the game is over: {self.team_name(self.winner)} won; "
                             "start a new game")
        self.results.append(result)
        return self

    def _hand(self, number: int) -> int:
        if type(number) is not int or not 1 <= number <= len(self.results):
            have = f"hands 1 to {len(self.results)}" if self.results else "no hands yet"
            raise ScoreError(f"hand: expected a hand of this game ({have}), got {number!r}")
        return number - 1

    def edit(self, number: int, result: Result) -> Result:
        """Put ``result`` in place of hand ``number`` (1 is the first); returns the old."""
        i = self._hand(number)
        old, self.results[i] = self.results[i], result
        return old

    def delete(self, number: int) -> Result:
        return self.results.pop(self._hand(number))

    def undo(self) -> Result:
        if not self.results:
            raise ScoreError("nothing to undo: no hand has been scored in this game")
        return self.results.pop()

    def rename(self, names: Any) -> None:
        self.names = _names(names)

    def retarget(self, target: Any) -> None:
        self.target = check_target(target)

    def team_name(self, team: int) -> str:
        if self.names:
            return self.names[team]
        return " & ".join(self.teams[team])

    def describe(self, number: int, result: Result | None = None) -> str:
        """``hand 3 (Us march: 2 to Us)``: what a hand scored, for undo's answer."""
        r = result or self.results[number - 1]
        team, points = r.points
        who = self.team_name(r.makers if r.renege is None else r.renege)
        return f"hand {number} ({who} {r.what()}: {points} to {self.team_name(team)})"

    def summary(self) -> dict[str, Any]:
        """This game as the results sheet keeps it: who played, the score, who won
        (None: it was given up before anyone reached the target)."""
        return {"number": self.number, "target": self.target,
                "names": list(self.names) if self.names else None,
                "team_names": [self.team_name(0), self.team_name(1)],
                "totals": list(self.totals), "winner": self.winner,
                "hands": len(self.results)}

    def next_number(self) -> int:
        """The number of the game after this one: games are numbered as played, so a
        game replaced before its first hand leaves its number to the next."""
        return self.number + 1 if self.results else self.number

    def to_dict(self) -> dict[str, Any]:
        winner = self.winner
        return {"number": self.number, "target": self.target, "version": self.version,
                "teams": [list(t) for t in self.teams],
                "names": list(self.names) if self.names else None,
                "team_names": [self.team_name(0), self.team_name(1)],
                "totals": list(self.totals), "winner": winner,
                "hands": [r.to_dict() for r in self.results],
                "played": [dict(g) for g in self.played]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Game:
        """The stored game; raises ScoreError (a bad-input error) if it is malformed."""
        try:
            teams = tuple(tuple(str(s) for s in t) for t in data["teams"])
            results = [Result(int(h["makers"]), int(h["tricks"]), bool(h["alone"]),
                              None if h.get("renege") is None else int(h["renege"]))
                       for h in data["hands"]]
            played = [_played(g) for g in data.get("played", [])]
            game = cls((teams[0], teams[1]), int(data["target"]), int(data["number"]), results,
                       _names(data.get("names")), int(data.get("version", 0)), played)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            raise ScoreError(f"the stored score is damaged ({e!r})") from None
        return game

    def copy(self) -> Game:
        return replace(self, results=list(self.results), played=list(self.played))


def _played(g: dict[str, Any]) -> dict[str, Any]:
    """One stored game of the results sheet, checked."""
    names = _names(g.get("names"))
    team_names = [str(n) for n in g["team_names"]]
    totals = [int(t) for t in g["totals"]]
    winner = g.get("winner")
    if len(team_names) != 2 or len(totals) != 2 or winner not in (None, 0, 1):
        raise ValueError(f"a played game is malformed: {g!r}")
    return {"number": int(g["number"]), "target": int(g["target"]),
            "names": list(names) if names else None, "team_names": team_names,
            "totals": totals, "winner": winner, "hands": int(g["hands"])}


def teams_for(seats: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Partners sit opposite: alternate seats make a team."""
    return tuple(seats[0::2]), tuple(seats[1::2])


def new_game(seats: tuple[str, ...], target: int = DEFAULT_TARGET, number: int = 1,
             names: tuple[str, str] | None = None,
             played: list[dict[str, Any]] | None = None) -> Game:
    return Game(teams_for(seats), target, number, names=names, played=list(played or []))


def after(game: Game) -> list[dict[str, Any]]:
    """The results sheet once ``game`` is replaced: it joins the played games if a hand
    of it was scored (a game replaced before its first hand was never played)."""
    if not game.results:
        return list(game.played)
    return [*game.played, game.summary()][-MAX_PLAYED:]
