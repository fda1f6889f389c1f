"""A virtual microcontroller that speaks the serial protocol on a pseudo-terminal.

It runs a :class:`~hardware_sim.device.SimDevice` (the same physics every
simulated backend moves) behind docs/protocol.md, and owns its own safety: with no
heartbeat for ``heartbeat_timeout`` seconds it stops the motor and latches
"link lost". For the tests it can corrupt, drop and duplicate bytes, reboot in
the middle of a pass, and have its cable pulled.

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
import struct
import threading
import time
import tty
from dataclasses import dataclass

from firmware_bridge.link import Link, LinkLostError
from firmware_bridge.messages import (
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    Capability,
    Err,
    Input,
    Msg,
    PassDone,
    unpack_labels,
)
from shuffler.device import EventKind, FaultKind, Signal, Status
from shuffler.mechanics import Pile
from shuffler.planning import PassPlan

from .device import SimDevice

ERR_OF = {FaultKind.JAM: Err.JAM, FaultKind.MISFEED: Err.MISFEED,
          FaultKind.LOW_BATTERY: Err.STALL, FaultKind.LINK_LOST: Err.LINK_LOST,
          FaultKind.TIMEOUT: Err.TIMEOUT, FaultKind.MCU_RESTARTED: Err.RESTARTED,
          FaultKind.INTERRUPTED: Err.RESTARTED}
INPUT_OF = {EventKind.TOUCH: Input.TOUCH, EventKind.TRAY_LOADED: Input.TRAY_LOADED,
            EventKind.TRAY_EMPTY: Input.TRAY_EMPTY, EventKind.PILE_LIFTED: Input.PILE_LIFTED}
SIGNALS = list(Signal)


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


class VirtualMCU:
    def __init__(self, sim: SimDevice, *, noise: Noise | None = None, seed: int = 0,
                 heartbeat_timeout: float = 0.5, firmware: str = "virtual-mcu 1.0",
                 protocol: tuple[int, int] = (PROTOCOL_MAJOR, PROTOCOL_MINOR)) -> None:
        self.sim = sim
        self.rng = random.Random(seed)
        self.noise = noise or Noise()
        self.heartbeat_timeout = heartbeat_timeout
        self.firmware, self.protocol = firmware, protocol
        master, slave = os.openpty()
        tty.setraw(slave)
        self._master, self._slave = master, slave
        self.path = os.ttyname(slave)
        self.port = PtyPort(master, self.noise, self.rng)
        self.link = Link(self.port, heartbeat=3600, ack_timeout=0.03, tries=10)
        self.boot_id = self.rng.randrange(1 << 16)
        self.booted = time.monotonic()
        self.last_heard = time.monotonic()
        self.epoch = 0  # bumped by a reboot: a pass from before it reports nothing
        self.outbox: queue.Queue[tuple[Msg, bytes]] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        self.unplugged = False
        self._threads = [threading.Thread(target=target, daemon=True,
                                          name=f"mcu-{target.__name__}")
                         for target in (self._dispatch, self._send_loop, self._watchdog)]
        for t in self._threads:
            t.start()

    # -- outgoing ------------------------------------------------------------------------
    def _send_loop(self) -> None:
        while not self._stop.is_set():
            try:
                kind, payload = self.outbox.get(timeout=0.05)
            except queue.Empty:
                continue
            # keep repeating while the host is alive (its heartbeat arrives): a lost
            # PASS_DONE would leave the host waiting for the whole pass time
            while not self._stop.is_set():
                try:
                    self.link.request(kind, payload)
                    break
                except LinkLostError:
                    self.link.lost = None
                    if time.monotonic() - self.last_heard > self.heartbeat_timeout:
                        break  # the host is gone: it re-asks when it comes back

    def _hello(self) -> bytes:
        caps = Capability.PILE_SENSORS | Capability.BATTERY | Capability.REVERSE
        return struct.pack(">BBBH", *self.protocol, caps, self.boot_id) + self.firmware.encode()

    def _ms(self) -> int:
        return int(self.sim.clock.now() * 1000) & 0xFFFFFFFF

    def _forward_inputs(self) -> None:
        for ev in self.sim.drain_events():
            pile = int(ev.pile) if ev.pile is not None else 0xFF
            self.outbox.put((Msg.INPUT, struct.pack(">BBI", INPUT_OF[ev.kind], pile,
                                                    int(ev.at * 1000) & 0xFFFFFFFF)))

    def _status(self) -> bytes:
        health = self.sim.health()
        fault = health.fault
        code = ERR_OF.get(fault.kind, Err.NONE) if fault else Err.NONE
        return struct.pack(">BBBBH", health.motor_on, health.tray_loaded, 0, code,
                           (fault.card or 0) if fault else 0)

    # -- incoming ------------------------------------------------------------------------
    def _dispatch(self) -> None:
        while not self._stop.is_set():
            try:
                frame = self.link.inbox.get(timeout=0.05)
            except queue.Empty:
                continue
            self.last_heard = time.monotonic()
            try:
                kind = Msg(frame.type)
            except ValueError:
                continue
            if kind is Msg.HELLO:
                self.outbox.put((Msg.HELLO_REPLY, self._hello()))
            elif kind is Msg.PASS:
                self._start_pass(frame.payload)
            elif kind is Msg.STOP:
                self.sim.stop()
            elif kind is Msg.STATUS:
                self.outbox.put((Msg.STATUS_REPLY, self._status()))
            elif kind is Msg.BATTERY:
                reading = self.sim.battery()
                self.outbox.put((Msg.BATTERY_REPLY, struct.pack(
                    ">HB", int(reading.volts * 1000), reading.under_load)))
            elif kind is Msg.CLEAR:
                self.sim.clear_fault()
                self.outbox.put((Msg.STATUS_REPLY, self._status()))
            elif kind is Msg.SIGNAL and len(frame.payload) == 3:
                sig, pile, nxt = frame.payload
                if sig < len(SIGNALS):
                    self.sim.show(Status(SIGNALS[sig], Pile(pile) if pile < 2 else None,
                                         nxt or None))
                    self._forward_inputs()

    def _start_pass(self, payload: bytes) -> None:
        def refuse(code: Err) -> None:
            self.outbox.put((Msg.PASS_DONE, PassDone(0, 0, 0, 0, 0, False, 0, code, 0).pack()))

        try:
            labels = unpack_labels(payload)
        except ValueError:
            return refuse(Err.BAD_REQUEST)
        if self._worker is not None:
            self._worker.join(0.5)  # a pass the host gave up on is ending
            if self._worker.is_alive():
                return refuse(Err.BAD_REQUEST)
        if self.sim.health().fault is not None:
            return refuse(Err.LATCHED)
        if not labels:
            return refuse(Err.BAD_REQUEST)
        self._worker = threading.Thread(target=self._run_pass, args=(labels, self.epoch),
                                        daemon=True, name="mcu-pass")
        self._worker.start()

    def _run_pass(self, labels: tuple[int, ...], epoch: int) -> None:
        piles = [0, 0]

        def card(counted: int, expected: int) -> None:
            piles[labels[counted - 1]] += 1
            if epoch == self.epoch:
                with contextlib.suppress(LinkLostError):  # counters are cumulative: a lost
                    self.link.send(Msg.CARD, struct.pack(">HHH", counted, *piles))  # CARD is ok

        report = self.sim.run_pass(PassPlan(labels), card)
        if epoch != self.epoch:
            return  # the microcontroller rebooted: it remembers nothing of this pass
        fault = report.fault
        done = PassDone(report.counted, *report.piles, int(report.seconds * 1000),
                        int((report.min_volts or 0) * 1000), report.tray_empty,
                        report.retries, ERR_OF.get(fault.kind, Err.NONE) if fault else Err.NONE,
                        (fault.card or 0) if fault else 0)
        self.outbox.put((Msg.PASS_DONE, done.pack()))

    def _watchdog(self) -> None:
        """The microcontroller's own safety: a silent host means the motor stops."""
        while not self._stop.wait(0.01):
            if (self.sim.health().motor_on
                    and time.monotonic() - self.last_heard > self.heartbeat_timeout):
                self.sim.halt(FaultKind.LINK_LOST)

    # -- things that happen to a microcontroller ---------------------------------------------
    def reset(self) -> None:
        """A reboot: the motor stops, the pass in flight is forgotten, HELLO goes out."""
        self.epoch += 1
        self.sim.halt(FaultKind.MCU_RESTARTED)
        if self._worker is not None:
            self._worker.join(1)
        self.sim.clear_fault()  # RAM is gone: nothing stays latched
        self.boot_id = self.rng.randrange(1 << 16)
        self.outbox.put((Msg.HELLO_REPLY, self._hello()))

    def pull_cable(self) -> None:
        """The USB cable comes out: the port vanishes under the host."""
        self.unplugged = True
        self.sim.halt(FaultKind.LINK_LOST)
        self._shutdown()

    def _shutdown(self) -> None:
        self._stop.set()
        self.link._lose("power off")  # wake a sender waiting for an acknowledgement
        for t in self._threads:
            t.join(2)
        self.link.close()
        os.close(self._slave)

    def close(self) -> None:
        if not self.unplugged:
            self.unplugged = True
            self.sim.stop()
            self._shutdown()
