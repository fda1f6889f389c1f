"""Stop is a state: an acknowledged stop always stops, at any moment, on every backend.

The service's stop is recorded by the job's owner (the controller) and honoured from
"accepted" to "motor off": a pass about to start never starts, a running one stops, a
hand ends between its passes. These tests stop at chosen moments and read the motor
itself (the rig's pin on gpio, the simulated machine's motor on sim and serial).
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from hardware_sim import SimDevice
from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.session import Session
from shuffler.core.planning import coin_plan
from shuffler.device.clock import VirtualClock
from shuffler.device.contract import FaultKind
from shuffler.faces.router import Faces
from shuffler.service.loop import Job, Service
from shuffler.store.state import StateStore
from tests.conftest import BACKENDS


def motor_moved(harness, dev) -> bool:
    """Whether any card left the tray (the motor turned forward)."""
    left, right = harness.piles(dev)
    return bool(len(left) or len(right))


@pytest.mark.parametrize("name", ["sim", "gpio", "serial", "sim-avr"])
def test_a_stop_after_arming_and_before_the_pass_starts_keeps_the_motor_off(name):
    harness = BACKENDS[name]()
    harness._open = []
    try:
        dev = harness.make(24)
        dev.arm()  # the controller has checked the pass may start ...
        dev.stop()  # ... and a stop comes before the backend marks it running
        report = dev.run_pass(coin_plan(24, random.Random(2)))
        assert report.fault is not None and report.fault.kind is FaultKind.STOPPED
        assert report.counted == 0 and not motor_moved(harness, dev)
        if name == "gpio":
            motor = harness.rigs[id(dev)].pins["motor"]
            assert all(not s.state for s in motor.states)
        again = dev.run_pass(coin_plan(24, random.Random(3)))  # the stop is used up
        assert again.fault is None and again.counted == 24
    finally:
        if hasattr(harness, "close"):
            harness.close()


def service_on(tmp_path, device) -> Service:
    config = Config()
    controller = PassController(device, StateStore(tmp_path / "state"), config.battery,
                                config.hand.passes)
    return Service(Session(controller, config, random.Random(1)), tmp_path / "s.sock",
                   clock=getattr(device, "clock", None), faces=Faces)


def job(service: Service, cmd: str, watch, **args) -> dict:
    """``cmd`` accepted as the socket accepts it (the job begun), then run by the loop."""
    req = {"cmd": cmd, "cards": None, "passes": None, "mode": None, **args}
    service.session.controller.begin_job()
    j = Job(req)
    put = j.replies.put
    j.replies.put = lambda msg: (watch(msg), put(msg))  # type: ignore[method-assign]
    return service._execute(j)


def stop(service: Service) -> bool:
    answers: list[dict] = []
    service._answer({"cmd": "stop"}, answers.append)
    return answers[-1]["result"]["stopped"]


def test_a_stop_with_nothing_running_says_it_stopped_nothing(tmp_path):
    device = SimDevice.for_cards(24, rng=random.Random(5), clock=VirtualClock())
    service = service_on(tmp_path, device)
    try:
        assert stop(service) is False
        answer = job(service, "pass", lambda m: None)  # a stop before it does not count
        assert answer["result"]["pass"]["counted"] == 24
        assert stop(service) is False
    finally:
        device.close()


def test_a_stop_right_after_the_socket_accepted_the_pass_means_it_never_starts(tmp_path):
    device = SimDevice.for_cards(24, rng=random.Random(5), clock=VirtualClock())
    service = service_on(tmp_path, device)
    answered: list[bool] = []
    try:
        def watch(msg):
            if msg.get("event") == "pass_start" and not answered:
                answered.append(stop(service))
        answer = job(service, "pass", watch)
        assert answered == [True]
        result = answer["result"]["pass"]
        assert result["fault"]["kind"] == "stopped" and result["counted"] == 0
        assert not device.mechanism.piles[0] and not device.mechanism.piles[1]
    finally:
        device.close()


def test_a_stop_between_the_passes_of_a_hand_ends_the_hand(tmp_path):
    device = SimDevice.for_cards(24, rng=random.Random(5), clock=VirtualClock())
    service = service_on(tmp_path, device)
    answered: list[bool] = []
    try:
        def watch(msg):
            if msg.get("event") == "stack" and not answered:
                answered.append(stop(service))
        answer = job(service, "hand", watch, passes=5)
        hand = answer["result"]["hand"]
        assert answered == [True] and not hand["completed"]
        reports = hand["pass_reports"]
        assert reports[0]["counted"] == 24 and reports[0]["fault"] is None
        assert reports[-1]["fault"]["kind"] == "stopped" and reports[-1]["counted"] == 0
        assert len(reports) == 2 and service.session.controller.store.load().passes == 1
    finally:
        device.close()


# -- the race: a stop at chosen moments after pass_start, on every backend -------------

OFFSETS_MS = (0, 1, 2, 5, 10, 20, 50)


class Recording(SimDevice):
    """A simulated machine that notes every change of its motor, by the host's clock too."""

    def __init__(self, *args, **kwargs) -> None:
        self.motor_log: list[tuple[float, float, bool]] = []  # (device t, host t, on)
        super().__init__(*args, **kwargs)

    @property
    def _motor_on(self) -> bool:
        return self.__dict__.get("_on", False)

    @_motor_on.setter
    def _motor_on(self, on: bool) -> None:
        if on != self.__dict__.get("_on", False) and "motor_log" in self.__dict__:
            self.motor_log.append((self.clock.now(), time.monotonic(), on))
        self.__dict__["_on"] = on


class HookClock(VirtualClock):
    """Virtual time that runs ``hook`` once, the moment time reaches ``hook_at``."""

    hook_at: float | None = None
    hook = None

    def sleep(self, seconds: float) -> None:
        end = self.now() + max(seconds, 0.0)
        if self.hook_at is not None and self.now() <= self.hook_at <= end:
            super().sleep(self.hook_at - self.now())
            hook, self.hook_at = self.hook, None
            hook()
        super().sleep(end - self.now())


def stop_from_a_client(service: Service) -> bool:
    """A client's stop on its own thread, as the socket's would come; its answer."""
    answer: list[bool] = []
    t = threading.Thread(target=lambda: answer.append(stop(service)))
    t.start()
    t.join(10)
    return answer[0]


def stop_after_pass_start(service, offset: float, now, later):
    """A client's stop ``offset`` s after ``pass_start`` (at once for 0), scheduled with
    ``later(delay, then)``: the times its answers came on ``now()``, and the event watcher."""
    answered: list[float] = []

    def at_stop() -> None:
        assert stop_from_a_client(service) is True
        answered.append(now())

    def watch(msg):
        if msg.get("event") == "pass_start" and not answered:
            if offset == 0:
                at_stop()
            else:
                later(offset, at_stop)
    return answered, watch


def on_a_timer(delay: float, then) -> None:
    threading.Timer(delay, then).start()


def race_sim(tmp_path, offset: float) -> None:
    clock = HookClock()
    device = Recording.for_cards(24, rng=random.Random(5), clock=clock)
    service = service_on(tmp_path, device)
    def later(delay, then):
        clock.hook_at, clock.hook = clock.now() + delay, then

    answered, watch = stop_after_pass_start(service, offset, clock.now, later)
    try:
        answer = job(service, "hand", watch, passes=2)
        assert answered, "the stop never came"
        assert not [t for t, _, on in device.motor_log if on and t > answered[0]]
        assert answer["result"]["hand"]["pass_reports"][-1]["fault"]["kind"] == "stopped"
    finally:
        device.close()


def race_gpio(tmp_path, offset: float) -> None:
    from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice

    rig = GpioRig.for_cards(24, rng=random.Random(5))
    device = RiggedGpioDevice(rig)
    service = service_on(tmp_path, device)
    answered, watch = stop_after_pass_start(
        service, offset, rig.clock.now,
        lambda delay, then: rig.clock.at(rig.clock.now() + delay, then))
    try:
        answer = job(service, "hand", watch, passes=2)
        assert answered, "the stop never came"
        motor = rig.pins["motor"]
        t, changes = motor._last_change, []
        for change in reversed(motor.states):
            changes.append((t, change.state))
            t -= change.timestamp
        assert not [(t, s) for t, s in changes if s and t > answered[0]]
        assert answer["result"]["hand"]["pass_reports"][-1]["fault"]["kind"] == "stopped"
    finally:
        device.close()


def race_serial(tmp_path, offset: float) -> None:
    from firmware_bridge.device import SerialDevice
    from hardware_sim.virtual_mcu import VirtualMCU
    from shuffler.device.clock import ScaledClock

    sim = Recording.for_cards(24, rng=random.Random(5), clock=ScaledClock(50))
    mcu = VirtualMCU(sim, seed=5)
    device = SerialDevice(mcu.path)
    service = service_on(tmp_path, device)
    answered, watch = stop_after_pass_start(service, offset, time.monotonic, on_a_timer)
    try:
        answer = job(service, "hand", watch, passes=2)
        time.sleep(offset + 0.2)
        assert answered, "the stop never came"
        assert not [h for _, h, on in sim.motor_log if on and h > answered[0]]
        state = [on for _, h, on in sim.motor_log if h <= answered[0] + SERIAL_LATENCY]
        assert not state or not state[-1]  # off by the answer
        reports = answer["result"]["hand"]["pass_reports"]
        assert reports[-1]["fault"]["kind"] == "stopped"
    finally:
        device.close()
        mcu.close()


def race_avr(tmp_path, offset: float) -> None:
    """The real firmware in simavr: its motor line, logged by the host's clock."""
    import os

    from hardware_sim.motor_log import MOTOR_LOG_ENV
    from hardware_sim.sim_avr import SimAvr, serial_on

    log = tmp_path / "motor.log"
    tmp_path.mkdir(parents=True, exist_ok=True)
    os.environ[MOTOR_LOG_ENV] = str(log)
    try:
        chip = SimAvr("--cards=24", "--card-rate=50", "--spinup=0.01", "--seed=5")
    finally:
        del os.environ[MOTOR_LOG_ENV]
    device = serial_on(chip)
    service = service_on(tmp_path, device)
    answered, watch = stop_after_pass_start(service, offset, time.monotonic, on_a_timer)
    try:
        job(service, "hand", watch, passes=2)
        time.sleep(offset + 0.2)
    finally:
        device.close()
    assert answered, "the stop never came"
    rows = [r.split() for r in log.read_text().splitlines()] if log.exists() else []
    # a line logged within 5 ms after the answer may have left the chip before it
    assert not [t for t, s in rows if s == "on" and float(t) > answered[0] + 0.005]
    state = [s for t, s in rows if float(t) <= answered[0] + SERIAL_LATENCY]
    assert not state or state[-1] == "off", (answered, rows)  # off by the answer


#: a stop's answer on serial comes once the MCU acknowledged the STOP; its motor line
#: reaches the log this much later at most (the harness's pipe, a loaded machine)
SERIAL_LATENCY = 0.05

RACES = {"sim": race_sim, "gpio": race_gpio, "serial": race_serial, "sim-avr": race_avr}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sim", "gpio", "serial", "sim-avr"])
def test_a_stop_at_any_moment_after_pass_start_keeps_the_motor_off_after_its_answer(
        tmp_path, backend):
    """Offsets of 0 to 50 ms after ``pass_start`` (virtual time on sim and gpio, where
    each moment is exact; real time on serial), many times each; a stop at 0 is the one
    right after the socket accepted the pass (before it started)."""
    if backend == "sim-avr":
        from tests.test_touch_told import avr_missing

        if why := avr_missing():
            pytest.skip(why)
    tries = 3 if backend in ("serial", "sim-avr") else 10
    for offset_ms in OFFSETS_MS:
        for k in range(tries):
            RACES[backend](tmp_path / f"{offset_ms}-{k}", offset_ms / 1000)


def test_the_page_stop_is_the_same_stop(tmp_path):
    device = SimDevice.for_cards(24, rng=random.Random(5), clock=VirtualClock())
    service = service_on(tmp_path, device)
    answers: list[dict] = []
    try:
        assert service.faces.act("stop", {})["result"] == {"stopped": False}

        def watch(msg):
            if msg.get("event") == "pass_start" and not answers:
                answers.append(service.faces.act("stop", {}))
        answer = job(service, "hand", watch, passes=3)
        assert answers[0]["ok"] and answers[0]["result"] == {"stopped": True}
        reports = answer["result"]["hand"]["pass_reports"]
        assert [r["counted"] for r in reports] == [0] and not answer["result"]["hand"]["completed"]
    finally:
        device.close()
