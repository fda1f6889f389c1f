"""The host's end of the link: one reader thread, acknowledged sends, a heartbeat.

Stop-and-wait: a reliable message gets sequence numbers 1..255 (0 is for messages
nobody acknowledges) and is repeated with doubling timeouts until the other end
acknowledges it; the receiver acknowledges every copy but applies a sequence number
only once. Everything received (but acknowledgements) goes to :attr:`Link.inbox`,
a :class:`queue.Queue` that one loop reads.
"""

from __future__ import annotations

import contextlib
import queue
import struct
import threading
import time
from dataclasses import dataclass

from shuffler.errors import DeviceError
from shuffler.logs import get_logger

from .framing import Frame, FrameDecoder, encode_frame
from .messages import PROTOCOL_MAJOR, PROTOCOL_MINOR, RELIABLE, Msg

log = get_logger("firmware_bridge.link")


class LinkLostError(DeviceError):
    """The microcontroller stopped answering (or the port went away)."""


class ProtocolError(DeviceError):
    """The microcontroller speaks a protocol this host cannot."""


@dataclass
class LinkStats:
    frames_sent: int = 0
    frames_received: int = 0
    retransmits: int = 0
    duplicates: int = 0

    def to_dict(self, crc_errors: int) -> dict:
        return {"frames_sent": self.frames_sent, "frames_received": self.frames_received,
                "retransmits": self.retransmits, "duplicates": self.duplicates,
                "crc_errors": crc_errors}


@dataclass(frozen=True)
class Hello:
    major: int
    minor: int
    capabilities: int
    boot_id: int
    firmware: str

    @classmethod
    def unpack(cls, payload: bytes) -> Hello:
        major, minor, caps, boot = struct.unpack(">BBBH", payload[:5])
        return cls(major, minor, caps, boot, payload[5:].decode("utf-8", "replace"))


class Link:
    """A framed, acknowledged link over a pyserial port (or anything with read/write)."""

    def __init__(self, port, *, ack_timeout: float = 0.03, tries: int = 8,
                 heartbeat: float = 0.1) -> None:
        self.port = port
        self.ack_timeout = ack_timeout
        self.tries = tries
        self.heartbeat = heartbeat
        self.inbox: queue.Queue[Frame] = queue.Queue()
        self.stats = LinkStats()
        self.decoder = FrameDecoder()
        self.hello: Hello | None = None
        self.lost: str | None = None  # why the link is down, once it is
        self._seq = 0
        self._acked: dict[int, threading.Event] = {}
        self._last_in: int | None = None
        self._send_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closing = threading.Event()
        self.heartbeat_paused = threading.Event()  # tests: a silent host
        self._threads = [threading.Thread(target=self._read_loop, name="link-reader",
                                          daemon=True),
                         threading.Thread(target=self._heartbeat_loop, name="link-heartbeat",
                                          daemon=True)]
        for t in self._threads:
            t.start()

    # -- sending -------------------------------------------------------------------------
    def _write(self, frame: Frame) -> None:
        data = encode_frame(frame)
        with self._write_lock:
            try:
                self.port.write(data)
            except Exception as e:  # pyserial raises SerialException (an OSError) and others
                self._lose(f"write failed: {e}")
                raise LinkLostError(f"the serial link is down: {e}") from None
        self.stats.frames_sent += 1

    def send(self, kind: Msg, payload: bytes = b"") -> None:
        """Fire and forget (heartbeat)."""
        self._write(Frame(0, kind, payload))

    def request(self, kind: Msg, payload: bytes = b"") -> None:
        """Send reliably: return once acknowledged, or raise :class:`LinkLostError`."""
        if self.lost:
            raise LinkLostError(f"the serial link is down: {self.lost}")
        with self._send_lock:
            self._seq = self._seq % 255 + 1
            seq = self._seq
            event = self._acked[seq] = threading.Event()
            timeout = self.ack_timeout
            try:
                for attempt in range(self.tries):
                    if attempt:
                        self.stats.retransmits += 1
                    self._write(Frame(seq, kind, payload))
                    if event.wait(timeout):
                        return
                    if self.lost:
                        break
                    timeout = min(timeout * 2, 0.5)
            finally:
                self._acked.pop(seq, None)
        self._lose(f"no acknowledgement for {kind.name} after {self.tries} tries")
        raise LinkLostError(f"the microcontroller did not acknowledge {kind.name}")

    # -- receiving -----------------------------------------------------------------------
    def _read_loop(self) -> None:
        while not self._closing.is_set():
            try:
                data = self.port.read(max(1, getattr(self.port, "in_waiting", 0) or 1))
            except Exception as e:
                if not self._closing.is_set():
                    self._lose(f"read failed: {e}")
                return
            for frame in self.decoder.feed(data):
                self._receive(frame)

    def _receive(self, frame: Frame) -> None:
        self.stats.frames_received += 1
        try:
            kind = Msg(frame.type)
        except ValueError:
            return  # an unknown type from a newer firmware: ignore it
        if kind is Msg.ACK:
            if frame.payload and (event := self._acked.get(frame.payload[0])):
                event.set()
            return
        if kind in RELIABLE and frame.seq:
            try:
                self._write(Frame(0, Msg.ACK, bytes([frame.seq])))
            except LinkLostError:
                return
            # apply each sequence number once; a handshake starts a new sequence
            if frame.seq == self._last_in and kind not in (Msg.HELLO, Msg.HELLO_REPLY):
                self.stats.duplicates += 1
                return
            self._last_in = frame.seq
        self.inbox.put(frame)

    def _heartbeat_loop(self) -> None:
        while not self._closing.wait(self.heartbeat):
            if self.lost or self.heartbeat_paused.is_set():
                continue
            try:
                self.send(Msg.HEARTBEAT)
            except LinkLostError:
                return

    def _lose(self, why: str) -> None:
        if not self.lost:
            self.lost = why
            if not self._closing.is_set():
                log.warning("serial link lost", why=why)
        for event in list(self._acked.values()):
            event.set()  # wake a waiting sender; it sees `lost`

    # -- the handshake -------------------------------------------------------------------
    def handshake(self, timeout: float = 2.0) -> Hello:
        """HELLO and its reply; refuses a different major protocol version."""
        self.request(Msg.HELLO, bytes([PROTOCOL_MAJOR, PROTOCOL_MINOR]))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                frame = self.inbox.get(timeout=left)
            except queue.Empty:
                break
            if frame.type == Msg.HELLO_REPLY:
                hello = Hello.unpack(frame.payload)
                if hello.major != PROTOCOL_MAJOR:
                    raise ProtocolError(f"the microcontroller speaks protocol {hello.major}."
                                        f"{hello.minor}; this host speaks {PROTOCOL_MAJOR}.x")
                self.hello = hello
                return hello
        raise LinkLostError("no HELLO reply from the microcontroller")

    def close(self) -> None:
        """Stop the threads, then close the port: a file descriptor closed under a
        running reader could be reused by the next port opened and read by this one."""
        self._closing.set()
        self._lose("closed")
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(2)
        with contextlib.suppress(Exception):
            self.port.close()
