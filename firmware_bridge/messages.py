"""Every message of the serial protocol, declared once. Pure.

Each message is a frozen dataclass whose fields carry their wire format (size,
range, enum, meaning) in their metadata, as Klipper declares its commands: the
Python packing and validation, the tables of docs/protocol.md and the C header of
the firmware (``python -m firmware_bridge.gen_header``) all come from here.

A payload is checked in full before use (length, every range, every enum value); a
bad one raises :class:`PayloadError`, which the link counts and drops.

    >>> msg = Pass(pass_id=7, cards=5, labels=(0, 1, 1, 0, 1))
    >>> msg.pack().hex(" ")
    '00 07 00 05 16'
    >>> decode_payload(Msg.PASS, msg.pack()) == msg
    True
    >>> decode_payload(Msg.PASS_DONE, b"\\x00\\x07")
    Traceback (most recent call last):
    ...
    firmware_bridge.messages.PayloadError: PASS_DONE: 2 bytes; expected 19
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from shuffler.errors import ShufflerError
from shuffler.limits import OVER_VOLTS
from shuffler.pinmap import MOTOR_RATED_VOLTS, motor_duty_cap

#: 2.2: CONFIG carries ``max_duty_pct`` (a 2.1 host's CONFIG, without it, gets
#: :data:`OLD_HOST_DUTY_PCT`); a 2.1 firmware drives the motor at full duty.
#: 2.3: a SIGNAL STACK with no next pass (the hand's last stack) shows its pile; a 2.2
#: firmware shows READY for it
PROTOCOL_MAJOR, PROTOCOL_MINOR = 2, 3
#: the first minor version whose firmware caps the motor's duty (CONFIG's max_duty_pct)
DUTY_CAP_MINOR = 2
#: the first minor version whose firmware shows the last stack's pile (SIGNAL STACK with
#: ``next_pass`` 0); to an older one the host sends that stack's ``next_pass`` as
#: :data:`NO_PASS`, which it too shows as the pile
LAST_STACK_MINOR = 3
#: a ``next_pass`` that names no pass (a hand has at most 30: [hand] passes)
NO_PASS = 255
#: the duty cap of a CONFIG without one (a 2.1 host's): the BOM's 6 V motor on the highest
#: block any backend accepts (just under the DRV8833's 10.8 V), never above its rating
OLD_HOST_DUTY_PCT = round(100 * motor_duty_cap(MOTOR_RATED_VOLTS, OVER_VOLTS))

#: the host sends a frame (HEARTBEAT when it has nothing else) at least this often
HEARTBEAT_INTERVAL_MS = 100
#: the silence rule: no valid frame from the host for this long stops the machine
SILENCE_MS = 500
#: a host silent longer than this has missed a heartbeat: a retry (the reverse after a jam
#: or a misfeed, the ramp after it) does not drive the motor again until it is heard
REDRIVE_QUIET_MS = 2 * HEARTBEAT_INTERVAL_MS
#: stop-and-wait: the first wait for an ACK, its cap (doubling between), and the tries
ACK_FIRST_MS, ACK_MAX_MS, ACK_TRIES = 30, 500, 8
#: the most cards one PASS may carry (128 bytes of plan in the MCU's RAM)
MAX_PASS_CARDS = 1024
#: the longest firmware version text in HELLO_REPLY
MAX_FIRMWARE_TEXT = 32


class PayloadError(ShufflerError, ValueError):
    """A frame with a good CRC whose payload breaks its declaration."""


class Msg(enum.IntEnum):
    """Message types (the second byte of a frame)."""

    ACK = 0x01
    HELLO = 0x10
    HELLO_REPLY = 0x11
    HEARTBEAT = 0x12
    PASS = 0x20
    STOP = 0x21
    STATUS = 0x22
    BATTERY = 0x23
    CLEAR = 0x24
    SIGNAL = 0x25
    CONFIG = 0x26
    CARD = 0x30
    PASS_DONE = 0x31
    STATUS_REPLY = 0x32
    BATTERY_REPLY = 0x33
    INPUT = 0x35


class FaultCode(enum.IntEnum):
    """Why a pass ended or was refused (PASS_DONE, STATUS_REPLY).

    The names of the stop reasons are the host's ``FaultKind`` values in capitals
    (see :data:`FAULT_KIND`); the refusals come back before anything moved.
    """

    NONE = 0
    JAM = 1  # the beam stayed blocked past jam_ms, retries spent (latches)
    MISFEED = 2  # no card reached the beam for misfeed_ms, retries spent (latches)
    LOW_BATTERY = 3  # no card came and the battery was under stall_mv under load
    LINK_LOST = 4  # the silence rule stopped the pass (latches)
    TIMEOUT = 5  # the pass ran past max_pass_ms
    LATCHED = 6  # refused: a fault is latched; CLEAR first
    BAD_REQUEST = 7  # refused: the PASS payload broke its declaration
    MCU_RESTARTED = 8  # the pass ended because the MCU restarted (host side only)
    STOPPED = 9  # the host sent STOP
    NOT_CONFIGURED = 10  # refused: no valid CONFIG since reset or the last HELLO
    BUSY = 11  # refused: a pass is already running


#: fault code -> the host's FaultKind value (shuffler.device.contract.FaultKind)
FAULT_KIND = {FaultCode.JAM: "jam", FaultCode.MISFEED: "misfeed",
              FaultCode.LOW_BATTERY: "low_battery", FaultCode.LINK_LOST: "link_lost",
              FaultCode.TIMEOUT: "timeout", FaultCode.MCU_RESTARTED: "mcu_restarted",
              FaultCode.STOPPED: "stopped"}


class InputKind(enum.IntEnum):
    TOUCH = 1
    TRAY_LOADED = 2
    TRAY_EMPTY = 3
    PILE_LIFTED = 4


class PileCode(enum.IntEnum):
    LEFT = 0
    RIGHT = 1
    NONE = 0xFF


class SignalCode(enum.IntEnum):
    """What the status LED shows (the host's ``Signal``, in its order)."""

    READY = 0
    RUNNING = 1
    STACK = 2
    LOW_BATTERY = 3
    FAULT = 4
    OFF = 5


class ResetCause(enum.IntEnum):
    """Why the MCU last restarted (its reset flags): shown by ``shuffler status``."""

    UNKNOWN = 0
    POWER_ON = 1
    PIN = 2  # the reset pin: on a Nano, the USB-serial chip's DTR pulse (opening the port)
    BROWN_OUT = 3
    WATCHDOG = 4  # the firmware stopped looping


class Capability(enum.IntFlag):
    PILE_SENSORS = 1
    BATTERY = 2
    REVERSE = 4


# -- field declarations -------------------------------------------------------------------
@dataclass(frozen=True)
class Wire:
    """How one field travels: ``size`` bytes big-endian (0: the rest of the payload)."""

    size: int
    doc: str
    lo: int = 0
    hi: int = 0
    enum: type[enum.IntEnum] | None = None
    kind: str = "int"  # int, bool, enum, labels (bits, count in the field before), text
    #: the minor version that added the field (at the end of its message): a peer of an
    #: older minor version neither sends nor expects it, and its payload reads as ``absent``
    since: int = 0
    absent: int = 0


def _int(size: int, doc: str, lo: int, hi: int | None, kind: str = "int",
         enum_: type[enum.IntEnum] | None = None) -> Any:
    top = (1 << (8 * size)) - 1
    return field(metadata={"wire": Wire(size, doc, lo, top if hi is None else hi, enum_, kind)})


def u8(doc: str, lo: int = 0, hi: int | None = None) -> Any:
    return _int(1, doc, lo, hi)


def u8_since(minor: int, absent: int, doc: str, lo: int, hi: int) -> Any:
    """A byte added in protocol 2.``minor``, last in its message; ``absent`` (also its
    default) when an older peer's payload ends before it."""
    return field(default=absent,
                 metadata={"wire": Wire(1, doc, lo, hi, since=minor, absent=absent)})


def u16(doc: str, lo: int = 0, hi: int | None = None) -> Any:
    return _int(2, doc, lo, hi)


def u32(doc: str, lo: int = 0, hi: int | None = None) -> Any:
    return _int(4, doc, lo, hi)


def flag(doc: str) -> Any:
    return _int(1, doc, 0, 1, "bool")


def one_of(enum_: type[enum.IntEnum], doc: str) -> Any:
    return _int(1, doc, 0, 0xFF, "enum", enum_)


def bits(doc: str) -> Any:
    return field(metadata={"wire": Wire(0, doc, kind="labels")})


def text(doc: str, most: int) -> Any:
    return field(metadata={"wire": Wire(0, doc, 0, most, kind="text")})


def wire_fields(cls: type) -> list[tuple[str, Wire]]:
    return [(f.name, f.metadata["wire"]) for f in dataclasses.fields(cls)]


class Message:
    """A message: its type, who sends it, whether it is acknowledged, its fields."""

    TYPE: ClassVar[Msg]
    SENDER: ClassVar[str]  # "host", "mcu" or "both"
    RELIABLE: ClassVar[bool]
    DOC: ClassVar[str]

    @classmethod
    def fixed_size(cls, minor: int = PROTOCOL_MINOR) -> int:
        """Bytes before any tail, as a peer of protocol 2.``minor`` sends them."""
        return sum(w.size for _, w in wire_fields(cls) if w.since <= minor)

    def pack(self, minor: int = PROTOCOL_MINOR) -> bytes:
        """The payload, as a peer of protocol 2.``minor`` reads it (fields added later
        left out)."""
        out = bytearray()
        for name, w in wire_fields(type(self)):
            if w.since > minor:
                continue
            value = getattr(self, name)
            if w.kind == "labels":
                out += pack_bits(value)
            elif w.kind == "text":
                out += value.encode()
            else:
                out += int(value).to_bytes(w.size, "big")
        return bytes(out)

    @classmethod
    def unpack(cls, payload: bytes) -> Any:
        fields, at = wire_fields(cls), 0
        values: dict[str, Any] = {}
        fixed = cls.fixed_size()
        tail = fields and fields[-1][1].size == 0
        # an older peer's payload ends before the fields it does not know (never a tail)
        older = {cls.fixed_size(w.since - 1) for _, w in fields if w.since}
        if (len(payload) < fixed and len(payload) not in older) or (
                not tail and len(payload) > fixed):
            sizes = " or ".join(str(n) for n in sorted({*older, fixed}))
            raise PayloadError(f"{cls.TYPE.name}: {len(payload)} bytes; expected "
                               f"{sizes}{' or more' if tail else ''}")
        for name, w in fields:
            if at >= len(payload) and w.since:
                values[name] = w.absent
            elif w.kind == "labels":
                values[name] = unpack_bits(payload[at:], values["cards"], cls.TYPE.name)
            elif w.kind == "text":
                try:
                    values[name] = payload[at:].decode()
                except UnicodeDecodeError:
                    raise PayloadError(f"{cls.TYPE.name}: {name} is not UTF-8") from None
                if len(payload) - at > w.hi:
                    raise PayloadError(f"{cls.TYPE.name}: {name} longer than {w.hi} bytes")
            else:
                raw = int.from_bytes(payload[at:at + w.size], "big")
                at += w.size
                values[name] = _check(cls.TYPE.name, name, w, raw)
        msg = cls(**values)
        if problem := msg.problem():
            raise PayloadError(f"{cls.TYPE.name}: {problem}")
        return msg

    def problem(self) -> str | None:
        """What breaks a rule between fields, if anything."""
        return None


def _check(msg: str, name: str, w: Wire, raw: int) -> Any:
    if w.enum is not None:
        try:
            return w.enum(raw)
        except ValueError:
            raise PayloadError(f"{msg}: {name} = {raw} is not a {w.enum.__name__}") from None
    if not w.lo <= raw <= w.hi:
        raise PayloadError(f"{msg}: {name} = {raw} outside {w.lo}..{w.hi}")
    return bool(raw) if w.kind == "bool" else raw


def pack_bits(bits: tuple[int, ...]) -> bytes:
    """Labels, 8 to a byte, least significant bit first; unused bits zero."""
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def unpack_bits(data: bytes, n: int, msg: str = "PASS") -> tuple[int, ...]:
    if len(data) != (n + 7) // 8:
        raise PayloadError(f"{msg}: {len(data)} bytes of labels for {n} cards")
    if n % 8 and data[-1] >> (n % 8):
        raise PayloadError(f"{msg}: label bits set beyond card {n}")
    return tuple((data[i // 8] >> (i % 8)) & 1 for i in range(n))


MESSAGES: dict[Msg, type[Message]] = {}


M = TypeVar("M", bound=type[Message])


def message(kind: Msg, sender: str, reliable: bool, doc: str) -> Callable[[M], M]:
    def register(cls: M) -> M:
        cls.TYPE, cls.SENDER, cls.RELIABLE, cls.DOC = kind, sender, reliable, doc
        MESSAGES[kind] = cls
        return cls
    return register


def decode_payload(kind: int, payload: bytes) -> Message:
    """The message of type ``kind``; :class:`PayloadError` for an unknown type or a
    payload that breaks its declaration."""
    try:
        cls = MESSAGES[Msg(kind)]
    except ValueError:
        raise PayloadError(f"unknown message type 0x{kind:02x}") from None
    return cls.unpack(payload)


# -- the messages -------------------------------------------------------------------------
@message(Msg.ACK, "both", False, "acknowledges a reliable frame")
@dataclass(frozen=True)
class Ack(Message):
    seq: int = u8("the sequence number acknowledged", 1, 255)


@message(Msg.HELLO, "host", True, "opens a session: restarts both sequences, ends any "
         "pass (LINK_LOST), forgets CONFIG")
@dataclass(frozen=True)
class Hello(Message):
    major: int = u8("protocol major version")
    minor: int = u8("protocol minor version")


@message(Msg.HELLO_REPLY, "mcu", True, "answers HELLO; also sent unasked at reset")
@dataclass(frozen=True)
class HelloReply(Message):
    major: int = u8("protocol major version")
    minor: int = u8("protocol minor version")
    capabilities: int = u8("Capability bits", 0, 7)
    boot_id: int = u16("random at every reset")
    reset_cause: ResetCause = one_of(ResetCause, "why the MCU last restarted")  # noqa: RUF009
    firmware: str = text("firmware version, UTF-8", MAX_FIRMWARE_TEXT)


@message(Msg.HEARTBEAT, "host", False, "keeps the MCU's silence timer from running out")
@dataclass(frozen=True)
class Heartbeat(Message):
    pass


@message(Msg.CONFIG, "host", True, "the pass limits; required before the first PASS; "
         "answered by STATUS_REPLY (configured = 1 if taken)")
@dataclass(frozen=True)
class Config(Message):
    jam_ms: int = u16("beam blocked longer than this: a jam", 10, 10_000)
    misfeed_ms: int = u16("no beam edge for this long while feeding, the tray loaded: a "
                          "misfeed", 10, 30_000)
    retries: int = u8("reverse-and-refeed attempts per card before the fault", 0, 10)
    reverse_ms: int = u16("how long the motor runs backwards to free a card", 0, 5_000)
    max_pass_ms: int = u32("the motor never runs longer than this in one pass",
                           1_000, 3_600_000)
    settle_ms: int = u16("the diverter's travel time from one pile to the other", 0, 1_000)
    card_interval_ms: int = u16("time between two cards at the mechanism's card rate; "
                                "settle_ms must be shorter", 10, 10_000)
    min_blocked_us: int = u16("a beam blocking shorter than this is a glitch, not a card",
                              0, 50_000)
    stall_mv: int = u16("no card came and the battery is below this under load: "
                        "LOW_BATTERY rather than MISFEED", 0, 30_000)
    soft_start_ms: int = u16("the motor's ramp from off to max_duty_pct, in five steps",
                             0, 2_000)
    min_gap_us: int = u16("a card counts once the beam stayed clear this long after it; a "
                          "shorter drop-out is the same card", 0, 50_000)
    max_duty_pct: int = u8_since(
        DUTY_CAP_MINOR, OLD_HOST_DUTY_PCT, "the motor's largest PWM duty, in percent (the "
        "motor's rated volts over a fresh block): the soft start's top; the chip never drives "
        f"more, in any state; absent (a 2.1 host): {OLD_HOST_DUTY_PCT}", 10, 100)

    def problem(self) -> str | None:
        if self.settle_ms >= self.card_interval_ms:
            return (f"the diverter needs {self.settle_ms} ms but cards come every "
                    f"{self.card_interval_ms} ms")
        return None


@message(Msg.PASS, "host", True, "deal one pass by the plan; answered by CARD events "
         "and one PASS_DONE carrying the same pass id")
@dataclass(frozen=True)
class Pass(Message):
    pass_id: int = u16("chosen by the host, never 0", 1, 0xFFFF)
    cards: int = u16("cards in the pass", 1, MAX_PASS_CARDS)
    labels: tuple[int, ...] = bits("one bit per card, 8 to a byte, LSB first; 0 = left "
                                     "pile; unused bits 0")


@message(Msg.STOP, "host", True, "motor off now; whatever runs ends with STOPPED, whichever "
         "id this names; the pass named never starts if its PASS comes later")
@dataclass(frozen=True)
class Stop(Message):
    pass_id: int = u16("the pass to stop; 0 = none named (whatever runs stops either way)")


@message(Msg.STATUS, "host", True, "answered by STATUS_REPLY")
@dataclass(frozen=True)
class StatusAsk(Message):
    pass


@message(Msg.BATTERY, "host", True, "answered by BATTERY_REPLY")
@dataclass(frozen=True)
class BatteryAsk(Message):
    pass


@message(Msg.CLEAR, "host", True, "clear a latched fault if the beam is clear; answered by "
         "STATUS_REPLY")
@dataclass(frozen=True)
class Clear(Message):
    pass


@message(Msg.SIGNAL, "host", True, "what the status LED shows")
@dataclass(frozen=True)
class SignalMsg(Message):
    signal: SignalCode = one_of(SignalCode, "SignalCode")  # noqa: RUF009
    pile: PileCode = one_of(PileCode, "for STACK: the pile on top")  # noqa: RUF009
    next_pass: int = u8("the pass a touch starts next, 0 = none (for STACK: the hand's "
                        "last stack, shown as its pile since 2.3)")


@message(Msg.CARD, "mcu", False, "after each card counted; counters are cumulative")
@dataclass(frozen=True)
class Card(Message):
    pass_id: int = u16("the pass it belongs to", 1, 0xFFFF)
    counted: int = u16("cards counted so far", 1, MAX_PASS_CARDS)
    left: int = u16("on the left pile", 0, MAX_PASS_CARDS)
    right: int = u16("on the right pile", 0, MAX_PASS_CARDS)

    def problem(self) -> str | None:
        return _piles_problem(self.counted, self.left, self.right)


def _piles_problem(counted: int, left: int, right: int) -> str | None:
    if left + right != counted:
        return f"left {left} + right {right} is not counted {counted}"
    return None


@message(Msg.PASS_DONE, "mcu", True, "the end of a pass, or its refusal")
@dataclass(frozen=True)
class PassDone(Message):
    pass_id: int = u16("the PASS it answers", 1, 0xFFFF)
    counted: int = u16("cards counted", 0, MAX_PASS_CARDS)
    left: int = u16("on the left pile", 0, MAX_PASS_CARDS)
    right: int = u16("on the right pile", 0, MAX_PASS_CARDS)
    ms: int = u32("from PASS to motor off")
    min_mv: int = u16("lowest battery reading under load, 0 = none")
    tray_empty: bool = flag("the tray sensor saw no cards at the end")
    retries: int = u8("reverse-and-refeed attempts in the pass")
    fault: FaultCode = one_of(FaultCode, "why it ended; NONE: all dealt or the tray ran out")  # noqa: RUF009
    fault_card: int = u16("the card being fed when it ended, 0 = none", 0, MAX_PASS_CARDS + 1)

    def problem(self) -> str | None:
        return _piles_problem(self.counted, self.left, self.right)


@message(Msg.STATUS_REPLY, "mcu", True, "answers STATUS, CLEAR and CONFIG")
@dataclass(frozen=True)
class StatusReply(Message):
    motor_on: bool = flag("the motor is driven")
    tray_loaded: bool = flag("the tray sensor sees cards")
    beam_blocked: bool = flag("something blocks the beam")
    fault: FaultCode = one_of(FaultCode, "the latched fault, NONE if none")  # noqa: RUF009
    fault_card: int = u16("the card of the latched fault, 0 = none", 0, MAX_PASS_CARDS + 1)
    configured: bool = flag("a valid CONFIG is held")
    pass_id: int = u16("the pass running, 0 = none")


@message(Msg.BATTERY_REPLY, "mcu", True, "answers BATTERY")
@dataclass(frozen=True)
class BatteryReply(Message):
    mv: int = u16("battery millivolts")
    under_load: bool = flag("the motor was running")


@message(Msg.INPUT, "mcu", True, "a sensor event")
@dataclass(frozen=True)
class Input(Message):
    kind: InputKind = one_of(InputKind, "InputKind")  # noqa: RUF009
    pile: PileCode = one_of(PileCode, "for PILE_LIFTED: which pile")  # noqa: RUF009
    ms: int = u32("milliseconds since reset")
