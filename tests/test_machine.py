"""One dispatcher (shuffler/service/machine.py): adding a command is one declaration plus
its handler. A toy command declared here, and nowhere else, is run on the socket and by
the CLI in-process, is in the request schema's enum, and every face its declaration does
not list refuses it: the socket, the CLI, the page (over HTTP) and MQTT's commands."""

from __future__ import annotations

import dataclasses
import http.client
import json
import random
import threading

import click
import pytest

from hardware_sim import SimDevice
from shuffler.config import Config
from shuffler.control.controller import PassController
from shuffler.control.events import CardCounted
from shuffler.control.reports import Stopped
from shuffler.control.session import Session
from shuffler.faces.router import Faces
from shuffler.faces.telemetry import parse_command
from shuffler.service import machine, request
from shuffler.service.client import ServiceClient, ServiceError
from shuffler.service.loop import Service
from shuffler.service.machine import CLI, COMMANDS, FACES, MQTT, PAGE, SOCKET, Command
from shuffler.store.state import StateStore
from tests.cli import invoke
from tests.mqtt_broker import free_port
from tests.waiting import wait_for


def toy_handler(m: machine.Machine, req: dict, emit) -> Stopped:
    """The toy's handler: tells one card, and answers with the device it ran on."""
    emit(CardCounted(1, 1))
    return Stopped(m.session.device.info.kind == "sim")


def declare_toy(faces: frozenset[str]) -> Command:
    # its result has the shape of stop's (the client checks it against that schema)
    return machine.declare(Command("toy", toy_handler, faces, result="stop", claimed=True))


@pytest.fixture
def toy():
    """Declares the toy (listed for the faces the test gives), and takes it away."""
    yield declare_toy
    COMMANDS.pop("toy", None)


@click.command("toy")
@click.pass_obj
def toy_cli(app) -> None:
    """The CLI's side of the toy: App.ask, as `shuffler clear` asks."""
    result = app.ask("toy", lambda m: click.echo(json.dumps(m)))
    click.echo(json.dumps(result))


def session_on(folder, config: Config) -> Session:
    """A session on the simulator, its state in ``folder``."""
    device = SimDevice.for_cards(24, rng=random.Random(5))
    return Session(PassController(device, StateStore(folder), config.battery,
                                  config.hand.passes), config, random.Random(1))


@pytest.fixture
def served(tmp_path):
    """An in-process service on the simulator with its page on loopback."""
    config = Config()
    config = dataclasses.replace(config, web=dataclasses.replace(
        config.web, enabled=True, port=free_port()))
    session = session_on(tmp_path / "svc", config)
    service = Service(session, tmp_path / "s.sock", faces=Faces)
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    wait_for(lambda: ServiceClient.connect(service.socket_path) is not None, timeout=20)
    yield service
    service.stopping.set()
    thread.join(10)
    session.device.close()


def over_socket(service: Service) -> dict:
    client = ServiceClient.connect(service.socket_path)
    assert client is not None
    events: list[dict] = []
    try:
        result = client.request("toy", events.append)
    finally:
        client.close()
    assert events == [{"event": "card", "counted": 1, "expected": 1}]
    return result


def from_the_page(service: Service) -> tuple[int, dict]:
    return from_the_page_action(service, "toy")


def from_the_page_action(service: Service, action: str) -> tuple[int, dict]:
    """POST /api/ACTION from the page on loopback: the status and the JSON answer."""
    host, port = service.faces.web.address
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("POST", f"/api/{action}", b"{}", {"Content-Type": "application/json",
                                             "Origin": f"http://{host}:{port}"})
    r = conn.getresponse()
    body = json.loads(r.read())
    conn.close()
    return r.status, body


def from_the_cli(tmp_path) -> tuple[int, list[str], str]:
    """The exit code, stdout's lines and stderr of `shuffler toy` (no service)."""
    from shuffler_cli.main import cli

    cli.add_command(toy_cli)
    try:
        result = invoke(tmp_path, "toy")
    finally:
        cli.commands.pop("toy", None)
    return result.exit_code, result.stdout.splitlines(), result.stderr


def test_a_toy_command_declared_once_is_on_the_socket_the_cli_and_in_the_schema(
        toy, served, tmp_path):
    assert "toy" not in request.schema()["properties"]["cmd"]["enum"]
    toy(frozenset({SOCKET, CLI}))
    assert request.schema()["properties"]["cmd"]["enum"][-1] == "toy"
    assert request.check({"cmd": "toy"})["cmd"] == "toy"

    assert over_socket(served) == {"stopped": True}

    code, lines, said = from_the_cli(tmp_path)
    assert code == 0, said
    assert [json.loads(line) for line in lines] == [
        {"event": "card", "counted": 1, "expected": 1}, {"stopped": True}]

    # not listed for the page: the page has no such action, and the service refuses the
    # page's request for it even past the page's own gate
    status, body = from_the_page(served)
    assert status == 404 and body["error"]["kind"] == "not_found"
    refused = served.submit({"cmd": "toy"}, PAGE)
    assert not refused["ok"] and refused["error"]["kind"] == "bad_request"
    assert "not a command the page may send" in refused["error"]["message"]
    # nor for MQTT: a remote command is refused before it reaches the service
    with pytest.raises(ValueError, match="cmd: expected one of clear, new_game, got 'toy'"):
        parse_command(b'{"cmd": "toy"}')
    assert not served.submit({"cmd": "toy"}, MQTT)["ok"]


@pytest.mark.parametrize("left_out", FACES)
def test_every_face_a_command_does_not_list_refuses_it(toy, served, tmp_path, left_out):
    toy(frozenset(FACES) - {left_out})
    refusals = {}
    try:
        refusals[SOCKET] = over_socket(served) != {"stopped": True}
    except ServiceError as e:
        refusals[SOCKET] = e.kind == "bad_request" and "socket may" in str(e)
    code, _, said = from_the_cli(tmp_path)
    refusals[CLI] = code == 2 and "not a command the cli may send" in said
    status, body = from_the_page(served)
    # a page that may send it reaches the service, which runs it (claimed, then answered)
    refusals[PAGE] = status == 404 or not body["ok"]
    try:
        command = parse_command(b'{"cmd": "toy"}')
    except ValueError:
        refusals[MQTT] = True
    else:
        refusals[MQTT] = not served.faces.remote_command(command)["ok"]
    assert refusals == {face: face == left_out for face in FACES}


def test_every_commands_result_is_frozen_and_keeps_its_schema(tmp_path):
    """What the dispatcher returns, for every command declared: a frozen Result whose
    JSON (made at the edge) is what its schema in shuffler/schemas says."""
    from shuffler.schemas import names, validate
    from shuffler.service.results import Result

    assert {c.schema for c in COMMANDS.values()} <= set(names())
    m = machine.Machine(session_on(tmp_path / "state", Config()))
    requests = [{"cmd": "status"}, {"cmd": "battery", "cards": 32}, {"cmd": "pass"},
                {"cmd": "hand", "passes": 2}, {"cmd": "clear"}, {"cmd": "stop"},
                {"cmd": "score", "makers": 0, "tricks": 5}, {"cmd": "score"},
                {"cmd": "undo"}, {"cmd": "redo"}, {"cmd": "new_game", "target": 11}]
    assert {r["cmd"] for r in requests} == set(COMMANDS)
    try:
        for req in requests:
            result = m.run(request.check(req))
            assert isinstance(result, Result) and result.schema == COMMANDS[req["cmd"]].schema
            validate(result.to_json(), result.schema)
            with pytest.raises(TypeError):
                result.body["exit"] = 9  # type: ignore[index]
            with pytest.raises(dataclasses.FrozenInstanceError):
                result.schema = "x"  # type: ignore[misc]
            assert json.loads(json.dumps(result.to_json())) == result.to_json()
    finally:
        m.session.device.close()


def test_the_page_cannot_run_a_pass_or_a_hand_past_the_dealers_touch(served):
    """The page's Start pass is a touch, decided by the touch policy: a page (or anything
    speaking as one) that asks the service for a pass or a hand itself is refused, over
    HTTP and past it, and the motor never turns."""
    device = served.session.device
    for cmd in ("pass", "hand", "status", "battery"):
        reply = served.submit({"cmd": cmd}, PAGE)
        assert not reply["ok"] and reply["error"]["kind"] == "bad_request", reply
        assert f"{cmd!r} is not a command the page may send" in reply["error"]["message"]
        if cmd != "pass":  # the page's own pass is the touch (test_page_start.py)
            status, body = from_the_page_action(served, cmd)
            assert (status, body["error"]["kind"]) == (404, "not_found"), body
    assert served.session.controller.store.load().passes == 0
    assert not device.mechanism.piles[0] and not device.mechanism.piles[1]
    # nor over MQTT, where only a clear and a new game come from across the room
    for cmd in ("pass", "hand", "stop", "score", "undo"):
        with pytest.raises(ValueError, match="cmd: expected one of clear, new_game"):
            parse_command(json.dumps({"cmd": cmd}).encode())


def test_a_handler_that_breaks_is_internal_and_the_service_goes_on(tmp_path):
    """A bug in a handler (no ShufflerError): its client hears ``internal`` with the
    error's words (exit 1), the motor is told to stop, and the next request is answered."""
    def broken(m: machine.Machine, req: dict, emit) -> Stopped:
        raise ZeroDivisionError("a bug in the handler")

    machine.declare(Command("toy", broken, frozenset({SOCKET}), result="stop", claimed=True))
    session = session_on(tmp_path / "svc", Config())
    stops: list[bool] = []
    stop = session.device.stop
    session.device.stop = lambda: (stops.append(True), stop())[1]  # type: ignore[method-assign]
    service = Service(session, tmp_path / "s.sock")
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: ServiceClient.connect(service.socket_path) is not None, timeout=20)
        client = ServiceClient.connect(service.socket_path)
        assert client is not None
        with pytest.raises(ServiceError) as caught:
            client.request("toy")
        assert (caught.value.kind, caught.value.exit_code) == ("internal", 1)
        assert str(caught.value) == "a bug in the handler" and stops
        assert client.request("status")["device"]["kind"] == "sim"  # it goes on
        client.close()
    finally:
        COMMANDS.pop("toy", None)
        service.stopping.set()
        thread.join(10)
        session.device.close()
