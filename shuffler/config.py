"""The TOML config: device, mechanism, hand, table, battery.

Every value is checked; an error names the file, the key and what was expected,
and nothing is half-applied::

    >>> try:
    ...     load_config_text('[hand]\\npasses = 0', "shuffler.toml")
    ... except ConfigError as e:
    ...     print(e)
    shuffler.toml: [hand] passes: expected a whole number from 1 to 30, got 0

A missing file is fine (defaults apply) unless it was named explicitly.

Each key is declared once, as a field of its section's dataclass made by
:func:`~shuffler.config_table.key` (its default, what it accepts, its doc): the reader,
the defaults, the checks and docs/config.md (docs/render_config.py) come from it; the
rules across keys are in :func:`_checked`.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shuffler.config_table import (
    FLAG,
    Kind,
    Reader,
    Readers,
    choice,
    group,
    key,
    num,
    path,
    read,
    rows,
    section,
    sub,
    text,
    whole,
    whole_or_false,
)
from shuffler.constants import MAX_CARDS, SOCKET_PATH_BYTES
from shuffler.core.battery import CURVES
from shuffler.core.mechanics import Feed
from shuffler.core.planning import Mode, default_passes
from shuffler.device.contract import EngineTimings, FaultLimits
from shuffler.errors import ConfigError
from shuffler.files import read_limited
from shuffler.logs import get_logger

# where the deployed machine keeps its config and socket: shuffler.paths, light enough
# that the CLI asks a running service without importing this module (no config file)
from shuffler.paths import default_socket_path
from shuffler.paths import discovered_config_paths as discovered_config_paths
from shuffler.paths import service_installed as service_installed
from shuffler.paths import service_socket_path as service_socket_path
from shuffler.pinmap import (
    MOTOR_RATED_VOLTS,
    PIN_ROLES,
    SERVO_FRAME_S,
    SPI0_PINS,
    WIRES,
    divider_ratio,
    motor_duty_cap,
)

# tomllib and socket are imported where a config file is read: start-up stays quick

#: a fresh block at rest, by chemistry (shuffler.core.battery's curves at full charge): the
#: most the motor can see
FRESH_VOLTS = {name: curve.volts(1.0, under_load=False) for name, curve in CURVES.items()}
#: the PWM a driver input takes, by factory: PWM timed in software (lgpio), or by the
#: pigpio daemon at its default 5 µs sampling; the drivers themselves take 50 kHz
PWM_LIMIT_HZ = {"lgpio": 10_000, "pigpio": 8_000}
MAX_PWM_HZ = 50_000
#: pins the kernel's PWM overlays can drive (channel 0: GPIO12/18, channel 1: GPIO13/19)
HARDWARE_PWM = {12: 0, 18: 0, 13: 1, 19: 1}

# The keys: each field made by key() is one, declared once (shuffler/config_table.py);
# docs/config.md is written from them by docs/render_config.py.


def _device_names() -> str:
    """The built-in devices, for the key's doc (docs/config.md): a backend package
    installed beside changes no page; a config naming one is accepted all the same."""
    from shuffler.device import registry  # the registry's names, read when the docs are

    return " | ".join(b.usage if not b.argument else f'"{b.usage}"' for b in registry.builtin())


@dataclass(frozen=True)
class MechanismConfig:
    feed: Feed = key(Feed.TOP, choice({f.value: f for f in Feed}),
                     "which card the roller takes first: top | bottom")
    card_rate: float = key(5.0, num(0.5, 1000), "cards a second (simulator)")
    limits: FaultLimits = group(
        FaultLimits,
        jam_seconds=sub(num(0.05, 10), "beam blocked longer than this: a jam",
                        name="jam_limit_s"),
        misfeed_seconds=sub(num(0.05, 10), "no card for this long while the tray holds "
                            "cards: a misfeed", name="misfeed_limit_s"),
        retries=sub(whole(0, 10), "reverse-and-refeed attempts before a jam latches"),
        reverse_seconds=sub(num(0.0, 5), "how long the motor backs a jammed card out",
                            name="reverse_s"),
        stall_volts=sub(num(3.0, 9.0), "a stop with the battery under this (under load) is "
                        "low battery"),
        max_pass_seconds=sub(num(1, 600), "the motor never runs longer than this in one pass",
                             name="max_pass_s"),
    )
    both_window_s: float = key(0.15, num(0.0, 5), 'both piles lifted closer together than '
                               'this: "could not tell"')
    #: an SG90 at 5 V turns 60 degrees in about 0.1 s; it must fit between two cards
    flap_travel_s: float = key(0.1, num(0.0, 2.0), "the diverter flap's side-to-side time; "
                               "must be under 1/card_rate")

    @property
    def card_interval(self) -> float:
        return 1.0 / self.card_rate


@dataclass(frozen=True)
class HandConfig:
    #: passes a hand as configured; None: ``default_passes`` of the load
    passes_setting: int | None = key(
        None, whole(1, 30), "passes a hand; leave it out to follow the load: "
        "default_passes(cards), the fewest k with 2^k >= cards (5 for 24; "
        "shuffler.core.planning.default_passes, docs/mixing.md)",
        name="passes", example=5, default_doc="default_passes(cards)")
    cards: int = key(24, whole(1, MAX_CARDS), "cards in the load")
    mode: Mode = key(Mode.PLANNED, choice({md.value: md for md in Mode}),
                     "planned (reaches the physical limit) | coin (the plain machine)")
    touch_timeout_s: float = key(300.0, num(1, 86400),
                                 "how long to wait for the touch between passes")

    @property
    def passes(self) -> int:
        """Passes a hand of the configured load."""
        return self.passes_for(self.cards)

    def passes_for(self, cards: int) -> int:
        """Passes a hand of ``cards`` cards: as configured, else ``default_passes(cards)``."""
        return self.passes_setting or default_passes(cards)


_SEATS = Kind("a list of 2 to 8 distinct seat names",
              lambda v: (isinstance(v, list) and 2 <= len(v) <= 8
                         and all(isinstance(s, str) and s for s in v) and len(set(v)) == len(v)),
              tuple)


@dataclass(frozen=True)
class TableConfig:
    seats: tuple[str, ...] = key(("North", "East", "South", "West"), _SEATS,
                                 "clockwise: each seat's left neighbour follows it")
    #: checked against the seats once they are read (shuffler.config._checked)
    first_dealer: str = key("North", Kind("one of the seats", lambda v: True),
                            "who deals the first hand (default: the first seat)",
                            default_doc="the first seat")
    decks: int = key(1, whole(1, 2), "2: two packs in turn, the idle one shuffled while "
                     "the other is played")
    game_to: int = key(10, whole(1, 100), "the first game's target (after that each game "
                       "keeps the one chosen on the page)")


@dataclass(frozen=True)
class BatteryConfig:
    chemistry: str = key("alkaline", choice({c: c for c in CURVES}),
                         " | ".join(CURVES) + ": the block's discharge curve")
    low_volts: float = key(7.2, num(4.0, 10.0),
                           "at rest: below it `battery`, `status`, the page say low; below a "
                           "fresh block's volts (" + ", ".join(
                               f"{v:g} {c}" for c, v in FRESH_VOLTS.items()) + ")")
    critical_volts: float = key(6.6, num(4.0, 10.0), "at rest: at or below it critical, no "
                                "pass starts (exit 4); at most low_volts")
    cutoff_load_volts: float = key(5.8, num(3.0, 9.0),
                                   "under load: passes left are counted down to this")


def _pin(role: str, doc: str = "") -> Any:
    """A ``[pins]`` key: the pin map's wire (shuffler.pinmap.WIRES) and its default."""
    wire = WIRES[role]
    expected = "a BCM pin number from 2 to 27"
    kind = (whole_or_false(2, 27, expected + " or false (not fitted)") if wire.optional
            else Kind(expected, lambda v: type(v) is int and 2 <= v <= 27))
    return key(wire.bcm, kind, doc or wire.part, table="pins")


@dataclass(frozen=True)
class GpioConfig:
    """Pins (BCM numbers) and parts for the gpiozero backend; see docs/hardware.md."""

    touch: int = _pin("touch")
    motor: int = _pin("motor")  # the motor driver's forward input (or its only input)
    motor_backward: int | None = _pin("motor_backward", 'only with [gpio] motor = "motor"')
    diverter: int = _pin("diverter")  # servo signal or solenoid driver
    beam: int = _pin("beam")  # IR beam receiver: low while a card blocks it
    tray: int = _pin("tray")  # low while cards sit in the tray
    pile_left: int = _pin("pile_left")  # low while a pile sits on the left
    pile_right: int = _pin("pile_right")
    led_red: int | None = _pin("led_red")
    led_green: int | None = _pin("led_green")
    led_blue: int | None = _pin("led_blue")
    buzzer: int | None = _pin("buzzer")
    motor_kind: str = key("motor", choice({"motor": "motor", "pwm": "pwm"}),
                          '"motor": H-bridge (can reverse) | "pwm": one pin', name="motor")
    motor_pwm_hz: int = key(10_000, whole(100, MAX_PWM_HZ), "PWM frequency on the driver's "
                            "inputs (lgpio: 10000 at most, pigpio: 8000)")
    motor_volts: float = key(MOTOR_RATED_VOLTS, num(1.5, 24.0),
                             "the feed motor's rated volts: caps the motor's PWM duty")
    #: the largest duty the motor pins ever get, from motor_volts over a fresh block of the
    #: [battery] chemistry (derived: made by the loader; the default: the BOM's 6 V motor
    #: on a fresh alkaline block)
    motor_max_duty: float = motor_duty_cap(MOTOR_RATED_VOLTS, FRESH_VOLTS["alkaline"])
    diverter_kind: str = key("servo", choice({k: k for k in ("servo", "hardware_servo",
                                                             "solenoid")}),
                             '"servo" | "hardware_servo" (kernel PWM on GPIO12/13/18/19: no '
                             'jitter) | "solenoid"', name="diverter")
    servo_angle: float = key(30.0, num(5, 90), "degrees either side of centre: the pulse "
                             "widths follow it")
    servo_min_pulse_ms: float = key(0.5, num(0.3, 1.5), "the servo's pulse at -90 degrees")
    servo_max_pulse_ms: float = key(2.5, num(1.5, 3.0),
                                    "and at +90 degrees (SG90: 0.5 to 2.5 ms)")
    adc_channel: int | None = key(
        0, whole_or_false(0, 7, "an MCP3008 channel from 0 to 7, or false (no monitor)"),
        "MCP3008 channel of the battery divider; false: no monitor")
    divider_ratio: float = key(round(divider_ratio(), 2), num(1.0, 20.0),
                               "(R_top + R_bottom) / R_bottom")
    adc_vref: float = key(3.3, num(1.0, 5.5), "the MCP3008's reference volts")
    #: contact bounce, never a person's tap: a longer one would join quick taps into one
    #: contact, and 9 taps into a long press (issue 46)
    touch_debounce_s: float = key(0.02, num(0.0, 0.05), "a release shorter than this is "
                                  "contact bounce: the same touch (a tap's release is longer)")
    long_press_s: float = key(2.0, num(0.5, 10.0), "a touch held this long without letting go "
                              "is a long press: it clears a latched fault (see guide.md)")
    touch_active_high: bool = key(True, FLAG, "true: high while touched (a TTP223)")
    beam_active_high: bool = key(False, FLAG, "true: high while a card blocks the beam "
                                 "(an open-drain receiver is low)")
    tray_active_high: bool = key(False, FLAG, "true: high while cards sit in the tray "
                                 "(a TCRT5000 board is low)")
    piles_active_high: bool = key(False, FLAG, "true: high while a pile is present")

    def servo_pulse_ms(self, angle: float) -> float:
        """The pulse width for ``angle`` degrees (-90..90) on this servo."""
        lo, hi = self.servo_min_pulse_ms, self.servo_max_pulse_ms
        return lo + (hi - lo) * (angle + 90.0) / 180.0

    def pins(self) -> dict[str, int]:
        """Every pin in use, by role."""
        used = {role: getattr(self, role) for role in PIN_ROLES}
        if self.motor_kind == "pwm":
            used.pop("motor_backward")
        return {role: pin for role, pin in used.items() if pin is not None}


@dataclass(frozen=True)
class EngineConfig:
    """The pass engine's timings, the same on every backend (the Pi's pins, a
    microcontroller, the simulators): each backend is given them when it is opened."""

    soft_start_s: float = key(0.1, num(0.0, 2.0), "the motor ramps up to full duty over this")
    #: an IR slot gate switches in tens of microseconds; a card blocks it for tens of ms
    beam_glitch_s: float = key(0.001, num(0.0, 0.05),
                               "a beam level counts once it has held this long")
    beam_min_blocked_s: float = key(0.005, num(0.0, 0.5),
                                    "blocked for less than this is not a card")
    #: a drop-out inside one card (a hole, a bent corner, a dirty lens) is the same card
    beam_min_gap_s: float = key(0.01, num(0.0, 0.5),
                                "a card counts once the beam then stayed clear this long")

    def timings(self) -> EngineTimings:
        return EngineTimings(soft_start_s=self.soft_start_s, glitch_s=self.beam_glitch_s,
                             min_blocked_s=self.beam_min_blocked_s,
                             min_gap_s=self.beam_min_gap_s)


#: the keys [engine] took over from [gpio] (after 0.2.0): read there too, with a warning
MOVED_TO_ENGINE = ("soft_start_s", "beam_glitch_s", "beam_min_blocked_s", "beam_min_gap_s")


@dataclass(frozen=True)
class ServiceConfig:
    socket: Path | None = key(
        None, path("a socket path", most=SOCKET_PATH_BYTES),
        "where the service listens (default: $XDG_RUNTIME_DIR/shuffler.sock, or without "
        "XDG_RUNTIME_DIR shuffler.sock in the default state folder, $XDG_STATE_HOME/shuffler, "
        "0750): never a bare name in /tmp", example="/run/shuffler/shuffler.sock",
        default_doc="$XDG_RUNTIME_DIR/shuffler.sock")
    group: str | None = key(None, text("a group name", most=32), "the socket's group (mode "
                            "0660; default: the service's own)", example="shuffler")
    max_clients: int = key(32, whole(1, 1024), "connections answered at once")
    user: str | None = key(
        None, text("a user name or uid", most=32), "the service's account: the CLI trusts "
        "a socket (its file and the process listening) owned by root, by the CLI's own "
        "user or by this one (a name or a uid); any other owner is refused, exit 3",
        example="shuffler")

    @property
    def socket_path(self) -> Path:
        return self.socket or default_socket_path()


_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})")
_HOSTS = Kind("a list of host names (letters, digits, '-' and '.')",
              lambda v: isinstance(v, list) and len(v) <= 16
              and all(isinstance(h, str) and _HOST_NAME.fullmatch(h) for h in v),
              lambda v: tuple(h.lower() for h in v))


@dataclass(frozen=True)
class WebConfig:
    """``[web]``: the dealer's page (docs/guide.md); off unless enabled."""

    enabled: bool = key(False, FLAG, "true: shuffler serve also serves the dealer's page")
    lan: bool = key(False, FLAG, "false: loopback only; true: the LAN (actions need a phone "
                    "paired with `shuffler pair`)")
    port: int = key(8080, whole(1, 65535), "the page's TCP port")
    hosts: tuple[str, ...] = key((), _HOSTS, "other names the page is reached by (the host "
                                 "name, its .local, its addresses and localhost always work)")

    @property
    def bind(self) -> str:
        return "0.0.0.0" if self.lan else "127.0.0.1"


#: one MQTT topic level: no wildcards, no separators
_TOPIC_LEVEL = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LEVEL = Kind("letters, digits, - and _ (1 to 64)",
              lambda v: isinstance(v, str) and _TOPIC_LEVEL.fullmatch(v) is not None)


@dataclass(frozen=True)
class MqttConfig:
    """``[mqtt]``: telemetry to a broker (see docs/mqtt.md); no ``host``: off."""

    host: str | None = key(None, text("a host name or address", most=253),
                           "the broker; unset: telemetry off", example="broker.local")
    port: int = key(1883, whole(1, 65535), "8883 is the usual port with TLS")
    table: str = key("table", _LEVEL, "this machine's name on the broker (default: the host name)",
                     example="table-7",
                     default_doc="the host name")
    prefix: str = key("shuffler", _LEVEL, "topics live under <prefix>/<table>/")
    tls: bool = key(False, FLAG, "TLS to the broker")
    ca_file: Path | None = key(None, path(), "the CA certificate the broker's is checked "
                               "against", example="/etc/shuffler/ca.crt")
    cert_file: Path | None = key(None, path(), "a TLS client certificate",
                                 example="/etc/shuffler/table-7.crt")
    key_file: Path | None = key(None, path(), "its key (needs cert_file)",
                                example="/etc/shuffler/table-7.key")
    username: str | None = key(None, Kind("a user name", lambda v: isinstance(v, str)
                                          and 0 < len(v) <= 128),
                               "the broker's user", example="table-7")
    password_file: Path | None = key(None, path(), "the password, from a file (never on the "
                                     "command line or in the config); needs username",
                                     example="/etc/shuffler/mqtt-password")
    keepalive: int = key(30, whole(5, 3600), "the broker declares the table offline 1.5 x "
                         "this after it goes silent", name="keepalive_s")
    queue_limit: int = key(1000, whole(10, 100_000), "messages kept while the broker is "
                           "away (oldest dropped first)")
    remote_actions: bool = key(False, FLAG, "accept clear and new_game over MQTT (never a "
                               "pass)")
    discovery: bool = key(True, FLAG, "Home Assistant discovery topics")
    discovery_prefix: str = key("homeassistant", _LEVEL, "Home Assistant's discovery topic")

    @property
    def enabled(self) -> bool:
        return self.host is not None


@dataclass(frozen=True)
class Config:
    device: str = key("sim", Kind("a device name", lambda v: isinstance(v, str)),
                      _device_names)
    state_dir: Path | None = key(None, path("a folder path"),
                                 "counters and latched faults (default: $XDG_STATE_HOME/shuffler)",
                                 example="/var/lib/shuffler",
                                 default_doc="$XDG_STATE_HOME/shuffler")
    mechanism: MechanismConfig = section(MechanismConfig, "mechanism")
    hand: HandConfig = section(HandConfig, "hand")
    table: TableConfig = section(TableConfig, "table")
    battery: BatteryConfig = section(BatteryConfig, "battery")
    gpio: GpioConfig = section(GpioConfig, "gpio")  # and [pins]
    engine: EngineConfig = section(EngineConfig, "engine")
    service: ServiceConfig = section(ServiceConfig, "service")
    mqtt: MqttConfig = section(MqttConfig, "mqtt")
    web: WebConfig = section(WebConfig, "web")
    source: str = "(defaults)"


log = get_logger("shuffler.config")

#: a config file is a page or two of TOML; anything bigger is a mistake
MAX_CONFIG_BYTES = 256 * 1024
#: tables and arrays inside one another, at most
MAX_DEPTH = 32


def load_config(path: str | os.PathLike | None, *, explicit: bool = True) -> Config:
    """Read ``path``; with ``explicit=False`` a missing file just means defaults.

    Only a regular file is read, and only up to :data:`MAX_CONFIG_BYTES`, so a FIFO
    or a device named as the config is an error, never a hang."""
    if path is None:
        return Config()
    doc = _read_doc(Path(path), explicit)
    return Config() if doc is None else _config_from_doc(doc, str(path))


def load_configs(paths: list[Path]) -> Config:
    """The configs that exist among ``paths``, each checked on its own (an error names
    its file), the later ones' keys over the earlier ones', table by table: the
    system's config, then the user's (:func:`discovered_config_paths`)."""
    merged: dict[str, Any] = {}
    sources = []
    for file in paths:
        doc = _read_doc(file, explicit=False)
        if doc is None:
            continue
        _config_from_doc(copy.deepcopy(doc), str(file), warn=False)  # the merge warns
        sources.append(str(file))
        for table, value in doc.items():
            if isinstance(value, dict) and isinstance(merged.get(table), dict):
                merged[table] = {**merged[table], **value}
            else:
                merged[table] = value
    if not sources:
        return Config()
    return _config_from_doc(merged, " + ".join(sources))


def _read_doc(p: Path, explicit: bool) -> dict[str, Any] | None:
    raw = read_limited(p, "config file", limit=MAX_CONFIG_BYTES, error=ConfigError)
    if raw is None:
        if not explicit:
            return None
        raise ConfigError(f"{p}: no such config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: cannot read the config file: not UTF-8 text (byte "
                          f"{e.start})") from None
    return _parse(text, str(p))


def _depth(doc: Any) -> int:
    """How deep tables and arrays nest in ``doc``, without recursion."""
    deepest, todo = 0, [(doc, 1)]
    while todo and deepest <= MAX_DEPTH:
        value, depth = todo.pop()
        deepest = max(deepest, depth)
        children = value.values() if isinstance(value, dict) else value
        todo.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return deepest


def load_config_text(text: str, source: str = "<config>") -> Config:
    return _config_from_doc(_parse(text, source), source)


def _parse(text: str, source: str) -> dict[str, Any]:
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: not valid TOML: {e}") from None
    except RecursionError:
        doc = None
    if doc is None or _depth(doc) > MAX_DEPTH:
        raise ConfigError(f"{source}: tables or arrays nested more than {MAX_DEPTH} deep")
    return doc


def _config_from_doc(doc: dict[str, Any], source: str, *, warn: bool = True) -> Config:
    readers = Readers(Reader(source, "top level", doc))
    cfg = read(Config, readers)  # every key, each checked
    cfg = _moved_to_engine(cfg, readers, warn)
    readers.done()  # no key left unknown
    return _checked(cfg, readers, source)


def _moved_to_engine(cfg: Config, r: Readers, warn: bool) -> Config:
    """A key [engine] took over from [gpio], given under [gpio] as before: taken (and
    checked) with a warning naming its new place; where [engine] gives it too, that wins."""
    gpio, engine, taken = r["gpio"], r["engine"], {}
    kinds = {row.name: row.kind for row in rows(EngineConfig, "engine")}
    for name in MOVED_TO_ENGINE:
        if name not in gpio.data:
            continue
        value = gpio.get(name, None, kinds[name])
        if name in engine.given:
            what = f"ignored: [engine] {name} is given too"
        else:
            taken[name] = value
            what = "taken for now"
        if warn:
            log.warning("config key moved", source=gpio.source, key=f"[gpio] {name}",
                        now=f"[engine] {name}",
                        advice=f"{what}; move it to [engine] (the [gpio] name goes in a "
                               "later release)")
    return replace(cfg, engine=replace(cfg.engine, **taken)) if taken else cfg


def _checked(cfg: Config, r: Readers, source: str) -> Config:
    """``cfg`` checked across keys, its derived values filled in."""
    if cfg.device != "sim":  # the registry's names (shuffler.devices); imported only when asked
        from shuffler.device import registry

        if not (len(cfg.device) <= 4095 and cfg.device.isprintable()
                and registry.usable(cfg.device)):
            r[""].fail("device", registry.usage(), cfg.device)
    m, t, b = cfg.mechanism, cfg.table, cfg.battery
    if m.flap_travel_s >= m.card_interval:
        raise ConfigError(
            f"{source}: [mechanism] flap_travel_s: the diverter flap takes "
            f"{m.flap_travel_s * 1000:.0f} ms to switch, but at card_rate "
            f"{m.card_rate:g} a card comes every {m.card_interval * 1000:.0f} ms:"
            " it cannot switch between two cards (lower card_rate or fit a faster flap)")
    if "first_dealer" not in r["table"].given:
        t = replace(t, first_dealer=t.seats[0])
    elif t.first_dealer not in t.seats:
        r["table"].fail("first_dealer", f"one of the seats {list(t.seats)}", t.first_dealer)
    if b.critical_volts > b.low_volts:
        r["battery"].fail("critical_volts", f"at most low_volts ({b.low_volts})",
                          b.critical_volts)
    fresh = FRESH_VOLTS[b.chemistry]
    if b.low_volts >= fresh:  # no block of this chemistry would ever read below it as ok
        r["battery"].fail("low_volts", f"below a fresh {b.chemistry} block's {fresh:g} V at "
                          "rest (at or above it the battery never reads low)", b.low_volts)
    gpio = _checked_gpio(cfg.gpio, r["pins"], b.chemistry)
    if gpio.diverter_kind != "solenoid" and \
            m.flap_travel_s + SERVO_FRAME_S >= m.card_interval:
        raise ConfigError(
            f"{source}: [mechanism] flap_travel_s: the servo's next pulse comes up to "
            f"{SERVO_FRAME_S * 1000:.0f} ms after the command and the flap then takes "
            f"{m.flap_travel_s * 1000:.0f} ms, but at card_rate {m.card_rate:g}"
            f" a card comes every {m.card_interval * 1000:.0f} ms (lower card_rate, "
            "fit a faster flap, or a solenoid)")
    return replace(cfg, table=t, gpio=gpio, mqtt=_checked_mqtt(cfg.mqtt, r["mqtt"]),
                   source=source)


def _checked_gpio(cfg: GpioConfig, p: Reader, chemistry: str) -> GpioConfig:
    if cfg.diverter_kind == "hardware_servo" and cfg.diverter not in HARDWARE_PWM:
        p.fail("diverter", "a PWM-capable pin (GPIO12, 13, 18 or 19) for "
               '[gpio] diverter = "hardware_servo"', cfg.diverter)
    seen: dict[int, str] = {}
    for role, pin in cfg.pins().items():
        if pin in seen:
            raise ConfigError(f"{p.source}: [pins] {role}: GPIO{pin} is already used by "
                              f"[pins] {seen[pin]}")
        if cfg.adc_channel is not None and pin in SPI0_PINS:
            raise ConfigError(f"{p.source}: [pins] {role}: GPIO{pin} is the battery monitor's "
                              f"{SPI0_PINS[pin]}")
        seen[pin] = role
    return replace(cfg, motor_max_duty=motor_duty_cap(cfg.motor_volts, FRESH_VOLTS[chemistry]))


def _default_table() -> str:
    """The host's short name, when it makes a topic level: tables differ by machine."""
    import socket

    name = socket.gethostname().split(".")[0]
    return name if _TOPIC_LEVEL.fullmatch(name) else MqttConfig.table


def _checked_mqtt(cfg: MqttConfig, q: Reader) -> MqttConfig:
    if cfg.password_file is not None and cfg.username is None:
        q.fail("username", "a user name to go with password_file", None)
    if cfg.key_file is not None and cfg.cert_file is None:
        q.fail("cert_file", "a client certificate to go with key_file", None)
    return cfg if "table" in q.given else replace(cfg, table=_default_table())
