"""The tournament view: every table on one broker, problems first.

:class:`TableBook` is the pure part: it takes (topic, payload) pairs as they arrive and
keeps one row per table; a pass or hand message seen twice (QoS 1 may deliver twice)
counts once, by its ``id``. :class:`TableWatcher` feeds it from a live subscription.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from shuffler.config import MqttConfig

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
        self.lock = threading.Lock()

    def take(self, topic: str, payload: bytes) -> None:
        """One message; anything not shaped like ours is ignored."""
        parts = topic.split("/")
        if len(parts) != 3 or parts[0] != self.prefix:
            return
        _, table, kind = parts
        with self.lock:
            row = self.rows.setdefault(table, TableRow(table))
            if kind == "availability":
                row.online = payload == b"online"
                return
            try:
                body = json.loads(payload)
            except (ValueError, UnicodeDecodeError, RecursionError):
                return
            if not isinstance(body, dict):
                return
            if kind == "state":
                row.status = body
            elif kind in ("pass", "hand"):
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
        for kind in ("availability", "state", "pass", "hand"):
            client.subscribe(f"{self.config.prefix}/+/{kind}", qos=1)
        self.subscribed.set()

    def start(self) -> TableWatcher:
        self._client.connect_async(self.config.host, self.config.port, self.config.keepalive)
        self._client.loop_start()
        return self

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


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
