"""A served simulator never sticks (issue 46): after a lone ``shuffler pass`` the
simulated dealer puts the pack back in the tray, as after a hand, so the next hand, pass
and the page's Start pass all run (every one was refused "the tray is empty: put the 24
cards in the tray", which nobody can do on a simulator); and the page's headline says
what a touch starts (a hand of the configured passes, not "pass 1 of 1")."""

from __future__ import annotations

import http.client
import json
import random

import pytest

from hardware_sim import DealerHabit, SimDevice
from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.session import Session
from shuffler.device.clock import VirtualClock
from shuffler.device.contract import EventKind
from shuffler.device.registry import plan_source
from shuffler.store.state import StateStore

from .mqtt_broker import free_port
from .served import Service
from .waiting import wait_for


def http_json(port: int, method: str, path: str) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = b"{}" if method == "POST" else None
        conn.request(method, path, body, {"Content-Type": "application/json"})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def test_a_served_simulator_after_a_lone_pass_runs_a_hand_a_pass_and_the_pages_start(
        tmp_path):
    port = free_port()
    svc = Service(tmp_path, f"[web]\nenabled = true\nport = {port}\n\n[hand]\npasses = 2\n",
                  speed=20).start()
    try:
        client = svc.client()
        assert client.request("pass")["pass"]["counted"] == 24
        # the page: what a touch starts now is a hand of 2 passes, not "pass 1 of 1"
        panel = wait_for(lambda: (p := http_json(port, "GET", "/api/panel")[1])["phase"]
                         == "ready" and p, what="the page ready after the pass")
        assert panel["prompt"] == "Load the pack and touch to start pass 1 of 2"
        assert (panel["pass"]["number"], panel["pass"]["of"]) == (1, 2)
        hand = client.request("hand")["hand"]
        assert hand["completed"] and hand["passes_done"] == 2
        assert client.request("pass")["pass"]["counted"] == 24  # a lone pass again
        passes = client.request("status")["counters"]["passes"]
        assert passes == 4
        # the page's Start pass: a touch, which starts the configured hand
        answer = wait_for(lambda: (a := http_json(port, "POST", "/api/pass")[1])["ok"] and a,
                          timeout=60, what="the page's Start pass to start a pass")
        assert answer["result"]["started"]
        wait_for(lambda: client.request("status")["counters"]["hands"] == 2, timeout=120,
                 what="the hand the page started to finish")
        assert client.request("status")["counters"]["passes"] == passes + 2
        client.close()
    finally:
        svc.stop()
    assert "tray is empty" not in svc.log.read_text()


@pytest.mark.parametrize("habit", list(DealerHabit))
def test_after_a_lone_pass_the_sim_dealer_reloads_the_tray_whatever_its_habit(
        tmp_path, habit):
    device = SimDevice.for_cards(24, rng=random.Random(6), clock=VirtualClock(), habit=habit)
    session = Session(PassController(device, StateStore(tmp_path)), Config(),
                      plan_source(device, 1))
    try:
        device.drain_events()
        assert session.do_pass().pass_.fault is None
        assert device.health().tray_loaded and device.mechanism.piles == ([], [])
        assert [e.kind for e in device.drain_events()][-1] is EventKind.TRAY_LOADED
        assert session.do_pass().pass_.counted == 24  # not refused: the tray is full
    finally:
        device.close()


@pytest.mark.parametrize("habit", list(DealerHabit))
def test_after_a_lone_pass_the_rigs_dealer_reloads_the_tray_whatever_its_habit(
        tmp_path, habit):
    """The rig's dealer lifted the other pile first as its habit says and held it for a
    warning that never comes at the ready light: ``other`` and ``both`` never reloaded."""
    from hardware_sim.gpio_rig import GpioRig, RiggedGpioDevice

    rig = GpioRig.for_cards(24, rng=random.Random(2), habit=habit)
    device = RiggedGpioDevice(rig)
    session = Session(PassController(device, StateStore(tmp_path)), Config(),
                      plan_source(device, 1))
    try:
        assert session.do_pass().pass_.fault is None
        rig.clock.sleep(5.0)  # the dealer's lifts
        assert device.health().tray_loaded and len(rig.mechanism.tray) == 24
        assert session.do_pass().pass_.counted == 24
    finally:
        device.close()
