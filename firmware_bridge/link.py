"""One end of the link: a reader thread, acknowledged sends, validated messages.

Stop-and-wait: a reliable message gets sequence numbers 1..255 (0 is for messages
nobody acknowledges) and is repeated with doubling timeouts until the other end
acknowledges it; the receiver acknowledges every valid copy but applies a sequence
number only once. A frame is validated against its declaration before it is
acknowledged: a bad one is dropped and counted, as if its CRC had failed. What is
received (but acknowledgements) goes to :attr:`Link.inbox` as typed messages, a
:class:`queue.Queue` that one loop reads.

There is no heartbeat thread: the loop that decides calls :meth:`Link.beat` while it
waits (docs/protocol.md, "the silence rule"), so a wedged host goes silent.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from shuffler.errors import DeviceError
from shuffler.logs import get_logger

from .framing import Frame, FrameDecoder, encode_frame
from .messages import (
    ACK_FIRST_MS,
    ACK_MAX_MS,
    ACK_TRIES,
    HEARTBEAT_INTERVAL_MS,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    Ack,
    Hello,
    HelloReply,
    Message,
    Msg,
    PayloadError,
    decode_payload,
)

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
    bad_frames: int = 0  # a good CRC, a payload that breaks its declaration
    stale: int = 0  # CARD or PASS_DONE of another pass (counted by the device)

    def to_dict(self, crc_errors: int) -> dict:
        return {"frames_sent": self.frames_sent, "frames_received": self.frames_received,
                "retransmits": self.retransmits, "duplicates": self.duplicates,
                "bad_frames": self.bad_frames, "stale": self.stale,
                "crc_errors": crc_errors}


class _OwnedLock:
    """A lock that knows its owner: a signal handler that interrupts a send on the same
    thread must not wait for it (it would wait for ever)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner: int | None = None

    def held_here(self) -> bool:
        return self.owner == threading.get_ident()

    def __enter__(self) -> _OwnedLock:
        self._lock.acquire()
        self.owner = threading.get_ident()
        return self

    def __exit__(self, *exc: object) -> None:
        self.owner = None
        self._lock.release()


class Link:
    """A framed, acknowledged link over a pyserial port (or anything with read/write).

    ``clock`` gives the time the silence rule and the heartbeat are measured in.
    """

    def __init__(self, port, *, ack_timeout: float = ACK_FIRST_MS / 1000,
                 tries: int = ACK_TRIES, heartbeat: float = HEARTBEAT_INTERVAL_MS / 1000,
                 on_receive=None, accept=None) -> None:
        self.port = port
        self.ack_timeout = ack_timeout
        self.tries = tries
        self.heartbeat = heartbeat
        self.inbox: queue.Queue[Message] = queue.Queue()
        self.stats = LinkStats()
        self.decoder = FrameDecoder()
        self.hello: HelloReply | None = None
        self.lost: str | None = None  # why the link is down, once it is
        self.on_receive = on_receive  # called with every valid message, on the reader
        # asked before a new reliable message is acknowledged: False leaves it
        # unacknowledged (the sender repeats it), as a microcontroller with no room does
        self.accept = accept
        self.last_sent = time.monotonic()  # the last frame that was not an ACK
        self.last_heard = time.monotonic()  # the last valid frame received
        self.pending_stop = False  # a STOP asked for while this thread was sending
        #: the peer's protocol minor version (from its HELLO_REPLY): what is sent is packed
        #: as it reads it, without the fields of later minor versions
        self.peer_minor = PROTOCOL_MINOR
        self._seq = 0
        self._acked: dict[int, threading.Event] = {}
        self._last_in: int | None = None
        self._send_lock = _OwnedLock()
        self._write_lock = _OwnedLock()
        self._closing = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name="link-reader",
                                        daemon=True)
        self._reader.start()

    # -- sending -------------------------------------------------------------------------
    def _write(self, frame: Frame) -> None:
        data = encode_frame(frame)
        if self._write_lock.held_here():
            return  # a signal handler interrupted this thread's write: a reliable frame repeats
        with self._write_lock:
            try:
                self.port.write(data)
            except Exception as e:  # pyserial raises SerialException (an OSError) and others
                self._lose(f"write failed: {e}")
                raise LinkLostError(f"the serial link is down: {e}") from None
        self.stats.frames_sent += 1
        if frame.type != Msg.ACK:
            self.last_sent = time.monotonic()

    def send(self, msg: Message) -> None:
        """Fire and forget (HEARTBEAT, CARD)."""
        self._write(Frame(0, msg.TYPE, msg.pack(self.peer_minor)))

    def beat(self) -> None:
        """A heartbeat if nothing went out for a heartbeat interval. Only the deciding
        loop calls this: when it stops, the microcontroller stops the motor."""
        if not self.lost and time.monotonic() - self.last_sent >= self.heartbeat:
            with contextlib.suppress(LinkLostError):
                self._write(Frame(0, Msg.HEARTBEAT))

    def request(self, msg: Message, *, until: Callable[[], bool] | None = None) -> None:
        """Send reliably: return once acknowledged, or raise :class:`LinkLostError`.
        With ``until`` (the MCU's end: it never gives a message up), the same frame, same
        sequence number, is repeated every ACK_MAX_MS past the tries while ``until()``
        holds; once it does not, LinkLostError (the link itself stays up)."""
        if self.lost:
            raise LinkLostError(f"the serial link is down: {self.lost}")
        with self._send_lock:
            self._seq = self._seq % 255 + 1
            seq = self._seq
            event = self._acked[seq] = threading.Event()
            timeout = self.ack_timeout
            tries = itertools.count() if until is not None else range(self.tries)
            try:
                for attempt in tries:
                    if attempt and until is not None and not until():
                        raise LinkLostError(f"{msg.TYPE.name} dropped unacknowledged")
                    if attempt:
                        self.stats.retransmits += 1
                    self._write(Frame(seq, msg.TYPE, msg.pack(self.peer_minor)))
                    if self._wait(event, timeout):
                        return
                    if self.lost:
                        break
                    timeout = min(timeout * 2, ACK_MAX_MS / 1000)
            finally:
                self._acked.pop(seq, None)
        self._lose(f"no acknowledgement for {msg.TYPE.name} after {self.tries} tries")
        raise LinkLostError(f"the microcontroller did not acknowledge {msg.TYPE.name}")

    def _wait(self, event: threading.Event, timeout: float) -> bool:
        """Wait for an ACK, beating meanwhile (the caller is the deciding loop)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if event.wait(min(left, self.heartbeat / 2)):
                return True
            self.beat()
        return event.is_set()

    def try_request(self, msg: Message) -> bool:
        """:meth:`request`, unless this thread is in the middle of one (a signal handler
        interrupted it): then return False at once instead of waiting for ever."""
        if self._send_lock.held_here():
            return False
        self.request(msg)
        return True

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
            msg = decode_payload(frame.type, frame.payload)
            if (frame.seq != 0) != msg.RELIABLE:
                raise PayloadError(f"{msg.TYPE.name} with sequence number {frame.seq}")
        except PayloadError as e:
            self.stats.bad_frames += 1  # not acknowledged: the sender repeats it
            log.debug("bad frame dropped", why=str(e))
            return
        self.last_heard = time.monotonic()
        if self.on_receive is not None:
            self.on_receive(msg)
        if isinstance(msg, Ack):
            if event := self._acked.get(msg.seq):
                event.set()
            return
        if msg.RELIABLE:
            # apply each sequence number once; a handshake starts a new sequence
            repeat = frame.seq == self._last_in and not isinstance(msg, Hello | HelloReply)
            if not repeat and self.accept is not None and not self.accept(msg):
                return
            try:
                self._write(Frame(0, Msg.ACK, bytes([frame.seq])))
            except LinkLostError:
                return
            if repeat:
                self.stats.duplicates += 1
                return
            self._last_in = frame.seq
        self.inbox.put(msg)

    def _lose(self, why: str) -> None:
        if not self.lost:
            self.lost = why
            if not self._closing.is_set():
                log.warning("serial link lost", why=why)
        for event in list(self._acked.values()):
            event.set()  # wake a waiting sender; it sees `lost`

    # -- the handshake -------------------------------------------------------------------
    def handshake(self, timeout: float = 2.0) -> HelloReply:
        """HELLO and its reply; refuses a different major protocol version."""
        self.request(Hello(PROTOCOL_MAJOR, PROTOCOL_MINOR))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = self.inbox.get(timeout=min(left, self.heartbeat / 2))
            except queue.Empty:
                self.beat()
                continue
            if isinstance(msg, HelloReply):
                if msg.major != PROTOCOL_MAJOR:
                    raise ProtocolError(f"the microcontroller speaks protocol {msg.major}."
                                        f"{msg.minor}; this host speaks {PROTOCOL_MAJOR}.x")
                self.hello, self.peer_minor = msg, min(msg.minor, PROTOCOL_MINOR)
                return msg
        raise LinkLostError("no HELLO reply from the microcontroller")

    def close(self) -> None:
        """Stop the reader, then close the port: a file descriptor closed under a
        running reader could be reused by the next port opened and read by this one."""
        self._closing.set()
        self._lose("closed")
        if self._reader is not threading.current_thread():
            self._reader.join(2)
        with contextlib.suppress(Exception):
            self.port.close()
