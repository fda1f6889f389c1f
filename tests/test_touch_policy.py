"""The dealer's input policy (shuffler/control/touch.py): one room decides what a touch
and a long press mean, on the device's clock, from the press edge."""

from __future__ import annotations

import ast
import math
import pathlib

import pytest

from shuffler.control.touch import (
    BEFORE_FAULT,
    HELD,
    NOTHING_TO_CLEAR,
    RESTACK_LOCKOUT,
    RESTACKING,
    TOUCH_WAIT_S,
    TRAY_EMPTY,
    Clear,
    Machine,
    Start,
    TouchPolicy,
    Wait,
)
from shuffler.device.contract import EventKind, InputEvent
from shuffler.service.events import TouchIgnored

ROOT = pathlib.Path(__file__).resolve().parents[1]


def touch(at: float) -> InputEvent:
    return InputEvent(EventKind.TOUCH, at)


def ended_at(at: float) -> TouchPolicy:
    policy = TouchPolicy()
    policy.pass_ended(at)
    return policy


@pytest.mark.parametrize("after", [-1.0, 0.0, 0.30, 0.40, 0.49])
def test_a_touch_pressed_inside_the_lockout_is_the_dealer_restacking(after):
    assert ended_at(10.0).decide(touch(10.0 + after), Machine()) is RESTACKING


@pytest.mark.parametrize("after", [RESTACK_LOCKOUT, 0.51, 30.0])
def test_a_touch_pressed_after_the_lockout_starts_the_pass(after):
    assert ended_at(10.0).decide(touch(10.0 + after), Machine()) == Start()


def test_before_any_pass_a_touch_starts_and_the_lockout_never_moves_back():
    policy = TouchPolicy()
    assert policy.ended == -math.inf and policy.decide(touch(0.0), Machine()) == Start()
    policy.pass_ended(20.0)
    policy.pass_ended(5.0)  # an earlier reading (the hand's, then the service's) never wins
    assert policy.decide(touch(20.3), Machine()) is RESTACKING


def test_an_empty_tray_and_a_busy_machine_are_told_after_the_lockout():
    policy = ended_at(0.0)
    assert policy.decide(touch(0.2), Machine(tray_loaded=False)) is RESTACKING
    assert policy.decide(touch(1.0), Machine(tray_loaded=False)) is TRAY_EMPTY
    assert policy.decide(touch(1.0), Machine(busy=True)) == Wait()
    assert policy.decide(touch(1.0), Machine(busy=True, waited=TOUCH_WAIT_S + 0.1)) is HELD


def test_a_long_press_clears_only_a_fault_that_came_before_the_press():
    policy = ended_at(10.0)
    press = InputEvent(EventKind.LONG_PRESS, 9.0)
    assert policy.decide(press, Machine(latched=False)) is NOTHING_TO_CLEAR
    assert policy.decide(press, Machine(latched=True)) is BEFORE_FAULT
    assert policy.decide(InputEvent(EventKind.LONG_PRESS, 10.2),
                         Machine(latched=True)) == Clear()


def test_every_refusal_is_a_sentence_said_once():
    from shuffler.control import touch as policy

    whys = [r.why for r in vars(policy).values() if isinstance(r, policy.Ignore)]
    assert len(whys) >= 10 and len(set(whys)) == len(whys) and all(w.strip() for w in whys)
    for path in [*ROOT.joinpath("shuffler").rglob("*.py")]:
        if path.name == "touch.py":
            continue
        text = path.read_text()
        for why in whys:
            assert why[:40] not in text, f"{path}: a touch refusal written a second time"


#: probes left for their owners to replace (each named: a new one fails the test)
KNOWN_PROBES = {"cli/selftest.py: getattr(device, 'rig', None)"}


def _device_probes(path: pathlib.Path) -> list[str]:
    """``getattr(<something ending in device>, ...)`` calls in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "hasattr") and node.args:
            target = ast.unparse(node.args[0])
            if target.split(".")[-1] in ("device", "dev", "_device"):
                found.append(f"{path.relative_to(ROOT)}: {ast.unparse(node)}")
    return found


def test_nothing_probes_the_device_for_what_the_contract_says():
    """The device's clock is ShufflerDevice.now(), its idle wait ShufflerDevice.idle():
    no getattr(device, ...) probe finds them (or anything else) behind the contract."""
    folders = ("shuffler", "cli", "hardware-sim", "firmware_bridge")
    probes = {p for f in folders for path in ROOT.joinpath(f).rglob("*.py")
              for p in _device_probes(path)}
    assert probes <= KNOWN_PROBES


def test_the_probe_finder_finds_a_probe(tmp_path):
    sample = ROOT / "tests" / "_probe_sample.py"
    sample.write_text("clock = getattr(self.session.device, 'clock', None)\n")
    try:
        assert len(_device_probes(sample)) == 1
    finally:
        sample.unlink()


def test_every_backend_tells_its_time():
    from firmware_bridge.device import SerialDevice
    from hardware_sim import SimDevice
    from shuffler.device.contract import ShufflerDevice
    from shuffler.gpio.device import GpioDevice

    assert "now" in ShufflerDevice.__abstractmethods__
    for cls in (SimDevice, GpioDevice, SerialDevice):
        assert "now" not in cls.__abstractmethods__ and cls.now is not ShufflerDevice.now


# -- on the pins: the lock-out runs from the press edge -----------------------------------

def test_a_touch_pressed_inside_the_lockout_and_settled_after_it_starts_nothing(tmp_path):
    """Pressed 0.35 s after the pass (device time) and counted on its release 0.3 s
    later: inside the lock-out, though it settles after it. One pressed at 0.6 s starts
    the hand."""
    from .test_gestures import rigged
    from .test_watchdog import run

    rig, device, service = rigged(tmp_path)
    seen: list = []
    service.subscribe(seen.append)
    try:
        assert run(service, "pass")["ok"]
        rig.mechanism.gather()  # the dealer puts the pack back at once
        rig.clock.sleep(0.35)
        rig.touch(0.08)
        rig.clock.sleep(1.0)  # released and settled: a touch, stamped at its press
        service._idle()
        assert [e.why for e in seen if isinstance(e, TouchIgnored)] == [RESTACKING.why]
        assert service.session.controller.store.load().passes == 1
    finally:
        device.close()


def test_a_touch_pressed_after_the_lockout_starts_the_hand_on_the_pins(tmp_path):
    from .test_gestures import rigged
    from .test_watchdog import run

    rig, device, service = rigged(tmp_path)
    try:
        assert run(service, "pass")["ok"]
        rig.mechanism.gather()
        rig._sensors()  # the tray sensor sees the pack
        rig.clock.sleep(0.6)
        rig.touch(0.08)
        rig.clock.sleep(1.0)
        service._idle()
        assert service.session.controller.store.load().passes > 1  # the hand's passes ran
    finally:
        device.close()


# -- the simulator's clock moves while the machine stands idle (issue 33) ------------------

@pytest.mark.parametrize("speed", [1, 3, 20])
def test_an_idle_simulators_clock_moves_at_its_speed(speed):
    import time

    from hardware_sim import SimDevice
    from shuffler.device.clock import ScaledClock

    device = SimDevice.for_cards(24, clock=ScaledClock(speed))
    before, physics = device.now(), device.clock.now()
    time.sleep(0.1)
    moved = device.now() - before
    assert 0.1 * speed <= moved < 0.1 * speed + 1.0  # (the host's slack, at most)
    assert device.clock.now() == physics  # the physics (the battery's rest) keeps its own


@pytest.mark.parametrize("speed", [100, 300, 2000])
def test_after_a_jam_the_pages_touch_starts_the_hand_on_the_simulator(tmp_path, speed):
    """The page's Start pass (Service.touch) after a cleared jam: on a paced simulator
    the touch is stamped in device time, which moved while the machine stood."""
    import random
    import time

    from hardware_sim import SimDevice, parse_fault_specs
    from shuffler.config import Config
    from shuffler.control.controller import PassController
    from shuffler.control.session import Session
    from shuffler.device.clock import ScaledClock
    from shuffler.service.loop import Service
    from shuffler.store.state import StateStore

    from .test_watchdog import run

    device = SimDevice.for_cards(24, faults=parse_fault_specs(["jam:5"]),
                                 rng=random.Random(3), clock=ScaledClock(speed))
    session = Session(PassController(device, StateStore(tmp_path)), Config(),
                      random.Random(1))
    service = Service(session, tmp_path / "s.sock")
    seen: list = []
    service.subscribe(seen.append)
    try:
        assert run(service, "pass")["result"]["pass"]["fault"]["kind"] == "jam"
        assert run(service, "clear")["ok"]
        device.mechanism.faults = parse_fault_specs([])
        time.sleep(RESTACK_LOCKOUT / speed + 0.05)  # the dealer frees the throat
        service.touch()
        service._idle()
        told = [e.why for e in seen if isinstance(e, TouchIgnored)]
        assert told == [] and service.session.controller.store.load().passes > 1
    finally:
        device.close()


def test_the_pins_touch_and_the_pages_reach_a_pass_through_the_one_policy():
    """Read from the import graph: the service's loop (the pin's touch between hands and
    the page's Service.touch) and the hand (between passes) import the policy; the page
    no longer reaches the device to fake a touch."""
    import grimp

    graph = grimp.build_graph("shuffler")
    for decider in ("shuffler.service.loop", "shuffler.control.hand"):
        assert "shuffler.control.touch" in graph.find_modules_directly_imported_by(decider)
    assert not graph.find_modules_directly_imported_by("shuffler.faces.router") & {
        "shuffler.device.contract", "shuffler.device"}
