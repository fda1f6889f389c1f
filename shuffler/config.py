"""The TOML config: device, mechanism, hand, table, battery.

Every value is checked; an error names the file, the key and what was expected,
and nothing is half-applied::

    >>> try:
    ...     load_config_text('[hand]\\npasses = 0', "shuffler.toml")
    ... except ConfigError as e:
    ...     print(e)
    shuffler.toml: [hand] passes: expected a whole number from 1 to 30, got 0

A missing file is fine (defaults apply) unless it was named explicitly.
"""

from __future__ import annotations

import copy
import math
import os
import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from shuffler.core.battery import CURVES
from shuffler.core.cards import MAX_CARDS
from shuffler.core.mechanics import Feed
from shuffler.core.planning import Mode, default_passes
from shuffler.device.contract import FaultLimits
from shuffler.errors import ConfigError
from shuffler.files import read_limited

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
    default_pins,
    divider_ratio,
    motor_duty_cap,
)

# tomllib and socket are imported where a config file is read: start-up stays quick

#: what fits in a Unix socket address (sun_path less its final NUL)
SOCKET_PATH_BYTES = 107

_short = reprlib.Repr()  # values in messages: short, and safe however deep
_short.maxlevel, _short.maxstring, _short.maxother = 3, 60, 60



@dataclass(frozen=True)
class HandConfig:
    #: passes a hand as configured; None: ``default_passes`` of the load
    passes_setting: int | None = None
    cards: int = 24
    mode: Mode = Mode.PLANNED
    touch_timeout_s: float = 300.0  # between passes, how long to wait for the dealer

    @property
    def passes(self) -> int:
        """Passes a hand of the configured load."""
        return self.passes_for(self.cards)

    def passes_for(self, cards: int) -> int:
        """Passes a hand of ``cards`` cards: as configured, else ``default_passes(cards)``."""
        return self.passes_setting or default_passes(cards)


@dataclass(frozen=True)
class TableConfig:
    #: seats in clockwise order, so each seat's left-hand neighbour follows it
    seats: tuple[str, ...] = ("North", "East", "South", "West")
    first_dealer: str = "North"
    #: 2: two packs in turn; the machine shuffles the idle one while the other is played
    decks: int = 1
    game_to: int = 10  # the score that wins a game


@dataclass(frozen=True)
class BatteryConfig:
    chemistry: str = "alkaline"
    low_volts: float = 7.2  # at rest, warn
    critical_volts: float = 6.6  # at rest, refuse to start
    cutoff_load_volts: float = 5.8  # under load: the estimate counts passes down to this


@dataclass(frozen=True)
class MechanismConfig:
    feed: Feed = Feed.TOP
    card_rate: float = 5.0
    both_window_s: float = 0.15  # pile lifts closer than this: "both at once"
    limits: FaultLimits = field(default_factory=FaultLimits)
    #: seconds the diverter flap takes from one side to the other (an SG90 at 5 V
    #: turns 60 degrees in about 0.1 s); it must fit between two cards
    flap_travel_s: float = 0.1

    @property
    def card_interval(self) -> float:
        return 1.0 / self.card_rate


#: a fresh block at rest, by chemistry (shuffler.core.battery's curves at full charge): the
#: most the motor can see
FRESH_VOLTS = {name: curve.volts(1.0, under_load=False) for name, curve in CURVES.items()}
#: the PWM a driver input takes, by factory: PWM timed in software (lgpio), or by the
#: pigpio daemon at its default 5 µs sampling; the drivers themselves take 50 kHz
PWM_LIMIT_HZ = {"lgpio": 10_000, "pigpio": 8_000}
MAX_PWM_HZ = 50_000

#: the MCP3008 on SPI0 (SPI0_PINS, from shuffler.pinmap) takes four pins when fitted
_PIN = default_pins()  # the defaults below come from the one pin map
#: pins the kernel's PWM overlays can drive (channel 0: GPIO12/18, channel 1: GPIO13/19)
HARDWARE_PWM = {12: 0, 18: 0, 13: 1, 19: 1}
OPTIONAL_PINS = ("motor_backward", "led_red", "led_green", "led_blue", "buzzer")


@dataclass(frozen=True)
class GpioConfig:
    """Pins (BCM numbers) and parts for the gpiozero backend; see docs/hardware.md."""

    touch: int = _PIN["touch"]
    motor: int = _PIN["motor"]  # the motor driver's forward input (or its only input)
    motor_backward: int | None = _PIN["motor_backward"]  # the H-bridge's reverse input
    diverter: int = _PIN["diverter"]  # servo signal or solenoid driver
    beam: int = _PIN["beam"]  # IR beam receiver: low while a card blocks it
    tray: int = _PIN["tray"]  # low while cards sit in the tray
    pile_left: int = _PIN["pile_left"]  # low while a pile sits on the left
    pile_right: int = _PIN["pile_right"]
    led_red: int | None = _PIN["led_red"]
    led_green: int | None = _PIN["led_green"]
    led_blue: int | None = _PIN["led_blue"]
    buzzer: int | None = _PIN["buzzer"]
    motor_kind: str = "motor"  # "motor": H-bridge, can reverse; "pwm": one pin, cannot
    motor_pwm_hz: int = 10_000  # the driver's PWM input (DRV8833/TB6612 take up to 50 kHz+)
    motor_volts: float = MOTOR_RATED_VOLTS  # the feed motor's rated voltage
    #: the largest duty the motor pins ever get, from motor_volts over a fresh block of the
    #: [battery] chemistry (made by load_config_text; the default: the BOM's 6 V motor on
    #: a fresh alkaline block)
    motor_max_duty: float = motor_duty_cap(MOTOR_RATED_VOLTS, FRESH_VOLTS["alkaline"])
    #: "servo" (pulses from the pin factory), "hardware_servo" (kernel PWM through
    #: rpi-hardware-pwm on GPIO12/13/18/19: no jitter) or "solenoid"
    diverter_kind: str = "servo"
    servo_angle: float = 30.0  # degrees either side of centre
    servo_min_pulse_ms: float = 0.5  # the servo's pulse at -90 degrees
    servo_max_pulse_ms: float = 2.5  # and at +90 degrees (SG90: 0.5 to 2.5 ms)
    adc_channel: int | None = 0  # MCP3008 channel of the battery divider; None: no monitor
    divider_ratio: float = round(divider_ratio(), 2)  # (R_top + R_bottom) / R_bottom
    adc_vref: float = 3.3
    touch_debounce_s: float = 0.3
    long_press_s: float = 2.0  # a touch held this long clears a latched fault
    soft_start_s: float = 0.1
    #: beam glitch filter: a level counts once it has held this long (an IR slot
    #: gate switches in tens of microseconds; a card blocks it for tens of ms)
    beam_glitch_s: float = 0.001
    beam_min_blocked_s: float = 0.005  # shorter than this blocked is not a card
    #: a card counts once the beam then stayed clear this long: a drop-out inside
    #: one card (a hole, a bent corner, a dirty lens) is the same card
    beam_min_gap_s: float = 0.01
    # which level means "active" (beam blocked, tray or pile covered, touched)
    touch_active_high: bool = True  # TTP223: high while touched
    beam_active_high: bool = False  # open-drain receiver: low while blocked
    tray_active_high: bool = False  # TCRT5000 board: low while covered
    piles_active_high: bool = False

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


def _pin_ok(optional: bool) -> Callable[[Any], bool]:
    """A BCM pin number from 2 to 27, or false for a pin that is ``optional``."""
    def ok(v: Any) -> bool:
        return (type(v) is int and 2 <= v <= 27) or (optional and v is False)
    return ok


def _gpio_config(p: _Reader, g: _Reader, chemistry: str = "alkaline") -> GpioConfig:
    d = GpioConfig()
    values: dict[str, Any] = {}
    for role in d.pins():
        default = getattr(d, role)
        optional = role in OPTIONAL_PINS
        expected = "a BCM pin number from 2 to 27" + (" or false (not fitted)" if optional else "")
        values[role] = p.get(role, default, expected, _pin_ok(optional),
                             lambda v: None if v is False else v)
    p.done()
    values["motor_kind"] = g.choice("motor", d.motor_kind, {"motor": "motor", "pwm": "pwm"})
    values["motor_pwm_hz"] = g.whole("motor_pwm_hz", d.motor_pwm_hz, 100, MAX_PWM_HZ)
    values["motor_volts"] = g.num("motor_volts", d.motor_volts, 1.5, 24.0)
    values["motor_max_duty"] = motor_duty_cap(values["motor_volts"], FRESH_VOLTS[chemistry])
    values["diverter_kind"] = g.choice("diverter", d.diverter_kind,
                                       {k: k for k in ("servo", "hardware_servo", "solenoid")})
    values["servo_angle"] = g.num("servo_angle", d.servo_angle, 5, 90)
    values["servo_min_pulse_ms"] = g.num("servo_min_pulse_ms", d.servo_min_pulse_ms, 0.3, 1.5)
    values["servo_max_pulse_ms"] = g.num("servo_max_pulse_ms", d.servo_max_pulse_ms, 1.5, 3.0)
    values["adc_channel"] = g.get("adc_channel", d.adc_channel,
                                  "an MCP3008 channel from 0 to 7, or false (no monitor)",
                                  lambda v: (type(v) is int and 0 <= v <= 7) or v is False,
                                  lambda v: None if v is False else v)
    values["divider_ratio"] = g.num("divider_ratio", d.divider_ratio, 1.0, 20.0)
    values["adc_vref"] = g.num("adc_vref", d.adc_vref, 1.0, 5.5)
    values["touch_debounce_s"] = g.num("touch_debounce_s", d.touch_debounce_s, 0.0, 5.0)
    values["long_press_s"] = g.num("long_press_s", d.long_press_s, 0.5, 10.0)
    values["soft_start_s"] = g.num("soft_start_s", d.soft_start_s, 0.0, 2.0)
    values["beam_glitch_s"] = g.num("beam_glitch_s", d.beam_glitch_s, 0.0, 0.05)
    values["beam_min_blocked_s"] = g.num("beam_min_blocked_s", d.beam_min_blocked_s, 0.0, 0.5)
    values["beam_min_gap_s"] = g.num("beam_min_gap_s", d.beam_min_gap_s, 0.0, 0.5)
    for sensor in ("touch", "beam", "tray", "piles"):
        key = f"{sensor}_active_high"
        values[key] = g.flag(key, getattr(d, key))
    g.done()
    if values["diverter_kind"] == "hardware_servo" and values["diverter"] not in HARDWARE_PWM:
        p.fail("diverter", "a PWM-capable pin (GPIO12, 13, 18 or 19) for "
               '[gpio] diverter = "hardware_servo"', values["diverter"])
    cfg = GpioConfig(**values)
    seen: dict[int, str] = {}
    for role, pin in cfg.pins().items():
        if pin in seen:
            raise ConfigError(f"{p.source}: [pins] {role}: GPIO{pin} is already used by "
                              f"[pins] {seen[pin]}")
        if cfg.adc_channel is not None and pin in SPI0_PINS:
            raise ConfigError(f"{p.source}: [pins] {role}: GPIO{pin} is the battery monitor's "
                              f"{SPI0_PINS[pin]}")
        seen[pin] = role
    return cfg


@dataclass(frozen=True)
class ServiceConfig:
    socket: Path | None = None  # None: default_socket_path()
    group: str | None = None  # the socket's group (mode 0660); None: the service's own
    max_clients: int = 32
    #: the account the service runs as: the CLI trusts a socket whose owner is root,
    #: the CLI's own user or this one (a name or a uid), and refuses any other
    user: str | None = None

    @property
    def socket_path(self) -> Path:
        return self.socket or default_socket_path()


@dataclass(frozen=True)
class WebConfig:
    """``[web]``: the dealer's page (docs/guide.md); off unless enabled."""

    enabled: bool = False
    lan: bool = False  # false: loopback only; true: every address (actions need pairing)
    port: int = 8080
    #: names the page may be reached by besides the machine's own name and addresses
    hosts: tuple[str, ...] = ()

    @property
    def bind(self) -> str:
        return "0.0.0.0" if self.lan else "127.0.0.1"


@dataclass(frozen=True)
class MqttConfig:
    """``[mqtt]``: telemetry to a broker (see docs/mqtt.md); no ``host``: off."""

    host: str | None = None
    port: int = 1883
    table: str = "table"
    prefix: str = "shuffler"
    tls: bool = False
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    username: str | None = None
    password_file: Path | None = None  # never on the command line or in the config itself
    keepalive: int = 30
    queue_limit: int = 1000
    remote_actions: bool = False  # accept clear and new_game over MQTT
    discovery: bool = True
    discovery_prefix: str = "homeassistant"

    @property
    def enabled(self) -> bool:
        return self.host is not None


@dataclass(frozen=True)
class Config:
    device: str = "sim"
    state_dir: Path | None = None
    mechanism: MechanismConfig = field(default_factory=MechanismConfig)
    hand: HandConfig = field(default_factory=HandConfig)
    table: TableConfig = field(default_factory=TableConfig)
    battery: BatteryConfig = field(default_factory=BatteryConfig)
    gpio: GpioConfig = field(default_factory=lambda: GpioConfig())
    service: ServiceConfig = field(default_factory=ServiceConfig)
    mqtt: MqttConfig = field(default_factory=MqttConfig)
    web: WebConfig = field(default_factory=WebConfig)
    source: str = "(defaults)"


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
    for path in paths:
        doc = _read_doc(path, explicit=False)
        if doc is None:
            continue
        _config_from_doc(copy.deepcopy(doc), str(path))
        sources.append(str(path))
        for key, value in doc.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
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


# -- validation ---------------------------------------------------------------


_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})")


class _Reader:
    """Reads one table of the TOML document, checking each key once."""

    def __init__(self, source: str, table: str, data: Any) -> None:
        self.source, self.table = source, table
        if not isinstance(data, dict):
            self.fail(None, "a table", data)
        self.data = dict(data)

    def fail(self, key: str | None, expected: str, got: Any) -> NoReturn:
        raise ConfigError(f"{self.source}: {self.where(key)}: expected {expected}, "
                          f"got {_short.repr(got)}")

    def where(self, key: str | None) -> str:
        table = "" if self.table == "top level" else f"[{self.table}]"
        return " ".join(p for p in (table, key) if p) or "top level"

    def get(
        self,
        key: str,
        default: Any,
        expected: str,
        ok: Callable[[Any], bool],
        convert: Callable[[Any], Any] = lambda v: v,
    ) -> Any:
        if key not in self.data:
            return default
        value = self.data.pop(key)
        try:
            good = ok(value)
        except Exception:
            good = False
        if not good:
            self.fail(key, expected, value)
        return convert(value)

    def whole(self, key: str, default: int, lo: int, hi: int) -> int:
        return self.get(
            key,
            default,
            f"a whole number from {lo} to {hi}",
            lambda v: type(v) is int and lo <= v <= hi,
        )

    def num(self, key: str, default: float, lo: float, hi: float) -> float:
        """A number from ``lo`` to ``hi``: never NaN or an infinity."""
        return self.get(
            key,
            default,
            f"a number from {lo} to {hi}",
            lambda v: type(v) in (int, float) and math.isfinite(v) and lo <= v <= hi,
            float,
        )

    def flag(self, key: str, default: bool) -> bool:
        return self.get(key, default, "true or false", lambda v: type(v) is bool)

    def text(self, key: str, default: Any, expected: str, *, most: int = 256,
             pattern: re.Pattern[str] | None = None) -> Any:
        """A printable text of 1 to ``most`` characters (matching ``pattern`` if given)."""
        def ok(v: Any) -> bool:
            return (isinstance(v, str) and 0 < len(v) <= most and v.isprintable()
                    and (pattern is None or pattern.fullmatch(v) is not None))
        return self.get(key, default, expected, ok)

    def path(self, key: str, default: Path | None = None, expected: str = "a file path", *,
             most: int = 4095) -> Path | None:
        """A path: no NUL byte, at most ``most`` bytes (107 for a Unix socket)."""
        def ok(v: Any) -> bool:
            return isinstance(v, str) and "\0" not in v and 0 < len(os.fsencode(v)) <= most
        return self.get(key, default, f"{expected} (1 to {most} bytes, no NUL)", ok, Path)

    def choice(self, key: str, default: Any, options: dict[str, Any]) -> Any:
        names = " or ".join(repr(o) for o in options)
        return self.get(key, default, names, lambda v: v in options, options.__getitem__)

    def done(self) -> None:
        for key in self.data:
            raise ConfigError(f"{self.source}: {self.where(_short.repr(key).strip(chr(39)))}: "
                              "unknown key (misspelt?)")


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


def _config_from_doc(doc: dict[str, Any], source: str) -> Config:
    top = _Reader(source, "top level", doc)
    device = top.get("device", "sim", "a device name", lambda v: isinstance(v, str))
    if device != "sim":  # the registry's names (shuffler.devices); imported only when asked
        from shuffler.device import registry

        if not (len(device) <= 4095 and device.isprintable() and registry.usable(device)):
            top.fail("device", registry.usage(), device)
    state_dir = top.path("state_dir", None, "a folder path")

    def sub(name: str) -> _Reader:
        return _Reader(source, name, top.data.pop(name, {}))

    m = sub("mechanism")
    defaults = FaultLimits()
    limits = FaultLimits(
        jam_seconds=m.num("jam_limit_s", defaults.jam_seconds, 0.05, 10),
        misfeed_seconds=m.num("misfeed_limit_s", defaults.misfeed_seconds, 0.05, 10),
        retries=m.whole("retries", defaults.retries, 0, 10),
        reverse_seconds=m.num("reverse_s", defaults.reverse_seconds, 0.0, 5),
        stall_volts=m.num("stall_volts", defaults.stall_volts, 3.0, 9.0),
        max_pass_seconds=m.num("max_pass_s", defaults.max_pass_seconds, 1, 600),
    )
    mechanism = MechanismConfig(
        feed=m.choice("feed", Feed.TOP, {f.value: f for f in Feed}),
        card_rate=m.num("card_rate", 5.0, 0.5, 1000),
        both_window_s=m.num("both_window_s", 0.15, 0.0, 5),
        limits=limits,
        flap_travel_s=m.num("flap_travel_s", MechanismConfig.flap_travel_s, 0.0, 2.0),
    )
    m.done()
    if mechanism.flap_travel_s >= mechanism.card_interval:
        raise ConfigError(
            f"{source}: [mechanism] flap_travel_s: the diverter flap takes "
            f"{mechanism.flap_travel_s * 1000:.0f} ms to switch, but at card_rate "
            f"{mechanism.card_rate:g} a card comes every {mechanism.card_interval * 1000:.0f} ms:"
            " it cannot switch between two cards (lower card_rate or fit a faster flap)")

    h = sub("hand")
    hand = HandConfig(
        passes_setting=h.get("passes", None, "a whole number from 1 to 30",
                             lambda v: type(v) is int and 1 <= v <= 30),
        cards=h.whole("cards", 24, 1, MAX_CARDS),
        mode=h.choice("mode", Mode.PLANNED, {md.value: md for md in Mode}),
        touch_timeout_s=h.num("touch_timeout_s", 300.0, 1, 86400),
    )
    h.done()

    t = sub("table")
    seats = t.get(
        "seats",
        TableConfig.seats,
        "a list of 2 to 8 distinct seat names",
        lambda v: (
            isinstance(v, list)
            and 2 <= len(v) <= 8
            and all(isinstance(s, str) and s for s in v)
            and len(set(v)) == len(v)
        ),
        tuple,
    )
    first = t.get("first_dealer", seats[0], f"one of the seats {list(seats)}", lambda v: v in seats)
    decks = t.whole("decks", 1, 1, 2)
    game_to = t.whole("game_to", 10, 1, 100)
    t.done()

    b = sub("battery")
    chemistry = b.choice("chemistry", "alkaline", {c: c for c in ("alkaline", "lithium", "nimh")})
    low = b.num("low_volts", 7.2, 4.0, 10.0)
    critical = b.num("critical_volts", 6.6, 4.0, 10.0)
    if critical > low:
        b.fail("critical_volts", f"at most low_volts ({low})", critical)
    cutoff = b.num("cutoff_load_volts", 5.8, 3.0, 9.0)
    b.done()

    gpio = _gpio_config(sub("pins"), sub("gpio"), chemistry)
    if gpio.diverter_kind != "solenoid" and \
            mechanism.flap_travel_s + SERVO_FRAME_S >= mechanism.card_interval:
        raise ConfigError(
            f"{source}: [mechanism] flap_travel_s: the servo's next pulse comes up to "
            f"{SERVO_FRAME_S * 1000:.0f} ms after the command and the flap then takes "
            f"{mechanism.flap_travel_s * 1000:.0f} ms, but at card_rate {mechanism.card_rate:g}"
            f" a card comes every {mechanism.card_interval * 1000:.0f} ms (lower card_rate, "
            "fit a faster flap, or a solenoid)")
    sv = sub("service")
    service = ServiceConfig(
        socket=sv.path("socket", None, "a socket path", most=SOCKET_PATH_BYTES),
        group=sv.text("group", None, "a group name", most=32),
        max_clients=sv.whole("max_clients", 32, 1, 1024),
        user=sv.text("user", None, "a user name or uid", most=32),
    )
    sv.done()
    mqtt = _mqtt_config(sub("mqtt"))
    w = sub("web")
    web = WebConfig(
        enabled=w.flag("enabled", False),
        lan=w.flag("lan", False),
        port=w.whole("port", 8080, 1, 65535),
        hosts=w.get("hosts", (), "a list of host names (letters, digits, '-' and '.')",
                    lambda v: isinstance(v, list) and len(v) <= 16
                    and all(isinstance(h, str) and _HOST_NAME.fullmatch(h) for h in v),
                    lambda v: tuple(h.lower() for h in v)),
    )
    w.done()
    top.done()
    return Config(
        device,
        state_dir,
        mechanism,
        hand,
        TableConfig(seats, first, decks, game_to),
        BatteryConfig(chemistry, low, critical, cutoff),
        gpio,
        service,
        source=source,
        mqtt=mqtt,
        web=web,
    )


#: one MQTT topic level: no wildcards, no separators
_TOPIC_LEVEL = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _default_table() -> str:
    """The host's short name, when it makes a topic level: tables differ by machine."""
    import socket

    name = socket.gethostname().split(".")[0]
    return name if _TOPIC_LEVEL.fullmatch(name) else MqttConfig.table


def _mqtt_config(q: _Reader) -> MqttConfig:
    d = MqttConfig()

    def path(key: str) -> Path | None:
        return q.path(key)

    def level(key: str, default: str) -> str:
        return q.get(key, default, "letters, digits, - and _ (1 to 64)",
                     lambda v: isinstance(v, str) and _TOPIC_LEVEL.fullmatch(v) is not None)

    cfg = MqttConfig(
        host=q.get("host", None, "a host name or address",
                   lambda v: isinstance(v, str) and 0 < len(v) <= 253 and v.isprintable()),
        port=q.whole("port", d.port, 1, 65535),
        table=level("table", _default_table()),
        prefix=level("prefix", d.prefix),
        tls=q.flag("tls", d.tls),
        ca_file=path("ca_file"),
        cert_file=path("cert_file"),
        key_file=path("key_file"),
        username=q.get("username", None, "a user name",
                       lambda v: isinstance(v, str) and 0 < len(v) <= 128),
        password_file=path("password_file"),
        keepalive=q.whole("keepalive_s", d.keepalive, 5, 3600),
        queue_limit=q.whole("queue_limit", d.queue_limit, 10, 100_000),
        remote_actions=q.flag("remote_actions", d.remote_actions),
        discovery=q.flag("discovery", d.discovery),
        discovery_prefix=level("discovery_prefix", d.discovery_prefix),
    )
    if cfg.password_file is not None and cfg.username is None:
        q.fail("username", "a user name to go with password_file", None)
    if cfg.key_file is not None and cfg.cert_file is None:
        q.fail("cert_file", "a client certificate to go with key_file", None)
    q.done()
    return cfg
