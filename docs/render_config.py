"""Render the config's keys (shuffler/config.py) into docs/config.md (``--check``: fail if
the page is stale).

    .venv/bin/python docs/render_config.py          # rewrite docs/config.md
    .venv/bin/python docs/render_config.py --check  # exit 1 if docs/config.md is out of date
"""

from __future__ import annotations

import enum
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from shuffler.config import MAX_CONFIG_BYTES, MAX_DEPTH, SOCKET_PATH_BYTES, Config
from shuffler.config_table import Row, rows

PAGE = Path(__file__).resolve().parent / "config.md"
COMMENT_AT = 26  # the column the comments start at
WIDTH = 100

INTRO = f"""# Configuration

Generated from the keys in `shuffler/config.py` (each a `key(...)` field: its default,
what it accepts, its doc) by `docs/render_config.py`: edit a key there, then run
`.venv/bin/python docs/render_config.py`. A test fails while this page is stale.
The deployed machine's example is `docs/deploy/config.toml`.

`shuffler` reads a TOML file: `--config FILE` (or `$SHUFFLER_CONFIG`) and only that;
otherwise the machine's `/etc/shuffler/config.toml` (the deployed service's, see
`docs/deploy/README.md`) and then the user's `~/.config/shuffler/config.toml`
(`$XDG_CONFIG_HOME`) over it, key by key within each table, whichever of them exist;
with neither, the defaults below apply. Every key is optional; a key shown commented
out has no default value (what it does without one is in its comment).

**Finding the service.** Without `--socket`, a command asks the service at the
config's `[service] socket` (in a file with a TOML error, the line `socket = "..."` under
a `[service]` header, read on its own: `stop` and `status` still find the service);
without one there, at the deployed service's
`/run/shuffler/shuffler.sock` when it exists or a service is installed (the machine's
config or `/etc/systemd/system/shuffler.service` is there); else at the user's own
(`$XDG_RUNTIME_DIR/shuffler.sock`). When no service answers on a machine that has one
installed, a real device (`gpio`, `serial:PORT`) is the service's to drive: the command
says it cannot reach the service and exits 3 (`--no-service` drives the device from the
command itself); the simulator runs in-process and says so on stderr. A socket that
was named, by `--socket` (`SHUFFLER_SOCKET`) or by `[service] socket` in the user's own
config (`--config`'s file or `~/.config/shuffler/config.toml`), and is not there is an
error (exit 3, `service_not_running`, naming who named it), never a hand run on the
simulator instead. The simulator's options (`--sim-fault`, `--sim-speed`, `--sim-seed`,
`--sim-dealer`, `--sim-uptime`, or their variables) are for a simulator the command runs
itself: beside a named socket or a service that answers they are refused (exit 2,
`usage`) with `--no-service` as the way to run them here; `shuffler serve` takes them for
the simulator it serves.
`SHUFFLER_SYSTEM_ROOT=DIR` reads `/etc` and `/run` under `DIR` instead (the tests, a
staged image). A bad value stops the command with exit code 2 and
a message naming the file, the key and what was expected (the words of
[every key](#every-key)'s "accepts"), for example:

```
shuffler: /etc/shuffler/config.toml: [hand] passes: expected a whole number from 1 to 30, got 99
```

Unknown keys are errors too (a misspelt key would otherwise be silently ignored).
Only a regular file of at most {MAX_CONFIG_BYTES // 1024} KiB is read (a FIFO, a device or a folder
named as the config is refused at once); numbers must be finite (no `nan` or `inf`), paths
may not hold a NUL byte, `[service] socket` fits a Unix socket address ({SOCKET_PATH_BYTES}
bytes), and tables or arrays nested more than {MAX_DEPTH} deep are refused.
"""

#: a comment on a table's header line
HEADINGS = {
    "pins": "BCM numbers for the gpiozero backend; false leaves an optional part out",
    "mqtt": "telemetry to a broker; no host: off (see docs/mqtt.md)",
    "engine": "the pass engine's timings, on every backend (the pins, a microcontroller, "
              "the simulators)",
}
#: comment lines after a table's keys
NOTES = {
    "battery": """\
One rule (shuffler.core.battery.judge) gives `battery`'s state, the page's, the LED's
and the refusals: critical (at or below critical_volts, or not one pass left above the
cut-off) is exactly when `pass` refuses; a hand is also refused when fewer passes are
left than it asks. A rest reading below the last pass's reading under load, or far above
what the last pass left, is another block: the estimate starts again from its curve.""",
    "engine": """\
These four keys were under [gpio] up to 0.2.0, though every backend uses them (a serial
board sends them to its microcontroller). Under [gpio] they are still taken, with a
warning on stderr naming the new place ("config key moved"); where [engine] gives one
too, the [engine] value is used and the [gpio] one ignored. Move them: the [gpio]
names go in a later release.""",
}

MACHINE = """
The diverter must switch between two cards: with `flap_travel_s` at or above the card
interval (1 / `card_rate`) the config is refused at start, with both figures, for
example `[mechanism] flap_travel_s: the diverter flap takes 150 ms to switch, but at
card_rate 8 a card comes every 125 ms` (exit 2). A servo (`"servo"`,
`"hardware_servo"`) also waits up to one 20 ms pulse frame before it starts to move, so
for a servo `flap_travel_s` + 20 ms must be under the card interval.

**The motor's duty cap.** The motor pins never get more PWM duty than `motor_volts`
over a fresh block of the `[battery] chemistry` at rest (alkaline 9.5 V, lithium and
NiMH 9.8 V), rounded down: the BOM's 6 V motor gets at most 0.63 on alkaline, 0.61 on
lithium or NiMH, so it never runs above its rating, even on a fresh block (9.6 V across a
6 V motor is 160 % of its voltage and more than twice its stall current). A 9 V motor
(`motor_volts = 9`) gets 0.94; 9.8 V or more, no cap. Full speed in the pass engine is
this duty; the soft start ramps up to it. (It is
`GpioConfig.motor_max_duty` in code, made from the two keys when the config loads.) The
serial backend sends the same cap to its microcontroller, which enforces it on the chip
(CONFIG's `max_duty_pct`, [firmware.md](firmware.md)).

**PWM frequency by pin factory.** `motor_pwm_hz` may be 100 to 50 000 Hz (the DRV8833
and TB6612 take more). The pin factory times it: with `lgpio` (software PWM) more than
10 000 Hz is refused when the device opens, with `pigpio` (its daemon's default 5 µs
sampling) more than 8 000 Hz; the message names the factory and the limit (exit 2).

A pin used twice is an error naming both uses; so is a pin of the SPI bus (GPIO8–11)
while the battery monitor is fitted. See `docs/hardware.md` for the wiring.

## The dealer's page and MQTT
"""

FACES = """
The page is described in `docs/guide.md`; every MQTT key and topic in `docs/mqtt.md`.

## Every key

What each key accepts is what an error says it expected.

| key | default | accepts |
| --- | --- | --- |
"""

#: the blocks of the page: the machine's tables, then the page's and MQTT's
BLOCKS = (("", "mechanism", "hand", "table", "battery", "service", "pins", "gpio", "engine"),
          ("web", "mqtt"))


def toml(value: Any) -> str:
    """``value`` as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return toml(value.value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))


def commented(line: str, doc: str) -> list[str]:
    """``line`` with ``doc`` beside it, wrapped; above it if the line is too long."""
    if not doc:
        return [line]
    at = max(COMMENT_AT, len(line) + 2)
    if at > WIDTH // 2:
        return [*(f"# {d}" for d in textwrap.wrap(doc, WIDTH - 2)), line]
    first, *more = textwrap.wrap(doc, WIDTH - at - 2)
    return [f"{line:<{at}}# {first}", *(f"{'':<{at}}# {m}" for m in more)]


def key_lines(row: Row) -> list[str]:
    if row.default is None:  # no default: an example, commented out
        return commented(f"# {row.name} = {toml(row.decl.example)}", row.doc)
    shown = row.default if row.decl.example is None else row.decl.example
    return commented(f"{row.name} = {toml(shown)}", row.doc)


def block(tables: tuple[str, ...], by_table: dict[str, list[Row]]) -> list[str]:
    lines = ["```toml"]
    for table in tables:
        if table:
            lines += ["", *commented(f"[{table}]", HEADINGS.get(table, ""))][len(lines) == 1:]
        for row in by_table[table]:
            lines += key_lines(row)
        lines += [f"# {n}" for n in NOTES.get(table, "").splitlines()]
    return [*lines, "```"]


def default_text(row: Row) -> str:
    if row.decl.default_doc:
        return row.decl.default_doc
    return "none" if row.default is None else f"`{toml(row.default)}`"


def render() -> str:
    by_table: dict[str, list[Row]] = {}
    for row in rows(Config):
        by_table.setdefault(row.table, []).append(row)
    shown = [t for tables in BLOCKS for t in tables]
    assert sorted(shown) == sorted(by_table), f"tables not placed on the page: {by_table}"
    table = [f"| `{r.where}` | {default_text(r)} | {r.kind.expected} |"
             for t in shown for r in by_table[t]]
    return "\n".join([INTRO, *block(BLOCKS[0], by_table), MACHINE, *block(BLOCKS[1], by_table),
                      FACES + "\n".join(table), ""])


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from render_json import publish  # docs/render_json.py: write the page, or --check it

    return publish(PAGE, render(), "docs/render_config.py", sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
