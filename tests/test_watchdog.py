"""The watchdog and the touch, on virtual time: the service's deciding loop run in-process
against the simulator, with a real NOTIFY_SOCKET datagram socket hearing what systemd
would hear."""

from __future__ import annotations

import itertools
import random
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hardware_sim import SimDevice
from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.session import Session
from shuffler.control.touch import RESTACK_LOCKOUT
from shuffler.device.clock import VirtualClock
from shuffler.device.contract import EventKind, InputEvent, Signal, Status
from shuffler.errors import DeviceTimeoutError
from shuffler.service.loop import Job, Service
from shuffler.store.state import StateStore

WATCHDOG_SEC = 30.0  # the unit's WatchdogSec; the service pings every half of it


class HeardClock(VirtualClock):
    """A virtual clock that, whenever anyone looks at it, stamps each datagram systemd's
    socket has received since with the virtual time: when each ping was sent."""

    def __init__(self, listener: socket.socket) -> None:
        super().__init__()
        self.listener = listener
        self.heard: list[tuple[float, str]] = []

    def _hear(self) -> None:
        while True:
            try:
                data = self.listener.recv(4096)
            except BlockingIOError:
                return
            self.heard.extend((self._now, line) for line in data.decode().splitlines())

    def now(self) -> float:
        self._hear()
        return super().now()

    def sleep(self, seconds: float) -> None:
        self._hear()
        super().sleep(seconds)

    def pings(self) -> list[float]:
        self._hear()
        return [t for t, line in self.heard if line == "WATCHDOG=1"]


@pytest.fixture
def clock(tmp_path, monkeypatch):
    path = tmp_path / "notify.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(path))
    listener.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    yield HeardClock(listener)
    listener.close()


class SlowDealer(SimDevice):
    """The dealer restacks as the LED says, but touches for the next pass only
    ``delay`` seconds (device time) later, while the hand waits for it."""

    delay = 100.0
    touch_at: float | None = None

    def show(self, status: Status) -> None:
        if status.signal is Signal.STACK and status.next_pass is not None:
            super().show(replace(status, next_pass=None))  # restack, no touch yet
            self.touch_at = self.clock.now() + self.delay
        else:
            super().show(status)

    def wait_event(self, timeout: float | None = None) -> InputEvent | None:
        if self.touch_at is not None and timeout and self.clock.now() + timeout >= self.touch_at:
            self.clock.sleep(self.touch_at - self.clock.now())
            self.touch_at = None
            self.events.put(InputEvent(EventKind.TOUCH, self.clock.now()))
        return super().wait_event(timeout)


def serve(tmp_path: Path, device: SimDevice, clock: VirtualClock, **options) -> Service:
    """A service on ``device`` (not yet running), its watchdog due every 15 s."""
    config = Config()
    controller = PassController(device, StateStore(tmp_path / "state"), config.battery,
                                config.hand.passes)
    return Service(Session(controller, config, random.Random(1)), tmp_path / "s.sock",
                   clock=clock, watchdog=WATCHDOG_SEC / 2, **options)


def run(service: Service, cmd: str, watch=None, **args) -> dict:
    """Run ``cmd`` in the deciding loop as a client's job would; ``watch(msg)`` sees each
    event as it happens."""
    job = Job({"cmd": cmd, "cards": None, "passes": None, "mode": None, **args})
    if watch is not None:
        put = job.replies.put
        job.replies.put = lambda msg: (watch(msg), put(msg))  # type: ignore[method-assign]
    return service._execute(job)


def sim(cls=SimDevice, clock=None, cards: int = 24) -> SimDevice:
    return cls.for_cards(cards, rng=random.Random(3), clock=clock)


def test_a_hand_longer_than_the_watchdog_keeps_being_pinged(tmp_path, clock):
    service = serve(tmp_path, sim(SlowDealer, clock, cards=104), clock)
    start = clock.now()
    answer = run(service, "hand", passes=4, cards=104)  # passes of about 21 s each
    assert answer["ok"] and answer["result"]["hand"]["completed"]
    took = clock.now() - start
    assert took > 3 * SlowDealer.delay > WATCHDOG_SEC  # three long waits for a touch
    pings = [start, *clock.pings(), clock.now()]
    assert len(pings) > took / WATCHDOG_SEC
    gaps = [b - a for a, b in itertools.pairwise(pings)]
    # due every 15 s, and from inside a pass too (on_tick): never much later than due
    assert max(gaps) < WATCHDOG_SEC / 2 + 0.5, gaps


class Wedged(SimDevice):
    """A pass that hangs (a read that never returns) or that runs long but ticks."""

    ticking = False
    release = threading.Event()
    entered = threading.Event()

    def run_pass(self, plan, on_card=None, *, on_tick=None):
        self.entered.set()
        if self.ticking:
            for _ in range(1000):  # 100 s of device time, ticking every 0.1 s
                on_tick()
                self.clock.sleep(0.1)
        else:
            self.release.wait(30)
        return super().run_pass(plan, on_card)


def test_a_pass_that_ticks_is_pinged_and_a_wedged_one_is_not(tmp_path, clock):
    ticking = sim(Wedged, clock)
    ticking.ticking = True
    service = serve(tmp_path / "a", ticking, clock)
    start = clock.now()
    assert run(service, "pass")["ok"]
    during = [t for t in clock.pings() if start < t < start + 100]
    assert len(during) >= 100 / (WATCHDOG_SEC / 2) - 1

    wedged = sim(Wedged, clock)
    wedged.release, wedged.entered = threading.Event(), threading.Event()
    service = serve(tmp_path / "b", wedged, clock)
    before = len(clock.pings())
    loop = threading.Thread(target=run, args=(service, "pass"))
    loop.start()
    try:
        assert wedged.entered.wait(10)
        for _ in range(100):  # 100 s pass for the rest of the system
            clock.sleep(1.0)
            time.sleep(0.001)
        assert len(clock.pings()) == before  # nobody pinged: systemd will restart it
    finally:
        wedged.release.set()
        loop.join(30)


def test_idle_pings_only_while_the_device_answers(tmp_path, clock):
    device = sim(clock=clock)
    service = serve(tmp_path, device, clock)
    for _ in range(40):
        service.step(0)
        clock.sleep(1.0)
    assert len(clock.pings()) >= 40 / (WATCHDOG_SEC / 2) - 1
    heard = len(clock.pings())

    def dead():
        raise DeviceTimeoutError("the device does not answer")

    device.health = dead
    for _ in range(40):
        service.step(0)
        clock.sleep(1.0)
    assert len(clock.pings()) == heard


def test_a_touch_during_a_pass_is_not_the_next_start(tmp_path, clock):
    device = sim(clock=clock)
    service = serve(tmp_path, device, clock)

    def touch_mid_pass(event):
        if event.get("event") == "card" and event["counted"] == 5:
            device.events.put(InputEvent(EventKind.TOUCH, clock.now()))

    assert run(service, "pass", touch_mid_pass)["ok"]
    device.mechanism.gather()  # the dealer puts the pack back
    for _ in range(50):
        service.step(0)
        clock.sleep(0.1)
    assert service.session.controller.store.load().passes == 1  # nothing else started


def test_a_touch_within_the_lockout_is_ignored_and_after_it_starts_the_hand(tmp_path, clock):
    device = sim(clock=clock)
    service = serve(tmp_path, device, clock)
    assert run(service, "pass")["ok"]
    device.mechanism.gather()  # the dealer puts the pack back at once
    device.events.put(InputEvent(EventKind.TOUCH, clock.now()))
    service.step(0)
    assert service.session.controller.store.load().passes == 1
    clock.sleep(RESTACK_LOCKOUT)
    device.events.put(InputEvent(EventKind.TOUCH, clock.now()))
    service.step(0)
    assert service.session.controller.store.load().passes == 1 + Config().hand.passes


def test_a_touch_with_an_empty_tray_starts_nothing_and_says_why(tmp_path, clock):
    device = sim(clock=clock)
    device.mechanism.tray.clear()
    service = serve(tmp_path, device, clock)
    device.events.put(InputEvent(EventKind.TOUCH, clock.now()))
    service.step(0)
    status = service.snapshot["status"]
    assert status.counters.passes == 0
    assert "tray is empty" in status.notice


def test_in_a_hand_touches_during_a_pass_or_the_restack_start_nothing(tmp_path, clock):
    device = sim(SlowDealer, clock)
    service = serve(tmp_path, device, clock)
    starts: list[float] = []

    def watch(msg):
        if msg.get("event") == "pass_start":
            starts.append(clock.now())
        if msg.get("event") == "card" and msg["counted"] == 3:  # an impatient dealer
            device.events.put(InputEvent(EventKind.TOUCH, clock.now()))

    assert run(service, "hand", watch, passes=3)["result"]["hand"]["completed"]
    assert len(starts) == 3
    assert all(b - a >= SlowDealer.delay for a, b in itertools.pairwise(starts))


def test_a_touch_waits_for_a_clients_short_job_and_then_starts_the_hand(tmp_path, clock):
    device = sim(clock=clock)
    service = serve(tmp_path, device, clock)
    assert service.claim.acquire(blocking=False)  # a remote clear has the machine
    device.events.put(InputEvent(EventKind.TOUCH, clock.now()))
    service.step(0)
    assert service.touch_waiting and service.session.controller.store.load().passes == 0
    service.jobs.put(Job({"cmd": "clear"}))  # its job runs, and frees the machine
    service.step(0)
    service.step(0)
    assert not service.touch_waiting
    assert service.session.controller.store.load().passes == Config().hand.passes


def test_a_touch_that_cannot_start_within_its_wait_says_why(tmp_path, clock):
    from shuffler.control.touch import TOUCH_WAIT_S

    device = sim(clock=clock)
    service = serve(tmp_path, device, clock)
    assert service.claim.acquire(blocking=False)  # held, and never let go
    device.events.put(InputEvent(EventKind.TOUCH, clock.now()))
    service.step(0)
    clock.sleep(TOUCH_WAIT_S + 0.1)
    service.step(0)
    assert not service.touch_waiting
    assert "touch ignored" in service.snapshot["status"].notice
    service.claim.release()
    service.step(0)
    assert service.session.controller.store.load().passes == 0  # the old touch is gone


def test_a_loop_that_spins_while_the_machine_stands_still_is_not_pinged(tmp_path, clock):
    class Frozen(SimDevice):
        """Its clock is stuck (a float that no longer moves): the pass spins, ticking."""

        class StuckClock:
            def now(self) -> float:
                return 0.0  # where it stopped

            def sleep(self, seconds: float) -> None:
                clock.sleep(seconds)  # the rest of the world's time goes on

        def run_pass(self, plan, on_card=None, *, on_tick=None):
            for _ in range(600):
                on_tick()
                clock.sleep(0.1)
            return super().run_pass(plan, on_card)

    device = sim(Frozen, clock)
    service = serve(tmp_path, device, clock)
    device.clock = Frozen.StuckClock()  # type: ignore[assignment]
    start = clock.now()
    assert run(service, "pass")["ok"]
    assert len([t for t in clock.pings() if start <= t < start + 60]) <= 1  # then none
