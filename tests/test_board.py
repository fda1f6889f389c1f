"""The tournament board, from the messages the tables publish: standings, the results
sheet (CSV and JSON alike), the round clock; and the routes that serve them."""

from __future__ import annotations

import csv
import http.client
import io
import json

from shuffler.core.score import Result, new_game
from shuffler.faces.tables import (
    ROOM,
    TableBook,
    board,
    clock_text,
    render_board,
    results_csv,
    round_clock,
)

from .test_web import Recorder

SEATS = ("North", "East", "South", "West")


def score_message(game, table="t1") -> bytes:
    return json.dumps({"schema": 1, "table": table, "id": "x", "score": game.to_dict()}).encode()


def played(names, results, target=10, number=1, before=None):
    """A game that was played, with its predecessors' results sheet."""
    g = new_game(SEATS, target, number, names, before)
    for r in results:
        g.add(r)
    return g


def march(team):
    return Result(team, 5)


def test_standings_are_the_sum_of_every_tables_games_and_a_repeat_counts_once():
    book = TableBook()
    # table 1: Ann & Bo beat Cy & Di 10 to 0, then a game in progress at 2 to 4
    g1 = played(("Ann & Bo", "Cy & Di"), [march(0)] * 5)
    g2 = played(("Ann & Bo", "Cy & Di"), [march(0), march(1), march(1)], number=2,
                before=[g1.summary()])
    # table 2: a game just won (not yet replaced) and a game given up before it
    given_up = played(("Ed & Fay", "Gus & Hal"), [march(1)])
    g3 = played(("Ed & Fay", "Gus & Hal"), [march(0)] * 4 + [Result(1, 4)] + [march(0)],
                number=2, before=[given_up.summary()])
    for _ in range(3):  # QoS 1 delivers twice; a table that drops republishes on return
        book.take("shuffler/t1/score", score_message(g2, "t1"))
        book.take("shuffler/t2/score", score_message(g3, "t2"))
    view = board(book, now=0)
    lines = {s["team"]: s for s in view["standings"]}
    assert lines["Ann & Bo"] == {
        "place": 1, "team": "Ann & Bo", "played": 1, "won": 1, "lost": 0, "points_for": 10,
        "points_against": 0, "difference": 10,
        "playing": {"table": "t1", "game": 2, "against": "Cy & Di", "score": 2,
                    "their_score": 4}}
    assert (lines["Ed & Fay"]["won"], lines["Ed & Fay"]["points_for"],
            lines["Ed & Fay"]["points_against"]) == (1, 10, 1)
    assert lines["Gus & Hal"]["lost"] == 1 and lines["Gus & Hal"]["points_for"] == 1
    # the given-up game is on the sheet, not in the standings
    assert [(g["table"], g["game"], g["status"]) for g in view["games"]] == [
        ("t1", 1, "won"), ("t1", 2, "playing"), ("t2", 1, "given up"), ("t2", 2, "won")]
    # sorted: games won, then the difference, then points for
    assert [s["team"] for s in view["standings"]] == ["Ann & Bo", "Ed & Fay", "Gus & Hal",
                                                      "Cy & Di"]


def test_a_team_moving_tables_keeps_one_line_and_unnamed_teams_are_their_tables():
    book = TableBook()
    book.take("shuffler/t1/score", score_message(played(("Us", "Them"), [march(0)] * 5)))
    book.take("shuffler/t2/score", score_message(played(("them", "Others"), [march(0)] * 5),
                                                 "t2"))
    book.take("shuffler/t3/score", score_message(played(None, [march(1)]), "t3"))
    lines = {s["team"]: s for s in board(book, 0)["standings"]}
    assert lines["Them"]["played"] == 2 and lines["Them"]["won"] == 1  # "them" is Them
    assert lines["t3: East & West"]["playing"]["against"] == "t3: North & South"


def test_the_csv_is_the_jsons_standings_line_for_line():
    book = TableBook()
    book.take("shuffler/t1/score", score_message(
        played(('Ann "the ace"', "Bo, Cy"), [march(0)] * 3)))
    book.take("shuffler/t2/score", score_message(played(("D", "E"), [march(1)] * 5), "t2"))
    view = board(book, 0)
    rows = list(csv.DictReader(io.StringIO(results_csv(view["standings"]))))
    assert [r["team"] for r in rows] == [s["team"] for s in view["standings"]]
    for r, s in zip(rows, view["standings"], strict=True):
        for key in ("place", "played", "won", "lost", "points_for", "points_against",
                    "difference"):
            assert int(r[key]) == s[key]
    by_team = {r["team"]: r for r in rows}
    assert by_team["Bo, Cy"]["playing"] == 't1 game 1: 0 to 6 v Ann "the ace"'
    assert by_team["D"]["playing"] == ""


def test_anything_not_a_score_or_a_clock_is_ignored():
    book = TableBook()
    for topic, payload in [("shuffler/t1/score", b"not json"), ("shuffler/t1/score", b"[]"),
                           ("shuffler/t1/score", b'{"score": {"hands": [1], "played": 3}}'),
                           (f"shuffler/{ROOM}/round", b'{"round": 0}'),
                           (f"shuffler/{ROOM}/round", b'{"round": 1, "started": true, '
                                                     b'"minutes": 20}'),
                           ("shuffler/t1/score", b'{"score": {"played": [{"hands": 2}]}}')]:
        book.take(topic, payload)
    view = board(book, 0)
    assert view["standings"] == [] and view["round"] is None and view["games"] == []
    assert ROOM not in book.rows


def test_the_round_clock_counts_down_to_the_horn():
    book = TableBook()
    book.take(f"shuffler/{ROOM}/round", b'{"round": 2, "started": 1000, "minutes": 20}')
    assert round_clock(book.round, 1000 + 65)["left_s"] == 20 * 60 - 65
    assert clock_text(round_clock(book.round, 1065)) == "round 2: 18:55 left of 20 minutes"
    at = round_clock(book.round, 1000 + 20 * 60)
    assert at["horn"] and at["left_s"] == 0
    assert "the horn" in clock_text(at)
    assert "no game scored yet" in render_board(board(book, 0))


class _Room(Recorder):
    """A page source with a room of one table (what the web server asks of the service)."""

    def __init__(self) -> None:
        super().__init__()
        self.book = TableBook()
        self.book.take("shuffler/t1/score", score_message(played(("A", "B"), [march(0)] * 5)))

    def tournament(self):
        return board(self.book, 0)


def test_the_board_page_its_json_and_its_csv_are_served(tmp_path):
    web = _Room().serve(tmp_path)
    try:
        def get(path):
            conn = http.client.HTTPConnection(*web.address, timeout=5)
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
            conn.close()
            return r.status, r.getheader("Content-Type"), body
        status, ctype, page = get("/tables")
        assert status == 200 and ctype.startswith("text/html") and b"Tournament board" in page
        status, ctype, body = get("/api/board")
        standings = json.loads(body)["standings"]
        assert [s["team"] for s in standings] == ["A", "B"]
        status, ctype, body = get("/api/results.csv")
        assert status == 200 and ctype.startswith("text/csv")
        assert body.decode().splitlines()[1].startswith("1,A,1,1,0,10,0,10,")
    finally:
        web.close()


def test_the_board_is_what_the_tables_schema_says():
    from shuffler.schemas import validate

    book = TableBook()
    book.take("shuffler/t1/score", score_message(played(("A", "B"), [march(0)] * 3)))
    book.take(f"shuffler/{ROOM}/round", b'{"round": 1, "started": 5, "minutes": 20}')
    validate({"broker": "h:1883", "connected": True, **board(book, 10)}, "tables")
