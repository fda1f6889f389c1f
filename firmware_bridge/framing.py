"""COBS framing with a CRC: bytes on the wire to frames and back. Pure.

    >>> wire = encode_frame(Frame(7, 0x20, b"\\x00\\x18"))
    >>> wire[-1], 0 in wire[:-1]
    (0, False)
    >>> decoder = FrameDecoder()
    >>> decoder.feed(wire)
    [Frame(seq=7, type=32, payload=b'\\x00\\x18')]
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass

from shuffler.errors import ShufflerError

MAX_PAYLOAD = 250
MAX_FRAME = 2 + MAX_PAYLOAD + 2  # seq, type, payload, CRC: before COBS
MAX_ENCODED = MAX_FRAME + MAX_FRAME // 254 + 2


class FrameError(ShufflerError, ValueError):
    """A frame that cannot be decoded: bad COBS, bad length or bad CRC."""


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, not reflected, no final xor.

    >>> hex(crc16(b"123456789"))
    '0x29b1'
    """
    return binascii.crc_hqx(data, crc)  # the same CRC, in C


def cobs_encode(data: bytes) -> bytes:
    """Consistent overhead byte stuffing: the result holds no zero byte."""
    out = bytearray([0])
    code_at, code = 0, 1
    for byte in data:
        if byte:
            out.append(byte)
            code += 1
        if not byte or code == 0xFF:
            out[code_at] = code
            code_at, code = len(out), 1
            out.append(0)
    out[code_at] = code
    return bytes(out)


def cobs_decode(data: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data):
        code = data[i]
        if code == 0:
            raise FrameError("zero byte inside a COBS block")
        end = i + code
        if end > len(data):
            raise FrameError("COBS block runs past the end of the frame")
        block = data[i + 1:end]
        if 0 in block:
            raise FrameError("zero byte inside a COBS block")
        out += block
        i = end
        if code < 0xFF and i < len(data):
            out.append(0)
    return bytes(out)


@dataclass(frozen=True)
class Frame:
    seq: int
    type: int
    payload: bytes = b""


def encode_frame(frame: Frame) -> bytes:
    if len(frame.payload) > MAX_PAYLOAD:
        raise FrameError(f"payload of {len(frame.payload)} bytes; at most {MAX_PAYLOAD}")
    body = bytes([frame.seq & 0xFF, frame.type & 0xFF]) + frame.payload
    return cobs_encode(body + crc16(body).to_bytes(2, "big")) + b"\x00"


def decode_frame(encoded: bytes) -> Frame:
    """One frame from its COBS bytes (without the trailing zero)."""
    if len(encoded) > MAX_ENCODED:
        raise FrameError(f"frame of {len(encoded)} bytes; at most {MAX_ENCODED}")
    raw = cobs_decode(encoded)
    if len(raw) < 4:
        raise FrameError(f"frame of {len(raw)} bytes; at least 4")
    body, crc = raw[:-2], int.from_bytes(raw[-2:], "big")
    if crc16(body) != crc:
        raise FrameError("CRC mismatch")
    return Frame(body[0], body[1], bytes(body[2:]))


class FrameDecoder:
    """Splits a byte stream at zero bytes into frames; bad frames are counted and dropped."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.errors = 0
        self.frames = 0

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        for byte in data:
            if byte:
                if len(self._buffer) <= MAX_ENCODED:
                    self._buffer.append(byte)
                continue
            chunk, self._buffer = bytes(self._buffer), bytearray()
            if not chunk:
                continue  # idle zeros between frames
            try:
                frames.append(decode_frame(chunk))
                self.frames += 1
            except FrameError:
                self.errors += 1
        return frames
