"""The messages inside frames: types and payloads (big-endian). Pure.

    >>> labels = (0, 1, 1, 0, 1)
    >>> unpack_labels(pack_labels(labels))
    (0, 1, 1, 0, 1)
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

PROTOCOL_MAJOR, PROTOCOL_MINOR = 1, 0


class Msg(enum.IntEnum):
    ACK = 0x01  # both ways: payload = the sequence number acknowledged
    HELLO = 0x10  # host: major, minor
    HELLO_REPLY = 0x11  # MCU: major, minor, capabilities, boot id, firmware version (text)
    HEARTBEAT = 0x12  # host, not acknowledged
    PASS = 0x20  # host: card count, then the labels, 8 to a byte, LSB first
    STOP = 0x21
    STATUS = 0x22  # host asks; MCU answers STATUS_REPLY
    BATTERY = 0x23  # host asks; MCU answers BATTERY_REPLY
    CLEAR = 0x24  # host asks; MCU answers STATUS_REPLY
    SIGNAL = 0x25  # host: what the status LED shows: signal, pile, next pass
    CARD = 0x30  # MCU, not acknowledged: cumulative counted, left, right
    PASS_DONE = 0x31  # MCU: counted, left, right, ms, min mV, tray empty, retries, fault
    STATUS_REPLY = 0x32  # MCU: motor on, tray loaded, beam blocked, fault code, fault card
    BATTERY_REPLY = 0x33  # MCU: mV, under load
    INPUT = 0x35  # MCU: kind, pile, ms since boot


#: messages the receiver acknowledges and the sender repeats until it does
RELIABLE = frozenset({Msg.HELLO, Msg.HELLO_REPLY, Msg.PASS, Msg.STOP, Msg.STATUS,
                      Msg.BATTERY, Msg.CLEAR, Msg.SIGNAL, Msg.PASS_DONE, Msg.STATUS_REPLY,
                      Msg.BATTERY_REPLY, Msg.INPUT})


class Err(enum.IntEnum):
    """Fault codes (PASS_DONE, STATUS_REPLY)."""

    NONE = 0
    JAM = 1
    MISFEED = 2
    STALL = 3  # the motor stalled: low battery
    LINK_LOST = 4  # no heartbeat: the MCU stopped the motor by itself
    TIMEOUT = 5
    LATCHED = 6  # a PASS refused: a fault is latched
    BAD_REQUEST = 7  # a PASS refused: malformed or busy
    RESTARTED = 8


class Input(enum.IntEnum):
    TOUCH = 1
    TRAY_LOADED = 2
    TRAY_EMPTY = 3
    PILE_LIFTED = 4


class Capability(enum.IntFlag):
    PILE_SENSORS = 1
    BATTERY = 2
    REVERSE = 4


def pack_labels(labels) -> bytes:
    n = len(labels)
    out = bytearray(struct.pack(">H", n))
    out += bytes((n + 7) // 8)
    for i, label in enumerate(labels):
        if label:
            out[2 + i // 8] |= 1 << (i % 8)
    return bytes(out)


def unpack_labels(payload: bytes) -> tuple[int, ...]:
    if len(payload) < 2:
        raise ValueError("PASS payload too short")
    (n,) = struct.unpack(">H", payload[:2])
    if len(payload) != 2 + (n + 7) // 8:
        raise ValueError(f"PASS payload of {len(payload)} bytes for {n} cards")
    return tuple((payload[2 + i // 8] >> (i % 8)) & 1 for i in range(n))


@dataclass(frozen=True)
class PassDone:
    counted: int
    left: int
    right: int
    ms: int
    min_mv: int  # 0: no reading
    tray_empty: bool
    retries: int
    fault: Err
    fault_card: int
    FORMAT = ">HHHIHBBBH"

    def pack(self) -> bytes:
        return struct.pack(self.FORMAT, self.counted, self.left, self.right, self.ms,
                           self.min_mv, self.tray_empty, self.retries, self.fault,
                           self.fault_card)

    @classmethod
    def unpack(cls, payload: bytes) -> PassDone:
        c, left, right, ms, mv, empty, retries, fault, card = struct.unpack(cls.FORMAT, payload)
        return cls(c, left, right, ms, mv, bool(empty), retries, Err(fault), card)
