"""``SerialDevice``: the device contract over the serial link to a microcontroller.

The microcontroller detects jams, misfeeds and stalls itself and stops its own
motor; the host plans, counts and reports. ``--device serial:PORT`` opens one,
where PORT is a device path or any pyserial URL.
"""

from __future__ import annotations

import contextlib
import queue
import struct
import time

import serial

from shuffler.device import (
    BatteryReading,
    CardCallback,
    DeviceInfo,
    EventKind,
    Fault,
    FaultKind,
    FaultLimits,
    Health,
    InputEvent,
    PassReport,
    ShufflerDevice,
    Signal,
    Status,
    feed_fault,
    stall_fault,
)
from shuffler.errors import DeviceError, FaultLatchedError
from shuffler.logs import get_logger
from shuffler.mechanics import Feed, Pile
from shuffler.planning import PassPlan

from .framing import Frame
from .link import Hello, Link, LinkLostError
from .messages import Err, Input, Msg, PassDone, pack_labels

log = get_logger("firmware_bridge.device")
EVENT_OF = {Input.TOUCH: EventKind.TOUCH, Input.TRAY_LOADED: EventKind.TRAY_LOADED,
            Input.TRAY_EMPTY: EventKind.TRAY_EMPTY, Input.PILE_LIFTED: EventKind.PILE_LIFTED}
SIGNALS = list(Signal)


def link_lost_fault(why: str, card: int | None = None) -> Fault:
    return Fault(FaultKind.LINK_LOST, f"The serial link to the machine was lost ({why}); its "
                 "microcontroller stops the motor by itself. Check the cable, put every card "
                 "back in the tray, then run `shuffler clear`.", card)


class SerialDevice(ShufflerDevice):
    """A shuffler behind a microcontroller on ``url`` (a device path or pyserial URL)."""

    REPLY_TIMEOUT = 2.0

    def __init__(self, url: str, *, limits: FaultLimits | None = None, feed: Feed = Feed.TOP,
                 baudrate: int = 115200, heartbeat: float = 0.1) -> None:
        super().__init__()
        self.url, self.baudrate, self.heartbeat = url, baudrate, heartbeat
        self.limits = limits or FaultLimits()
        self._feed = feed
        self._fault: Fault | None = None
        self._closed = False
        self._connect()

    def _connect(self) -> None:
        try:
            port = serial.serial_for_url(self.url, baudrate=self.baudrate, timeout=0.05)
        except (serial.SerialException, ValueError) as e:
            raise DeviceError(f"cannot open the serial port {self.url}: {e}") from None
        self.link = Link(port, heartbeat=self.heartbeat)
        try:
            self.hello = self.link.handshake()  # opening a port can reset a board: always
        except BaseException:
            self.link.close()
            raise
        self._info = DeviceInfo("serial", f"shuffler on {self.url}", self._feed,
                                firmware=self.hello.firmware)

    # -- the inbox ---------------------------------------------------------------------------
    def _next(self, timeout: float) -> Frame | None:
        """The next frame that is not an input event (those go to :attr:`events`)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if self.link.lost:
                raise LinkLostError(self.link.lost)
            try:
                frame = self.link.inbox.get(timeout=min(left, 0.05))
            except queue.Empty:
                continue
            if frame.type == Msg.INPUT and len(frame.payload) == 6:
                kind, pile, ms = struct.unpack(">BBI", frame.payload)
                if kind in {i.value for i in Input}:
                    self.events.put(InputEvent(EVENT_OF[Input(kind)], ms / 1000,
                                               Pile(pile) if pile < 2 else None))
                continue
            return frame
        return None

    def _ask(self, kind: Msg, reply: Msg, payload: bytes = b"") -> bytes:
        self.link.request(kind, payload)
        deadline = time.monotonic() + self.REPLY_TIMEOUT
        while (left := deadline - time.monotonic()) > 0:
            frame = self._next(left)
            if frame is None:
                break
            if frame.type == reply:
                return frame.payload
        raise LinkLostError(f"no {reply.name} from the microcontroller")

    # -- the contract ------------------------------------------------------------------------
    @property
    def info(self) -> DeviceInfo:
        return self._info

    def run_pass(self, plan: PassPlan, on_card: CardCallback | None = None) -> PassReport:
        if self._closed:
            raise DeviceError("the serial device is closed")
        if self._fault is not None:
            raise FaultLatchedError(self._fault.message)
        expected, counted, piles = plan.cards, 0, (0, 0)
        start = time.monotonic()
        try:
            self.link.request(Msg.PASS, pack_labels(plan.labels))
            while True:
                frame = self._next(self.limits.max_pass_seconds)
                if frame is None:
                    self.stop()
                    return self._failed(plan, counted, piles, start, Fault(
                        FaultKind.TIMEOUT, "The machine did not finish the pass in "
                        f"{self.limits.max_pass_seconds:.0f} s; it was told to stop.",
                        counted + 1))
                if frame.type == Msg.CARD and len(frame.payload) == 6:
                    now, left, right = struct.unpack(">HHH", frame.payload)
                    for c in range(counted + 1, min(now, expected) + 1):
                        if on_card:
                            on_card(c, expected)
                    counted, piles = max(counted, now), (left, right)
                elif frame.type == Msg.PASS_DONE:
                    return self._done(PassDone.unpack(frame.payload), expected, on_card, counted)
                elif frame.type == Msg.HELLO_REPLY:
                    if Hello.unpack(frame.payload).boot_id == self.hello.boot_id:
                        continue  # a repeat of the handshake's reply
                    self._rehandshake()  # a new boot: the microcontroller restarted
                    return self._failed(plan, counted, piles, start, Fault(
                        FaultKind.MCU_RESTARTED, "The machine's microcontroller restarted in "
                        f"the middle of the pass ({counted} cards dealt). Put every card back "
                        "in the tray and start the pass again.", counted + 1))
        except LinkLostError as e:
            self._fault = link_lost_fault(str(e), counted + 1)
            return self._failed(plan, counted, piles, start, self._fault)

    def _failed(self, plan, counted, piles, start, fault) -> PassReport:
        return PassReport(plan.cards, counted, piles, time.monotonic() - start, fault, None,
                          False)

    def _done(self, done: PassDone, expected: int, on_card, seen: int) -> PassReport:
        if on_card:
            for c in range(seen + 1, min(done.counted, expected) + 1):
                on_card(c, expected)
        volts = done.min_mv / 1000 if done.min_mv else None
        card, fault = done.fault_card, None
        if done.fault in (Err.JAM, Err.MISFEED):
            kind = FaultKind.JAM if done.fault is Err.JAM else FaultKind.MISFEED
            fault = feed_fault(kind, card, done.counted, expected)
        elif done.fault is Err.STALL:
            fault = stall_fault(card, done.counted, expected, volts or 0.0)
        elif done.fault is Err.LINK_LOST:
            fault = link_lost_fault("no heartbeat reached the machine", card)
        elif done.fault in (Err.LATCHED, Err.BAD_REQUEST):
            raise FaultLatchedError("the machine refused the pass: a fault is latched on it "
                                    "(run `shuffler clear`)")
        elif done.fault is not Err.NONE:
            fault = Fault(FaultKind.TIMEOUT, f"The machine stopped the pass ({done.fault.name}).",
                          card)
        if fault is not None and fault.kind.latches:
            self._fault = fault
        return PassReport(expected, done.counted, (done.left, done.right), done.ms / 1000,
                          fault, volts, done.tray_empty, done.retries)

    def _rehandshake(self) -> None:
        with contextlib.suppress(LinkLostError):
            self.hello = self.link.handshake()

    def battery(self) -> BatteryReading:
        mv, under_load = struct.unpack(">HB", self._ask(Msg.BATTERY, Msg.BATTERY_REPLY))
        return BatteryReading(mv / 1000, bool(under_load))

    def reconnect(self) -> bool:
        """If the link is down, reopen the port and handshake (the port may be back: a
        cable plugged in again, a board that rebooted). A latched fault stays latched."""
        if self._closed or not self.link.lost:
            return not self._closed
        self.link.close()
        try:
            self._connect()
        except DeviceError:
            return False
        log.info("serial link back", firmware=self.hello.firmware)
        return True

    def health(self) -> Health:
        self.reconnect()  # polled by the service every few seconds: reconnection for free
        if self._closed or self.link.lost:
            fault = self._fault or (link_lost_fault(self.link.lost) if self.link.lost else None)
            return Health(False, False, False, fault, {"link": self.link.lost or "closed"})
        motor, tray, _, code, _card = struct.unpack(">BBBBH",
                                                   self._ask(Msg.STATUS, Msg.STATUS_REPLY))
        stats = self.link.stats.to_dict(self.link.decoder.errors)
        return Health(self._fault is None and code == Err.NONE, bool(motor), bool(tray),
                      self._fault, {"link": stats, "firmware": self.hello.firmware})

    def clear_fault(self) -> bool:
        if not self.reconnect():
            return False
        _, _, _, code, _ = struct.unpack(">BBBBH", self._ask(Msg.CLEAR, Msg.STATUS_REPLY))
        if code != Err.NONE:
            return False
        self._fault = None
        return True

    def stop(self) -> None:
        # the microcontroller stops by itself when it stops hearing us
        with contextlib.suppress(LinkLostError, DeviceError):
            self.link.request(Msg.STOP)

    #: called after the link closes (the simulator uses it to power its microcontroller off)
    on_close = None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if not self.link.lost:
                self.stop()
            self.link.close()
            if self.on_close is not None:
                self.on_close()

    def show(self, status: Status) -> None:
        pile = int(status.on_top) if status.on_top is not None else 0xFF
        with contextlib.suppress(LinkLostError):
            self.link.request(Msg.SIGNAL, bytes([SIGNALS.index(status.signal), pile,
                                                 status.next_pass or 0]))

    def wait_event(self, timeout: float | None = None) -> InputEvent | None:
        deadline = time.monotonic() + (timeout or 0)
        while True:
            try:
                return self.events.get_nowait()
            except queue.Empty:
                pass
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                self._next(min(left, 0.05))
            except LinkLostError:
                return None

    def drain_events(self) -> list[InputEvent]:
        with contextlib.suppress(LinkLostError):
            self._next(0.001)
        return super().drain_events()
