"""``SerialDevice``: the device contract over the serial link to a microcontroller.

The microcontroller runs each pass by docs/protocol.md (jams, misfeeds and stalls
detected there, its own motor stopped there); the host plans, sends the limits and
the plan, and reports. ``--device serial:PORT`` opens one, where PORT is a device
path or any pyserial URL.
"""

from __future__ import annotations

import contextlib
import math
import queue
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import serial

from shuffler.core.mechanics import Feed, Pile
from shuffler.core.planning import PassPlan
from shuffler.device.contract import (
    BatteryReading,
    CardCallback,
    DeviceInfo,
    EngineTimings,
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
from shuffler.device.engine import HALT_MESSAGES
from shuffler.errors import DeviceError, FaultLatchedError
from shuffler.limits import BANDGAP_MAX_MV, BANDGAP_MIN_MV, UNCALIBRATED_READS_LOW_BY
from shuffler.logs import get_logger
from shuffler.pinmap import SERVO_FRAME_S

if TYPE_CHECKING:
    from shuffler.config import Config as ShufflerConfig

from .link import Link, LinkLostError, ProtocolError
from .messages import (
    DUTY_CAP_MINOR,
    FAULT_KIND,
    LAST_STACK_MINOR,
    NO_PASS,
    PROTOCOL_MAJOR,
    BatteryAsk,
    BatteryReply,
    Card,
    Clear,
    Config,
    FaultCode,
    HelloReply,
    Input,
    InputKind,
    Message,
    Pass,
    PassDone,
    PayloadError,
    PileCode,
    SignalCode,
    SignalMsg,
    StatusAsk,
    StatusReply,
    Stop,
    wire_fields,
)

log = get_logger("firmware_bridge.device")
T = TypeVar("T", bound=Message)
EVENT_OF = {InputKind.TOUCH: EventKind.TOUCH, InputKind.TRAY_LOADED: EventKind.TRAY_LOADED,
            InputKind.TRAY_EMPTY: EventKind.TRAY_EMPTY,
            InputKind.PILE_LIFTED: EventKind.PILE_LIFTED}
SIGNALS = list(Signal)
#: how long past its own limit the host waits for the microcontroller's end of pass
PASS_MARGIN = 5.0
#: a pass that hears nothing from the microcontroller this long asks it for its status;
#: a frozen or silent one then leaves that request unacknowledged and the pass ends
#: ``link_lost`` (latched) within QUIET_PROBE_S + the link's ACK tries, about 3.5 s
QUIET_PROBE_S = 1.0
#: INPUT's ``ms`` wraps at 2^32 ms (49.7 days): the host unwraps it
MS_WRAP = 1 << 32


def built_bandgap_mv(firmware: str) -> int | None:
    """The bandgap a Nano firmware was built calibrated to, as its version text names it
    (``shuffler-avr 0.2 bg=1093``, docs/firmware.md), or None (not calibrated; a figure
    outside the datasheet's 1000 to 1200 mV is no calibration either)."""
    for word in firmware.split():
        key, _, mv = word.partition("=")
        if key == "bg" and mv.isdigit() and BANDGAP_MIN_MV <= int(mv) <= BANDGAP_MAX_MV:
            return int(mv)
    return None


def reads_low_by(firmware: str) -> float:
    """How far below the block a board's battery reading may be: 1 for a firmware built
    calibrated, else the bandgap's spread. A firmware that names no bandgap (any other
    board, an older Nano build) gets the spread too: the safe side.

    >>> reads_low_by("shuffler-avr 0.2 bg=1093"), round(reads_low_by("shuffler-avr 0.2"), 3)
    (1.0, 1.091)
    """
    return 1.0 if built_bandgap_mv(firmware) else UNCALIBRATED_READS_LOW_BY


def link_lost_fault(why: str, card: int | None = None) -> Fault:
    return Fault(FaultKind.LINK_LOST, f"The serial link to the machine was lost ({why}); its "
                 "microcontroller stops the motor by itself. Check the cable, put every card "
                 "back in the tray, then run `shuffler clear`.", card)


def signal_next_pass(status: Status, peer_minor: int) -> int:
    """SIGNAL's ``next_pass``: 0 for none, but at the hand's last stack (STACK, no next
    pass) :data:`NO_PASS` to a firmware older than 2.3, which shows READY, not the pile,
    for a 0 there (docs/protocol.md, "The last stack")."""
    if status.next_pass is not None:
        return min(status.next_pass, NO_PASS)
    last_stack = status.signal is Signal.STACK and peer_minor < LAST_STACK_MINOR
    return NO_PASS if last_stack else 0


@dataclass(frozen=True)
class Timings:
    """The machine's own timings that the microcontroller needs with the limits: the
    pass engine's (the one :class:`EngineTimings` every backend runs with), the
    flap's travel, and the motor's duty cap. No defaults here:
    :func:`firmware_bridge.backend.timings_of` reads them from the config (``[engine]``,
    ``[gpio]``, ``[mechanism]`` and ``[battery]``)."""

    engine: EngineTimings
    flap_travel_s: float  # [mechanism] flap_travel_s; the servo frame is added
    #: the largest motor duty: [gpio] motor_max_duty, which the config's loader makes from
    #: motor_volts over a fresh block of the [battery] chemistry (shuffler.pinmap's
    #: motor_duty_cap), the GPIO backend's own cap
    max_duty: float

    @property
    def settle_s(self) -> float:
        """From a card counted to the flap at the other pile: the servo takes a new
        position only at its next 50 Hz frame (up to SERVO_FRAME_S later), then travels."""
        return self.flap_travel_s + SERVO_FRAME_S

    def quickened(self, factor: float) -> Timings:
        """For a simulated machine whose cards come ``1 / factor`` times faster (sim-avr's
        --sim-speed): a quicker card blocks the beam, and leaves it, for less, and the
        flap is quickened with it. The motor's soft start stays as configured."""
        return Timings(self.engine.quickened(factor), self.flap_travel_s * factor,
                       self.max_duty)

    @property
    def max_duty_pct(self) -> int:
        """The cap in CONFIG's whole percent, never above it (the cap is in hundredths)."""
        return math.floor(self.max_duty * 100 + 1e-9)


def timings_of(config: ShufflerConfig) -> Timings:
    """The machine's own timings a microcontroller needs with the limits."""
    return Timings(config.engine.timings(), config.mechanism.flap_travel_s,
                   config.gpio.motor_max_duty)


def default_timings() -> Timings:
    """The timings of a default config: the config's defaults, the only ones."""
    from shuffler.config import Config

    return timings_of(Config())


def config_message(limits: FaultLimits, card_rate: float,
                   timings: Timings | None = None) -> Config:
    """The CONFIG the microcontroller needs before its first pass, checked here first
    against what the microcontroller can take (each field's range, and the flap's
    settle time within a card interval)."""
    t = timings or default_timings()
    e = t.engine

    def ms(seconds: float) -> int:
        return round(seconds * 1000)

    msg = Config(jam_ms=ms(limits.jam_seconds), misfeed_ms=ms(limits.misfeed_seconds),
                 retries=limits.retries, reverse_ms=ms(limits.reverse_seconds),
                 max_pass_ms=ms(limits.max_pass_seconds), settle_ms=ms(t.settle_s),
                 card_interval_ms=ms(1 / card_rate),
                 min_blocked_us=round(e.min_blocked_s * 1e6), stall_mv=ms(limits.stall_volts),
                 soft_start_ms=ms(e.soft_start_s), min_gap_us=round(e.min_gap_s * 1e6),
                 max_duty_pct=t.max_duty_pct)
    try:
        for name, wire in wire_fields(Config):  # each figure in its range, named
            if not wire.lo <= getattr(msg, name) <= wire.hi:
                raise PayloadError(f"CONFIG: {name} = {getattr(msg, name)} outside "
                                   f"{wire.lo}..{wire.hi}")
        Config.unpack(msg.pack())
    except (PayloadError, OverflowError, ValueError) as e:
        raise DeviceError(f"the limits cannot be given to the microcontroller: {e}") from None
    return msg


def _kind(code: FaultCode) -> FaultKind:
    try:
        return FaultKind(FAULT_KIND[code])
    except (KeyError, ValueError):  # a code with no kind of its own
        return FaultKind.INTERRUPTED



class StampClock:
    """The device's time: the microcontroller's, as its stamps tell it. The host cannot
    read the MCU's clock in between, so a reading is the last stamp heard (an INPUT's,
    or a pass's end: when its PASS was sent plus the pass's own ms) and host time since;
    each stamp sets it right. This is never ahead of a clock that runs at least as fast
    as the host's (a crystal's): a touch is never refused for a pass end read too late. A
    clock that runs slower (simavr on a busy host) finds its next stamp behind what was
    read already: this then holds still until host time since that stamp catches up, so
    device time never goes back.

    Device time starts at 0 at the handshake, not at the chip's reset: the chip's own
    clock (an INPUT's ms since reset) is offset by what it read at the first stamp of
    a boot, so the first INPUT of a board up for weeks is no jump of weeks (a touch
    wait begun before it would end at once), and a board that restarts (its ms back
    near 0) goes on from where device time was, not from a time long past."""

    def __init__(self, host: Callable[[], float] = time.monotonic) -> None:
        self._host = host
        self._stamp = (0.0, host())  # (device seconds, host seconds when heard)
        self._read = 0.0  # the latest reading handed out
        self._offset: float | None = None  # the chip's seconds less device seconds
        self._ms_last, self._ms_base = 0, 0  # unwrapping INPUT's ms

    def heard(self, at: float) -> None:
        """A stamp in device time (a pass's end)."""
        self._stamp = (at, self._host())

    def heard_ms(self, ms: int) -> float:
        """A stamp of the chip's own clock (an INPUT's ms since reset): its device time."""
        chip = self.unwrap(ms) / 1000
        if self._offset is None:
            self._offset = chip - self.now()
        at = chip - self._offset
        self.heard(at)
        return at

    def unwrap(self, ms: int) -> int:
        """The MCU's ms, continued past its 2^32 wrap (an hour-long jump back is a wrap)."""
        if ms < self._ms_last and self._ms_last - ms > MS_WRAP // 2:
            self._ms_base += MS_WRAP
        self._ms_last = ms
        return self._ms_base + ms

    def new_boot(self) -> None:
        """The chip (re)started, or was reached again: its clock is anchored afresh at
        its next stamp."""
        self._offset, self._ms_last, self._ms_base = None, 0, 0

    def now(self) -> float:
        stamp, heard = self._stamp
        self._read = max(self._read, stamp + (self._host() - heard))
        return self._read


class SerialDevice(ShufflerDevice):
    """A shuffler behind a microcontroller on ``url`` (a device path or pyserial URL)."""

    REPLY_TIMEOUT = 2.0
    OPEN_ATTEMPTS = 3  # handshakes tried before the port is given up

    def __init__(self, url: str, *, limits: FaultLimits | None = None, feed: Feed = Feed.TOP,
                 baudrate: int = 115200, card_rate: float = 5.0,
                 timings: Timings | None = None, kind: str = "serial",
                 accepts_seed: bool = False,
                 on_close: Callable[[], None] | None = None) -> None:
        super().__init__()
        #: a simulated board (sim-serial, sim-avr) names itself, takes a seed, and stops
        #: its chip when the device closes
        self._kind, self._accepts_seed, self.on_close = kind, accepts_seed, on_close
        self._clock = StampClock()
        self.url, self.baudrate, self.card_rate = url, baudrate, card_rate
        self.timings = timings or default_timings()
        self._limits = limits or FaultLimits()
        self.config = config_message(self._limits, card_rate, self.timings)
        self._feed = feed
        self._fault: Fault | None = None
        self._closed = False
        self._pass_id = secrets.randbelow(0xFFFF) + 1  # the next pass's id
        self._pass_now = 0  # the pass run_pass is on (sending or waiting for), 0 = none
        self._stopped_id = 0  # a stop was accepted for this pass: its PASS is never sent
        self._connect()

    def _connect(self) -> None:
        try:
            port = serial.serial_for_url(self.url, baudrate=self.baudrate, timeout=0.05)
        except (serial.SerialException, ValueError) as e:
            raise DeviceError(f"cannot open the serial port {self.url}: {e}") from None
        self.link = Link(port)
        try:
            for attempt in range(1, self.OPEN_ATTEMPTS + 1):
                try:
                    self.hello = self.link.handshake()  # opening a port can reset a board
                    self._clock.new_boot()
                    self._configure()
                    break
                except LinkLostError:
                    if attempt == self.OPEN_ATTEMPTS:
                        raise
                    self.link.lost = None  # a noisy line: HELLO again, from the start
        except BaseException:
            self.link.close()
            raise
        self._info = DeviceInfo(self._kind, f"shuffler on {self.url}", self._feed,
                                accepts_seed=self._accepts_seed, firmware=self.hello.firmware)

    @property
    def limits(self) -> FaultLimits:
        """The pass limits. Setting them sends them to the microcontroller at once (it
        enforces them itself), and raises :class:`DeviceError` if it does not take them."""
        return self._limits

    @limits.setter
    def limits(self, limits: FaultLimits) -> None:
        config = config_message(limits, self.card_rate, self.timings)  # validated first
        self._limits, self.config = limits, config
        self._configure()

    def _configure(self) -> None:
        self._check_duty_cap()
        reply = self._ask(self.config, StatusReply)
        if not reply.configured:
            raise DeviceError("the microcontroller did not take the limits (a pass was "
                              "still running); try again")

    def _check_duty_cap(self) -> None:
        """A firmware older than protocol 2.DUTY_CAP_MINOR drives the motor at full duty
        whatever the host wants: refused unless full duty is within the motor's rating
        (its CONFIG then goes without the cap, in the format it reads)."""
        hello = self.hello
        if hello.minor >= DUTY_CAP_MINOR or self.config.max_duty_pct >= 100:
            return
        raise ProtocolError(
            f"the microcontroller's firmware ({hello.firmware or 'unnamed'}, protocol "
            f"{hello.major}.{hello.minor}) drives the motor at full duty and cannot cap it at "
            f"{self.config.max_duty_pct} % ([gpio] motor_volts over a fresh block): it would "
            f"overdrive the motor. Flash this version's firmware (protocol {PROTOCOL_MAJOR}."
            f"{DUTY_CAP_MINOR} or later: `make -C firmware flash`, docs/firmware.md)")

    # -- the inbox ---------------------------------------------------------------------------
    def _next(self, timeout: float, tick: Callable[[], None] | None = None) -> Message | None:
        """The next message that is not an input event (those go to :attr:`events`).
        Waiting here is what keeps the heartbeat going: only the deciding loop waits.
        ``tick`` is called at least every 50 ms meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            if tick is not None:
                tick()
            if self.link.lost:
                raise LinkLostError(self.link.lost)
            if self.link.pending_stop:  # asked for by a signal handler during a send
                self.link.pending_stop = False
                self.link.request(Stop(self._pass_now))
            self.link.beat()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                msg = self.link.inbox.get(timeout=min(left, self.link.heartbeat / 2))
            except queue.Empty:
                continue
            if isinstance(msg, Input):
                at = self._clock.heard_ms(msg.ms)
                self.events.put(InputEvent(EVENT_OF[msg.kind], at,
                                           None if msg.pile is PileCode.NONE
                                           else Pile(int(msg.pile))))
                continue
            return msg

    def now(self) -> float:
        """The microcontroller's time, as its stamps tell it (:class:`StampClock`)."""
        return self._clock.now()

    def _ask(self, msg: Message, reply: type[T]) -> T:
        self.link.request(msg)
        deadline = time.monotonic() + self.REPLY_TIMEOUT
        while (left := deadline - time.monotonic()) > 0:
            got = self._next(left)
            if isinstance(got, reply):
                return got
            if isinstance(got, Card | PassDone):
                self.link.stats.stale += 1
        raise LinkLostError(f"no {reply.TYPE.name} from the microcontroller")

    # -- the contract ------------------------------------------------------------------------
    @property
    def info(self) -> DeviceInfo:
        return self._info

    def _new_pass_id(self) -> int:
        pass_id = self._pass_id
        self._pass_id = pass_id % 0xFFFF + 1
        return pass_id

    def run_pass(self, plan: PassPlan, on_card: CardCallback | None = None, *,
                 on_tick: Callable[[], None] | None = None) -> PassReport:
        if self._closed:
            raise DeviceError("the serial device is closed")
        if self._fault is not None:
            raise FaultLatchedError(self._fault.message)
        pass_id = self._pass_now = self._new_pass_id()
        try:
            return self._run(plan, pass_id, on_card, on_tick, time.monotonic())
        finally:
            self._pass_now = 0

    def _run(self, plan: PassPlan, pass_id: int, on_card: CardCallback | None,
             on_tick: Callable[[], None] | None, start: float) -> PassReport:
        expected, counted, piles = plan.cards, 0, (0, 0)
        deadline = start + self.limits.max_pass_seconds + PASS_MARGIN
        try:
            # a stop accepted since the job armed this pass (or for this very pass):
            # the PASS is never sent
            if self._stop_before_start() or self._stopped_id == pass_id:
                return self._stopped(plan, start)
            self.link.request(Pass(pass_id, expected, tuple(plan.labels)))
            sent = self.now()
            while True:
                self._probe_if_quiet()
                msg = self._next(min(deadline - time.monotonic(), self._probe_due()), on_tick)
                if msg is None and time.monotonic() < deadline:
                    continue
                if msg is None:
                    self.stop()
                    return self._failed(plan, counted, piles, start, Fault(
                        FaultKind.TIMEOUT, "The machine did not finish the pass in "
                        f"{self.limits.max_pass_seconds:.0f} s; it was told to stop.",
                        counted + 1))
                if isinstance(msg, Card | PassDone) and msg.pass_id != pass_id:
                    self.link.stats.stale += 1  # an earlier pass's: never this one's
                    continue
                if isinstance(msg, Card | PassDone) and msg.counted > expected:
                    self.link.stats.bad_frames += 1  # more cards than the pass has
                    continue
                if isinstance(msg, Card):
                    for c in range(counted + 1, min(msg.counted, expected) + 1):
                        if on_card:
                            on_card(c, expected)
                    if msg.counted > counted:
                        counted, piles = msg.counted, (msg.left, msg.right)
                elif isinstance(msg, PassDone):
                    if msg.fault is FaultCode.NOT_CONFIGURED:
                        self._configure()  # it forgot the limits (a HELLO from us)
                        pass_id = self._pass_now = self._new_pass_id()
                        self.link.request(Pass(pass_id, expected, tuple(plan.labels)))
                        sent = self.now()
                        continue
                    self._clock.heard(sent + msg.ms / 1000)  # the motor went off then
                    return self._done(msg, expected, on_card, counted)
                elif isinstance(msg, HelloReply):
                    if msg.boot_id == self.hello.boot_id:
                        continue  # a repeat of the handshake's reply
                    self._rehandshake()  # a new boot: the microcontroller restarted
                    return self._failed(plan, counted, piles, start, Fault(
                        FaultKind.MCU_RESTARTED, "The machine's microcontroller restarted in "
                        f"the middle of the pass ({counted} cards dealt). Put every card back "
                        "in the tray and start the pass again.", counted + 1))
        except LinkLostError as e:
            self._fault = link_lost_fault(str(e), counted + 1)
            return self._failed(plan, counted, piles, start, self._fault)

    def _probe_due(self) -> float:
        """Seconds until the quiet probe is due: a wait never outlasts it (an INPUT heard
        in the middle of a wait must not push the probe a whole wait later)."""
        return max(self.link.last_heard + QUIET_PROBE_S - time.monotonic(), 0.01)

    def _probe_if_quiet(self) -> None:
        """Nothing heard for QUIET_PROBE_S: ask for the status. A frozen microcontroller
        does not acknowledge it and the link is lost (LinkLostError)."""
        if time.monotonic() - self.link.last_heard > QUIET_PROBE_S:
            self.link.request(StatusAsk())

    def _stopped(self, plan: PassPlan, start: float) -> PassReport:
        fault = Fault(FaultKind.STOPPED, HALT_MESSAGES[FaultKind.STOPPED], 1)
        return self._failed(plan, 0, (0, 0), start, fault)

    def _failed(self, plan, counted, piles, start, fault) -> PassReport:
        return PassReport(plan.cards, counted, piles, time.monotonic() - start, fault, None,
                          False)

    def _done(self, done: PassDone, expected: int, on_card, seen: int) -> PassReport:
        if done.fault is FaultCode.LATCHED:
            raise FaultLatchedError("the machine refused the pass: a fault is latched on it "
                                    "(run `shuffler clear`)")
        if done.fault in (FaultCode.BUSY, FaultCode.BAD_REQUEST):
            raise DeviceError(f"the machine refused the pass ({done.fault.name.lower()})")
        if on_card:
            for c in range(seen + 1, min(done.counted, expected) + 1):
                on_card(c, expected)
        volts = done.min_mv / 1000 if done.min_mv else None
        card = done.fault_card or done.counted + 1
        fault = self._fault_of(done, card, expected, volts)
        if fault is not None and fault.kind.latches:
            self._fault = fault
        return PassReport(expected, done.counted, (done.left, done.right), done.ms / 1000,
                          fault, volts, done.tray_empty, done.retries)

    def _fault_of(self, done: PassDone, card: int, expected: int,
                  volts: float | None) -> Fault | None:
        """The same fault, in the same words, as the pass engine gives on any backend."""
        code = done.fault
        if code is FaultCode.NONE:
            return None
        if code in (FaultCode.JAM, FaultCode.MISFEED):
            kind = FaultKind.JAM if code is FaultCode.JAM else FaultKind.MISFEED
            return feed_fault(kind, card, done.counted, expected)
        if code is FaultCode.LOW_BATTERY:
            return stall_fault(card, done.counted, expected, volts or 0.0)
        if code is FaultCode.TIMEOUT:
            return Fault(FaultKind.TIMEOUT, "The pass ran longer than "
                         f"{self.limits.max_pass_seconds:.0f} s; the motor was stopped.", card)
        kind = _kind(code)
        return Fault(kind, HALT_MESSAGES.get(kind, f"The machine stopped the pass ({code.name})."),
                     card)

    def _rehandshake(self) -> None:
        with contextlib.suppress(LinkLostError):
            self.hello = self.link.handshake()
            self._clock.new_boot()
            self._configure()

    def battery(self) -> BatteryReading:
        reply = self._ask(BatteryAsk(), BatteryReply)
        return BatteryReading(reply.mv / 1000, reply.under_load,
                              reads_low_by=reads_low_by(self.hello.firmware))

    def reconnect(self) -> bool:
        """If the link is down, reopen the port, handshake and configure (the port may be
        back: a cable plugged in again, a board that rebooted). A latched fault stays."""
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
        try:
            reply = self._ask(StatusAsk(), StatusReply)
        except LinkLostError as e:
            self._fault = self._fault or link_lost_fault(str(e))
            return Health(False, False, False, self._fault, {"link": str(e)})
        stats = self.link.stats.to_dict(self.link.decoder.errors)
        return Health(self._fault is None and reply.fault is FaultCode.NONE, reply.motor_on,
                      reply.tray_loaded, self._fault,
                      {"link": stats, "firmware": self.hello.firmware,
                       "beam_blocked": reply.beam_blocked,
                       "reset_cause": self.hello.reset_cause.name.lower()})

    def clear_fault(self) -> bool:
        if not self.reconnect():
            return False
        try:
            reply = self._ask(Clear(), StatusReply)
        except LinkLostError:
            return False
        if reply.fault is not FaultCode.NONE:
            return False
        self._fault = None
        return True

    def stop(self) -> None:
        # the microcontroller stops by itself when it stops hearing us; from a signal
        # handler that interrupted a send, the STOP follows as soon as that send ends
        self._note_stop()  # armed: the pass about to start never starts
        self._stopped_id = self._pass_now  # that pass's PASS is never sent after this
        with contextlib.suppress(LinkLostError, DeviceError):
            if not self.link.try_request(Stop(self._pass_now)):
                self.link.pending_stop = True

    #: called after the link closes (the simulator uses it to power its microcontroller off)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if not self.link.lost:
                self.stop()
            self.link.close()
            if self.on_close is not None:
                self.on_close()

    def show(self, status: Status) -> None:
        pile = PileCode.NONE if status.on_top is None else PileCode(int(status.on_top))
        with contextlib.suppress(LinkLostError):
            self.link.request(SignalMsg(SignalCode(SIGNALS.index(status.signal)), pile,
                                        signal_next_pass(status, self.link.peer_minor)))

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
                msg = self._next(min(left, 0.05))
            except LinkLostError:
                return None
            if isinstance(msg, Card | PassDone):
                self.link.stats.stale += 1

    def drain_events(self) -> list[InputEvent]:
        with contextlib.suppress(LinkLostError):
            self._next(0.001)
        return super().drain_events()
