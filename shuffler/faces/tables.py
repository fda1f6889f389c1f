"""The tournament view: every table on one broker, problems first, and the board (what
they show and how they rank: docs/mqtt.md).

:class:`TableBook` is pure: it takes (topic, payload) pairs as they arrive and keeps one
row per table, a pass or hand that QoS 1 delivered twice counted once by its ``id``;
:class:`TableWatcher` feeds it from a live subscription. The board (:func:`board`) is
each table's last retained ``score`` message alone (its game and those it ``played``),
so nothing seen twice adds to it; the round clock is one retained message,
``<prefix>/.room/round``, that ``shuffler tables --round`` publishes.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from shuffler.service.hub import MqttConfig

#: the room's own topic level (a table's name never has a dot)
ROOM = ".room"
#: the results sheet's columns, as the CSV heads them and the JSON names them
STANDING_COLUMNS = ("place", "team", "played", "won", "lost", "points_for",
                    "points_against", "difference", "playing")

#: how a table ranks in the view: the first needs someone soonest
RANK = {"offline": 0, "fault": 1, "low_battery": 2, "dealing": 3, "ready": 4, "unknown": 5}


@dataclass
class TableRow:
    name: str
    online: bool | None = None
    status: dict[str, Any] = field(default_factory=dict)
    pass_ids: set[str] = field(default_factory=set)
    hand_ids: set[str] = field(default_factory=set)
    duplicates: int = 0
    #: the table's score as its last retained ``score`` message had it (None: none yet)
    score: dict[str, Any] | None = None

    @property
    def state(self) -> str:
        if self.online is False:
            return "offline"
        return str(self.status.get("state", "unknown"))

    @property
    def battery(self) -> dict[str, Any]:
        return self.status.get("battery") or {}

    @property
    def hands(self) -> int | None:
        return (self.status.get("counters") or {}).get("hands")

    def to_dict(self) -> dict[str, Any]:
        fault = self.status.get("fault")
        return {"table": self.name, "state": self.state, "online": self.online,
                "battery": {k: self.battery.get(k) for k in ("volts", "percent",
                                                             "passes_left", "hands_left")},
                "hands": self.hands,
                "passes": (self.status.get("counters") or {}).get("passes"),
                "fault": fault, "pass_messages": len(self.pass_ids),
                "hand_messages": len(self.hand_ids)}


class TableBook:
    def __init__(self, prefix: str = "shuffler") -> None:
        self.prefix = prefix
        self.rows: dict[str, TableRow] = {}
        self.round: dict[str, Any] | None = None
        self.lock = threading.Lock()

    def take(self, topic: str, payload: bytes) -> None:
        """One message; anything not shaped like ours is ignored."""
        match topic.split("/"):
            case [self.prefix, table, kind] if table == ROOM:
                if kind == "round":
                    with self.lock:
                        self.round = _round(payload)
            case [self.prefix, table, "availability"]:
                with self.lock:
                    self._row(table).online = payload == b"online"
            case [self.prefix, table, "state" | "score" | "pass" | "hand" as kind] \
                    if (body := _object(payload)) is not None:
                with self.lock:
                    self._take(self._row(table), kind, body)

    def _row(self, table: str) -> TableRow:
        return self.rows.setdefault(table, TableRow(table))

    @staticmethod
    def _take(row: TableRow, kind: str, body: dict[str, Any]) -> None:
        match kind:
            case "state":
                row.status = body
            case "score":
                score = body.get("score")
                row.score = score if isinstance(score, dict) else None
            case _:  # a pass or a hand: counted once by its id (QoS 1 may send it twice)
                ids = row.pass_ids if kind == "pass" else row.hand_ids
                key = str(body.get("id"))
                if key in ids:
                    row.duplicates += 1
                ids.add(key)

    def sorted_rows(self) -> list[TableRow]:
        with self.lock:
            rows = list(self.rows.values())
        return sorted(rows, key=lambda r: (RANK.get(r.state, 5),
                                           r.battery.get("percent") or 0, r.name))


class TableWatcher:
    """A live subscription to every table under the config's prefix."""

    def __init__(self, config: MqttConfig, client_id: str = "",
                 persistent: bool = False) -> None:
        """``persistent`` (with a stable ``client_id``): the broker keeps the messages
        published while the view is away, so it misses none across a broker restart."""
        from shuffler.faces.telemetry import connect_client

        self.book = TableBook(config.prefix)
        self.subscribed = threading.Event()
        self.config = config
        self._client = connect_client(config, client_id=client_id or None,
                                      persistent=persistent)
        self._client.on_connect = self._on_connect
        self._client.on_message = lambda c, u, m: self.book.take(m.topic, m.payload)

    def _on_connect(self, client, userdata, flags, reason_code, properties=None) -> None:
        if reason_code.is_failure:
            return
        for kind in ("availability", "state", "pass", "hand", "score"):
            client.subscribe(f"{self.config.prefix}/+/{kind}", qos=1)
        client.subscribe(f"{self.config.prefix}/{ROOM}/round", qos=1)
        self.subscribed.set()

    def start_round(self, minutes: float, now: float, timeout: float = 5.0) -> dict[str, Any]:
        """Start the next round of ``minutes`` at ``now`` (epoch seconds) for every board
        on the broker: a retained message, sent and acknowledged, or ConfigError."""
        from shuffler.errors import ConfigError

        last = self.book.round
        body = {"round": (last["round"] + 1) if last else 1, "started": now,
                "minutes": minutes}
        info = self._client.publish(f"{self.config.prefix}/{ROOM}/round",
                                    json.dumps(body), qos=1, retain=True)
        with contextlib.suppress(RuntimeError, ValueError):  # not connected: said below
            info.wait_for_publish(timeout)
        if not info.is_published():
            raise ConfigError(f"the broker at {self.config.host}:{self.config.port} did not "
                              f"take the round clock within {timeout:g} s")
        with self.book.lock:
            self.book.round = body
        return body

    def start(self) -> TableWatcher:
        self._client.connect_async(self.config.host, self.config.port, self.config.keepalive)
        self._client.loop_start()
        return self

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


def _object(payload: bytes) -> dict[str, Any] | None:
    """A message's JSON object (None: not JSON, or not an object)."""
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def _round(payload: bytes) -> dict[str, Any] | None:
    """The round clock's message, checked (anything else: no clock)."""
    body = _object(payload)
    if body is None:
        return None
    n, started, minutes = body.get("round"), body.get("started"), body.get("minutes")
    if (type(n) is not int or n < 1 or not isinstance(started, (int, float))
            or isinstance(started, bool) or not isinstance(minutes, (int, float))
            or isinstance(minutes, bool) or not 0 < minutes <= 24 * 60):
        return None
    return {"round": n, "started": float(started), "minutes": float(minutes)}


def round_clock(clock: dict[str, Any] | None, now: float) -> dict[str, Any] | None:
    """The round as a board shows it at ``now`` (epoch seconds): seconds left, and
    ``horn`` once the time is up."""
    if clock is None:
        return None
    left = clock["started"] + 60 * clock["minutes"] - now
    return {**clock, "left_s": max(0, round(left)), "horn": left <= 0}


def _games(table: str, score: dict[str, Any]) -> list[dict[str, Any]]:
    """A table's games, the played ones and the one at the table (if a hand of it was
    scored), each as the results sheet lists it."""
    out = []
    current = dict(score, hands=len(score.get("hands") or []))
    for g in [*(score.get("played") or []), current]:
        if not isinstance(g, dict) or not g.get("hands"):
            continue
        try:
            names = [str(n) for n in g["team_names"]][:2]
            totals = [int(t) for t in g["totals"]][:2]
            number, winner = int(g["number"]), g.get("winner")
        except (KeyError, TypeError, ValueError):
            continue
        if len(names) != 2 or len(totals) != 2 or winner not in (None, 0, 1):
            continue
        keys = [n if g.get("names") else f"{table}: {n}" for n in names]
        out.append({"table": table, "game": number, "teams": keys, "totals": totals,
                    "winner": winner, "hands": int(g["hands"]),
                    "status": "won" if winner is not None
                    else "playing" if g is current else "given up"})
    return out


def board(book: TableBook, now: float) -> dict[str, Any]:
    """The tournament board at ``now``: the tables, the standings (games won, then
    points for less against, then points for), every game, and the round clock."""
    rows = book.sorted_rows()
    games = [g for r in sorted(rows, key=lambda r: r.name) if r.score
             for g in _games(r.name, r.score)]
    teams: dict[str, dict[str, Any]] = {}
    for g in games:
        for t in (0, 1):
            name = g["teams"][t]
            line = teams.setdefault(name.casefold(), {
                "team": name, "played": 0, "won": 0, "lost": 0, "points_for": 0,
                "points_against": 0, "playing": None})
            if g["status"] == "playing":
                line["playing"] = {"table": g["table"], "game": g["game"],
                                   "against": g["teams"][1 - t], "score": g["totals"][t],
                                   "their_score": g["totals"][1 - t]}
            elif g["status"] == "won":
                line["played"] += 1
                line["won" if g["winner"] == t else "lost"] += 1
                line["points_for"] += g["totals"][t]
                line["points_against"] += g["totals"][1 - t]
    standings = sorted(teams.values(), key=lambda s: (
        -s["won"], -(s["points_for"] - s["points_against"]), -s["points_for"],
        s["team"].casefold()))
    for place, s in enumerate(standings, 1):
        s["difference"] = s["points_for"] - s["points_against"]
        s["place"] = place
    return {"tables": [r.to_dict() for r in rows],
            "standings": [{k: s[k] for k in STANDING_COLUMNS} for s in standings],
            "games": games, "round": round_clock(book.round, now)}


def playing_text(playing: dict[str, Any] | None) -> str:
    """``table-3 game 2: 6 to 4 v Them``: a team's game in progress, in words."""
    if not playing:
        return ""
    return (f"{playing['table']} game {playing['game']}: {playing['score']} to "
            f"{playing['their_score']} v {playing['against']}")


def results_csv(standings: list[dict[str, Any]]) -> str:
    """The results sheet as CSV: one line a team, the JSON's standings' columns."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(STANDING_COLUMNS)
    for s in standings:
        writer.writerow([playing_text(s[k]) if k == "playing" else s[k]
                         for k in STANDING_COLUMNS])
    return out.getvalue()


def clock_text(clock: dict[str, Any] | None) -> str:
    if clock is None:
        return "no round clock (shuffler tables --round MINUTES starts one)"
    if clock["horn"]:
        return f"round {clock['round']}: TIME (the horn): finish the hand being played"
    m, s = divmod(clock["left_s"], 60)
    return f"round {clock['round']}: {m}:{s:02d} left of {clock['minutes']:g} minutes"


def render_board(view: dict[str, Any]) -> str:
    """The standings and the clock under the tables, for the terminal."""
    lines = [clock_text(view["round"]), "",
             f"{'#':>3} {'team':<24} {'won':>4} {'lost':>4} {'for':>5} {'agst':>5} "
             f"{'diff':>5}  playing now"]
    for s in view["standings"]:
        lines.append(f"{s['place']:>3} {s['team'][:24]:<24} {s['won']:>4} {s['lost']:>4} "
                     f"{s['points_for']:>5} {s['points_against']:>5} "
                     f"{s['difference']:>+5}  {playing_text(s['playing'])}")
    if not view["standings"]:
        lines.append("    no game scored yet at any table")
    return "\n".join(lines)


def render(rows: list[TableRow]) -> str:
    """The terminal table, problems first."""
    lines = [f"{'table':<16} {'state':<12} {'battery':>8} {'passes left':>11} "
             f"{'hands':>5}  fault"]
    for r in rows:
        pct = r.battery.get("percent")
        fault = (r.status.get("fault") or {}).get("kind", "") if r.state != "offline" else ""
        lines.append(f"{r.name:<16} {r.state:<12} "
                     f"{'-' if pct is None else f'{pct:.0f}%':>8} "
                     f"{r.battery.get('passes_left', '-')!s:>11} "
                     f"{'-' if r.hands is None else r.hands!s:>5}  {fault}")
    return "\n".join(lines)
