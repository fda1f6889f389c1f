"""A virtual microcontroller that speaks the serial protocol on a pseudo-terminal.

It runs a :class:`~hardware_sim.device.SimDevice` (the same physics every
simulated backend moves) behind docs/protocol.md, and owns its own safety: with no
sign of life from the host for ``silence`` seconds it stops the motor and latches
"link lost", and a retry waits with the motor off while the host is silent past
``quiet`` seconds. A STOP, whichever pass it names, ends whatever runs. For the
tests it can corrupt, drop and duplicate bytes, reboot in the middle of a pass, and
have its cable pulled.

    >>> from hardware_sim import SimDevice
    >>> mcu = VirtualMCU(SimDevice.for_cards(24))
    >>> mcu.path.startswith("/dev/")
    True
    >>> mcu.close()
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import select
import threading
import time
import tty
from collections import deque
from dataclasses import dataclass

from firmware_bridge.device import built_bandgap_mv
from firmware_bridge.link import Link, LinkLostError
from firmware_bridge.messages import (
    FAULT_KIND,
    LAST_STACK_MINOR,
    NO_PASS,
    OLD_HOST_DUTY_PCT,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    REDRIVE_QUIET_MS,
    SILENCE_MS,
    Ack,
    BatteryAsk,
    BatteryReply,
    Capability,
    Card,
    Clear,
    Config,
    FaultCode,
    Hello,
    HelloReply,
    Input,
    InputKind,
    Message,
    Pass,
    PassDone,
    PileCode,
    ResetCause,
    SignalMsg,
    StatusAsk,
    StatusReply,
    Stop,
)
from shuffler.core.mechanics import Pile
from shuffler.core.planning import PassPlan
from shuffler.device.contract import (
    EngineTimings,
    EventKind,
    FaultKind,
    FaultLimits,
    Signal,
    Status,
)

from .device import SimDevice

#: the host's fault kinds to the wire's codes (docs/protocol.md, "fault codes")
CODE_OF = {FaultKind(kind): code for code, kind in FAULT_KIND.items()
           if kind in {k.value for k in FaultKind}}
INPUT_OF = {EventKind.TOUCH: InputKind.TOUCH, EventKind.TRAY_LOADED: InputKind.TRAY_LOADED,
            EventKind.TRAY_EMPTY: InputKind.TRAY_EMPTY,
            EventKind.PILE_LIFTED: InputKind.PILE_LIFTED}
SIGNALS = list(Signal)
#: the firmware's brake interval before the motor reverses (firmware/pass.c, BRAKE_MS)
BRAKE_S = 0.020
#: the firmware's reply queue (firmware/link.c, QUEUE): INPUT events leave two slots free
QUEUE_SLOTS = 6
INPUT_SLOTS = QUEUE_SLOTS - 2
#: the requests whose answer needs a slot (firmware/main.c, link_answers)
ANSWERED = (Config, Pass, StatusAsk, BatteryAsk, Clear)
#: the Nano's battery reading (firmware/board.h): the divider, and the bandgap AVcc is
#: measured against before every reading
DIVIDER_NUM, BANDGAP_MV = 3, 1100
#: the Nano's 5 V from USB, less its diode (shuffler.limits.NANO_5V): 4.4 to 5.25 V
AVCC_MV = 5000


def nano_battery_mv(volts: float, avcc_mv: int = AVCC_MV, bandgap_mv: int = BANDGAP_MV,
                    built_mv: int = BANDGAP_MV) -> int:
    """The firmware's reading of a ``volts`` battery (firmware/hw.c, battery_mv): A0
    (the divider's tap) and the chip's bandgap (``bandgap_mv``: 1000 to 1200), each in 10
    bits of AVcc, so AVcc cancels but for the rounding of the two conversions; the
    firmware scales by the bandgap it was built with (``built_mv``, BANDGAP_MV), so an
    uncalibrated chip reads ``built_mv / bandgap_mv`` of the block.

    >>> nano_battery_mv(9.5, 5000), nano_battery_mv(9.5, 4400), nano_battery_mv(9.5, 5250)
    (9489, 9524, 9499)
    >>> nano_battery_mv(11.5, 5000, 1200), nano_battery_mv(11.5, 5000, 1200, 1200)
    (10560, 11520)
    """
    a0 = min(1023, int(volts * 1000 / DIVIDER_NUM) * 1023 // avcc_mv)
    bandgap = bandgap_mv * 1023 // avcc_mv
    if a0 >= 1023:  # full scale: DIVIDER_NUM times AVcc or more, reported as over-voltage
        return 0xFFFF
    return min(0xFFFF, a0 * built_mv * DIVIDER_NUM // bandgap)


def duty_of(speed: float, max_duty_pct: int) -> float:
    """The duty on the driver's pin for the engine's ``speed`` (of full, -1..1) under a
    CONFIG's cap, as the firmware drives it (firmware/hw.c: motor_cap, motor_set): the
    compare value ``top * speed`` of ``top = pct * 256 / 100 - 1``, high for one count
    more of 256; 0 when off."""
    if not speed:
        return 0.0
    top = max_duty_pct * 256 // 100 - 1
    return (int(top * abs(speed) + 1e-9) + 1) / 256


def limits_of(config: Config) -> FaultLimits:
    return FaultLimits(jam_seconds=config.jam_ms / 1000,
                       misfeed_seconds=config.misfeed_ms / 1000, retries=config.retries,
                       reverse_seconds=config.reverse_ms / 1000,
                       stall_volts=config.stall_mv / 1000,
                       max_pass_seconds=config.max_pass_ms / 1000)


@dataclass
class Noise:
    """Line noise, per byte, in both directions."""

    corrupt: float = 0.0
    drop: float = 0.0
    duplicate: float = 0.0

    def apply(self, data: bytes, rng: random.Random) -> bytes:
        if not (self.corrupt or self.drop or self.duplicate):
            return data
        out = bytearray()
        for byte in data:
            roll = rng.random()
            if roll < self.drop:
                continue
            if roll < self.drop + self.corrupt:
                byte ^= rng.randrange(1, 256)
            out.append(byte)
            if rng.random() < self.duplicate:
                out.append(byte)
        return bytes(out)


class PtyPort:
    """The microcontroller's side of the pseudo-terminal, with line noise."""

    def __init__(self, fd: int, noise: Noise, rng: random.Random) -> None:
        self.fd, self.noise, self.rng = fd, noise, rng
        self.in_waiting = 0
        self.closed = False
        self._lock = threading.Lock()

    def read(self, n: int = 1) -> bytes:
        if self.closed:
            raise OSError("port closed")
        ready, _, _ = select.select([self.fd], [], [], 0.05)
        with self._lock:
            if self.closed:
                raise OSError("port closed")
            if not ready:
                return b""
            return self.noise.apply(os.read(self.fd, 4096), self.rng)

    def write(self, data: bytes) -> int:
        with self._lock:
            if self.closed:
                raise OSError("port closed")
            data = self.noise.apply(data, self.rng)
            os.write(self.fd, data)
        return len(data)

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                os.close(self.fd)


class ReplyQueue:
    """The firmware's reliable queue (firmware/link.c): six slots for replies and events
    (INPUT takes at most four), and a slot of its own for the PASS_DONE of a pass that
    ran, sent first. A slot is taken from when a request is acknowledged until its answer
    is, so a request that finds the queue full is left unacknowledged (the host repeats
    it), as is a PASS while the last PASS_DONE waits for its ACK. A HELLO or a reset
    (:meth:`restart`) empties it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._replies: deque[Message] = deque()
        self.result: Message | None = None  # the pass's PASS_DONE until acknowledged
        self._result_waiting = False  # ... and not yet taken to be sent
        self.held = 0  # slots of replies waiting or in flight
        self.reserved = 0  # slots of requests acknowledged, not yet answered
        self.epoch = 0

    def reserve(self, msg: Message) -> bool:
        """The link's reader, before it acknowledges ``msg``: is there room to answer?"""
        with self._cond:
            if isinstance(msg, Pass) and self.result is not None:
                return False
            if not isinstance(msg, ANSWERED):
                return True
            if self.held + self.reserved >= QUEUE_SLOTS:
                return False
            self.reserved += 1
            return True

    def answer(self, msg: Message) -> None:
        """A request's answer, into the slot reserved for it."""
        with self._cond:
            self.reserved = max(0, self.reserved - 1)
            self.held += 1
            self._replies.append(msg)
            self._cond.notify()

    def release(self) -> None:
        """A request that needs no answer after all (a PASS that runs)."""
        with self._cond:
            self.reserved = max(0, self.reserved - 1)

    def put(self, msg: Message) -> bool:
        """A message nobody asked for (INPUT, HELLO_REPLY); False: no room, dropped."""
        with self._cond:
            if self.held + self.reserved >= (INPUT_SLOTS if isinstance(msg, Input)
                                             else QUEUE_SLOTS):
                return False
            self.held += 1
            self._replies.append(msg)
            self._cond.notify()
            return True

    def put_result(self, msg: Message) -> None:
        with self._cond:
            self.result, self._result_waiting = msg, True
            self._cond.notify()

    def next(self, timeout: float) -> tuple[Message, bool, int] | None:
        """The next message to send (the result first): (message, is_result, epoch)."""
        with self._cond:
            self._cond.wait_for(lambda: self._result_waiting or bool(self._replies), timeout)
            if self._result_waiting and self.result is not None:
                self._result_waiting = False
                return self.result, True, self.epoch
            if self._replies:
                return self._replies.popleft(), False, self.epoch
            return None

    def done(self, is_result: bool, epoch: int) -> None:
        """A message sent was acknowledged (or given up): its slot is free."""
        with self._cond:
            if epoch != self.epoch:
                return
            if is_result:
                self.result = None
            else:
                self.held = max(0, self.held - 1)

    def restart(self) -> None:
        """Everything waiting is dropped (requests acknowledged meanwhile keep theirs)."""
        with self._cond:
            self.epoch += 1
            self._replies.clear()
            self.result, self._result_waiting = None, False
            self.held = 0


class VirtualMCU:
    """The microcontroller of docs/protocol.md on a pseudo-terminal (``path``)."""

    def __init__(self, sim: SimDevice, *, noise: Noise | None = None, seed: int = 0,
                 silence: float = SILENCE_MS / 1000, quiet: float = REDRIVE_QUIET_MS / 1000,
                 firmware: str = "virtual-mcu 2.0",
                 protocol: tuple[int, int] = (PROTOCOL_MAJOR, PROTOCOL_MINOR),
                 dealer: bool = True) -> None:
        self.sim = sim
        self.dealer = dealer  # a simulated dealer frees a jammed throat on the fault LED
        self.rng = random.Random(seed)
        self.noise = noise or Noise()
        self.silence, self.quiet = silence, quiet
        self.firmware, self.protocol = firmware, protocol
        master, slave = os.openpty()
        tty.setraw(slave)
        self._master, self._slave = master, slave
        self.path = os.ttyname(slave)
        self.port = PtyPort(master, self.noise, self.rng)
        self.outbox = ReplyQueue()
        self.link = Link(self.port, on_receive=self._heard, accept=self.outbox.reserve)
        self.boot_id = self.rng.randrange(1 << 16)
        self.last_heard = time.monotonic()
        self.config: Config | None = None
        #: the duty cap (CONFIG's max_duty_pct; a 2.1 host's CONFIG has none: the default)
        self.max_duty_pct = OLD_HOST_DUTY_PCT
        #: the board's AVcc (the Nano's 5 V from USB), which the battery reading cancels
        self.avcc_mv = AVCC_MV
        #: the chip's own bandgap (1000 to 1200 mV); the firmware text's ``bg=`` (or 1100)
        #: is the one it scales by (a calibrated build: the same figure)
        self.bandgap_mv = BANDGAP_MV
        self.silenced_at: float | None = None  # when the silence rule last stopped a pass
        self.heard_before_silence = 0.0
        self.epoch = 0  # bumped by a reboot or a HELLO: a pass from before reports nothing
        self._worker: threading.Thread | None = None
        self._pass_id = 0
        self._silenced = 0  # the pass the silence rule last ended
        self._stop = threading.Event()
        self.unplugged = False
        self.dealt_at_stop: int | None = None  # cards on the piles when a STOP arrived
        self.reset_cause = ResetCause.POWER_ON
        self.stopped_id = 0  # the pass a STOP named: its PASS, if it comes later, never runs
        self._threads = [threading.Thread(target=target, daemon=True,
                                          name=f"mcu-{target.__name__}")
                         for target in (self._dispatch, self._send_loop, self._watchdog)]
        for t in self._threads:
            t.start()

    def _battery_mv(self, volts: float) -> int:
        return nano_battery_mv(volts, self.avcc_mv, self.bandgap_mv,
                               built_bandgap_mv(self.firmware) or BANDGAP_MV)

    def _heard(self, msg: Message) -> None:
        """The silence rule: every valid frame from the host but an ACK is a sign of life.
        A STOP takes effect here, before its ACK goes out, as on the firmware (which
        applies a frame in the same turn it acknowledges it): once the host has the ACK
        the motor is off. STOP means stop: whatever runs ends, whichever id it names."""
        if not isinstance(msg, Ack):
            self.last_heard = time.monotonic()
        if isinstance(msg, Stop):
            self.sim.stop()
            self.stopped_id = msg.pass_id

    # -- outgoing ------------------------------------------------------------------------
    def _send_loop(self) -> None:
        while not self._stop.is_set():
            item = self.outbox.next(0.05)
            if item is None:
                continue
            msg, is_result, slot_epoch = item
            epoch = self.epoch
            # never give a message up (docs/protocol.md): the same frame, same sequence
            # number, repeated until acknowledged, or until a HELLO or a reset drops it
            def current(epoch: int = epoch) -> bool:
                return not self._stop.is_set() and epoch == self.epoch

            with contextlib.suppress(LinkLostError):
                self.link.request(msg, until=current)
            self.outbox.done(is_result, slot_epoch)

    def _hello(self) -> HelloReply:
        caps = Capability.PILE_SENSORS | Capability.BATTERY | Capability.REVERSE
        return HelloReply(*self.protocol, int(caps), self.boot_id, self.reset_cause,
                          self.firmware)

    def _forward_inputs(self) -> None:
        for ev in self.sim.drain_events():
            if ev.kind not in INPUT_OF:  # a long press: the chip sent its TOUCH at the
                continue  # press edge and reports no hold (docs/protocol.md, INPUT)
            pile = PileCode.NONE if ev.pile is None else PileCode(int(ev.pile))
            self.outbox.put(Input(INPUT_OF[ev.kind], pile, int(ev.at * 1000) & 0xFFFFFFFF))

    def _status(self) -> StatusReply:
        health = self.sim.health()
        fault = health.fault
        code = CODE_OF.get(fault.kind, FaultCode.NONE) if fault else FaultCode.NONE
        return StatusReply(health.motor_on, health.tray_loaded, False, code,
                           (fault.card or 0) if fault else 0, self.config is not None,
                           self._pass_id)

    # -- incoming ------------------------------------------------------------------------
    def _dispatch(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self.link.inbox.get(timeout=0.05)
            except queue.Empty:
                continue
            self._apply(msg)

    def _apply(self, msg: Message) -> None:
        if isinstance(msg, Hello):
            self._new_session()
            self.outbox.put(self._hello())
        elif isinstance(msg, Config):
            if not self._running():
                self.config, self.max_duty_pct = msg, msg.max_duty_pct
                self.sim.limits = limits_of(msg)
                self.sim.timings = EngineTimings(soft_start_s=msg.soft_start_ms / 1000,
                                                 min_blocked_s=msg.min_blocked_us / 1e6,
                                                 min_gap_s=msg.min_gap_us / 1e6)
                self.sim.brake_s = BRAKE_S
            self.outbox.answer(self._status())
        elif isinstance(msg, Pass):
            self._start_pass(msg)
        elif isinstance(msg, Stop):
            # as the firmware: whatever runs ends; the pass named, if it comes later,
            # never starts
            self.sim.stop()
            self.stopped_id = msg.pass_id
            # for tests: the host's lateness is not the MCU's (at 50x, 20 ms is a card);
            # the stop's PASS_DONE may reach the host before this is set
            self.dealt_at_stop = sum(len(p) for p in self.sim.mechanism.piles)
        elif isinstance(msg, StatusAsk):
            self.outbox.answer(self._status())
        elif isinstance(msg, BatteryAsk):
            reading = self.sim.battery()
            self.outbox.answer(BatteryReply(self._battery_mv(reading.volts),
                                            reading.under_load))
        elif isinstance(msg, Clear):
            # as the firmware: a latched fault clears only with no pass running and the
            # beam clear (a card caught in the throat must be freed first); STATUS_REPLY
            # says which
            if not self._running() and not self.throat_blocked():
                self.sim.clear_fault()
            self.outbox.answer(self._status())
        elif isinstance(msg, SignalMsg):
            pile = None if msg.pile is PileCode.NONE else Pile(int(msg.pile))
            signal = SIGNALS[msg.signal]
            if signal is Signal.STACK and not msg.next_pass and \
                    self.protocol[1] < LAST_STACK_MINOR:
                signal = Signal.READY  # as a 2.2 firmware shows the last stack
            last = msg.next_pass in (0, NO_PASS)  # NO_PASS: a last stack to an older chip
            self.sim.show(Status(signal, pile, None if last else msg.next_pass))
            self._forward_inputs()

    def _new_session(self) -> None:
        """HELLO: the sequences restart, unsent messages and CONFIG are dropped, and a pass
        in progress ends with LINK_LOST (latched)."""
        self.epoch += 1
        if self._running():
            self.sim.halt(FaultKind.LINK_LOST)
            self._worker.join(1)  # type: ignore[union-attr]
        self.outbox.restart()
        self.config, self.max_duty_pct = None, OLD_HOST_DUTY_PCT
        self.stopped_id = 0

    def _running(self) -> bool:
        """A pass is under way (its PASS_DONE not yet queued)."""
        return self._pass_id != 0

    def _start_pass(self, msg: Pass) -> None:
        def refuse(code: FaultCode) -> None:
            self.outbox.answer(PassDone(msg.pass_id, 0, 0, 0, 0, 0, False, 0, code, 0))

        if msg.pass_id == self.stopped_id:
            return refuse(FaultCode.STOPPED)  # stopped before it came
        if self._running():
            return refuse(FaultCode.BUSY)
        if self.sim.health().fault is not None:
            return refuse(FaultCode.LATCHED)
        if self.config is None:
            return refuse(FaultCode.NOT_CONFIGURED)
        if self._worker is not None:
            self._worker.join(1)  # the last pass's thread, past its PASS_DONE
        self.sim.arm()  # a STOP from now until the pass runs keeps its motor off
        self._pass_id = msg.pass_id
        if msg.pass_id == self.stopped_id:  # its STOP came on the reader meanwhile
            self._pass_id = 0
            return refuse(FaultCode.STOPPED)
        self.outbox.release()  # its PASS_DONE goes in the slot of its own
        self._worker = threading.Thread(target=self._run_pass,
                                        args=(msg.pass_id, msg.labels, self.epoch),
                                        daemon=True, name="mcu-pass")
        self._worker.start()

    def _run_pass(self, pass_id: int, labels: tuple[int, ...], epoch: int) -> None:
        piles = [0, 0]

        def card(counted: int, expected: int) -> None:
            piles[labels[counted - 1]] += 1
            if epoch == self.epoch:
                with contextlib.suppress(LinkLostError):  # counters are cumulative: a lost
                    self.link.send(Card(pass_id, counted, *piles))  # CARD is harmless

        try:
            report = self.sim.run_pass(PassPlan(labels), card)
        except BaseException:
            self._pass_id = 0
            raise
        if epoch == self.epoch:  # else a reboot or a new session: its end is not reported
            fault = report.fault
            code = CODE_OF.get(fault.kind, FaultCode.NONE) if fault else FaultCode.NONE
            self.outbox.put_result(PassDone(pass_id, report.counted, *report.piles,
                                            int(report.seconds * 1000),
                                            self._battery_mv(report.min_volts)
                                            if report.min_volts else 0,
                                            report.tray_empty, min(report.retries, 255),
                                            code, (fault.card or 0) if fault else 0))
        self._pass_id = 0  # as the firmware: the pass ends as its PASS_DONE is queued

    def _watchdog(self) -> None:
        """The silence rule: a host silent for ``silence`` seconds stops the machine; one
        silent past ``quiet`` holds a retry (firmware/main.c: pass_host_quiet)."""
        while not self._stop.wait(0.01):
            run = self.sim._run
            if run is not None:
                run.engine.quiet = time.monotonic() - self.last_heard > self.quiet
            self._forward_inputs()  # as the firmware: sensor events go out as they happen
            if self.dealer and self.throat_blocked():
                self.sim.mechanism.free_throat()  # the dealer sees the fault LED
            # as the firmware: a pass running ends, its motor on or not (a retry held)
            running = self._running() and self._silenced != self._pass_id
            if ((self.sim.health().motor_on or running)
                    and time.monotonic() - self.last_heard > self.silence):
                self._silenced = self._pass_id
                self.silenced_at, self.heard_before_silence = time.monotonic(), self.last_heard
                self.sim.halt(FaultKind.LINK_LOST)

    def duty(self) -> float:
        """The motor's duty now, as the firmware would drive it under this CONFIG's cap."""
        run = self.sim._run
        speed = run.engine.motor if run is not None and self.sim.health().motor_on else 0.0
        return duty_of(speed, self.max_duty_pct)

    def throat_blocked(self) -> bool:
        """A card caught in the beam after a pass ended (a jam): CLEAR is refused."""
        return not self._running() and bool(self.sim.mechanism.stuck)

    def settle(self, timeout: float = 2.0) -> bool:
        """Wait for the simulated dealer to free the throat (as firmware/harness's dealer
        acts on the fault LED); False if it did not in ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.throat_blocked() and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self.throat_blocked()

    # -- things that happen to a microcontroller ---------------------------------------------
    def reset(self) -> None:
        """A reboot: the motor stops, the pass in flight is forgotten, HELLO_REPLY goes out."""
        self.epoch += 1
        self.sim.halt(FaultKind.MCU_RESTARTED)
        if self._worker is not None:
            self._worker.join(1)
        self.sim.clear_fault()  # RAM is gone: nothing stays latched
        self.config, self.max_duty_pct = None, OLD_HOST_DUTY_PCT
        self.reset_cause = ResetCause.WATCHDOG
        self.boot_id = self.rng.randrange(1 << 16)
        self.outbox.restart()  # RAM is gone: so is the queue
        self.outbox.put(self._hello())

    def pull_cable(self) -> None:
        """The USB cable comes out: the port vanishes under the host."""
        self.unplugged = True
        self.sim.halt(FaultKind.LINK_LOST)
        self._shutdown()

    def _shutdown(self, expected: bool = False) -> None:
        self._stop.set()
        if expected:  # switched off with the host's device: no link was lost to warn of
            self.link._closing.set()
        self.link._lose("power off")  # wake a sender waiting for an acknowledgement
        for t in self._threads:
            t.join(2)
        self.link.close()
        os.close(self._slave)

    def close(self) -> None:
        if not self.unplugged:
            self.unplugged = True
            self.sim.stop()
            self._shutdown(expected=True)
