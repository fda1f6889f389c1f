"""A socket request is declared once (shuffler/service/request.py): the published schema is
what the declaration renders, and the schema and the service's check accept exactly
the same requests, the cases they once disagreed on first."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from shuffler.schemas import load
from shuffler.service import request
from shuffler.service.protocol import parse_request
from shuffler.service.request import RequestError

SCHEMA = Draft202012Validator(load("request"))


def accepted_by_check(req: object) -> bool:
    try:
        request.check(req)
    except RequestError:
        return False
    return True


def test_the_published_schema_is_the_declaration():
    assert request.SCHEMA_FILE.read_text() == request.render(), (
        "shuffler/schemas/request.json is stale: run python -m shuffler.service.request")


@pytest.mark.parametrize("req, ok", [
    ({"cmd": "score", "makers": 1}, False),           # makers without tricks
    ({"cmd": "score", "tricks": 3}, False),           # tricks without makers
    ({"cmd": "score", "hand": 2, "delete": True, "makers": 0, "tricks": 1}, True),
    ({"cmd": "score", "delete": True}, False),        # a delete that names no hand
    ({"cmd": "score", "version": 10**9 + 1}, False),  # beyond any version
    ({"cmd": "new_game", "first_dealer": ""}, False),  # an empty seat
    ({"cmd": "new_game", "first_dealer": "N" * 65}, False),
    ({"cmd": "pass", "alone": None}, True),           # null is the default, everywhere
    ({"cmd": "pass", "cards": 24.0}, True),           # JSON Schema's integer
    ({"cmd": "pass", "cards": 24.5}, False),
    ({"cmd": "pass", "cards": True}, False),
    ({"cmd": "pass", "colour": "red"}, False),        # no such field
    ({"cmd": "hand", "makers": 1}, True),             # the pairing rule is the score's
])
def test_the_schema_and_the_check_agree(req, ok):
    assert SCHEMA.is_valid(req) is ok
    assert accepted_by_check(req) is ok
    if ok:
        assert parse_request(json.dumps(req).encode())["cmd"] == req["cmd"]


def test_an_error_names_the_field_and_what_it_takes():
    with pytest.raises(RequestError, match=r"cards: expected a whole number from 1 to 104, "
                                           r"got 0"):
        request.check({"cmd": "pass", "cards": 0})
    with pytest.raises(RequestError, match="colour: not a field of a request"):
        request.check({"cmd": "pass", "colour": "red"})


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 110),
                   st.sampled_from([10**9, 10**9 + 1, 2.0, 2.5, "", "North", "planned",
                                    "coin", "x" * 65, ["A", "B"], ["A"], ["", "B"], {}]))
FIELDS = [f.name for f in request.FIELDS] + ["extra"]


@settings(max_examples=400, deadline=None)
@given(cmd=st.sampled_from([*request.COMMANDS, "nope", None]),
       fields=st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=5))
def test_the_schema_and_the_check_accept_the_same_requests(cmd, fields):
    req = {**fields, "cmd": cmd} if cmd is not None else fields
    assert SCHEMA.is_valid(req) is accepted_by_check(req), req


def test_the_pages_action_is_the_command_whatever_its_body_says():
    from types import SimpleNamespace

    from shuffler.faces.router import Faces

    sent = []
    faces = SimpleNamespace(service=SimpleNamespace(
        submit=lambda r, face: sent.append((r, face)) or {}))
    Faces.act(faces, "clear", {"cmd": "hand", "passes": 30})  # type: ignore[arg-type]
    assert sent == [({"cmd": "clear", "passes": 30}, "page")]


def test_one_table_says_what_each_command_is():
    """The loop, the client's rule, the faces' lists and the schema's enum come from
    machine.COMMANDS: no second list of the same traits anywhere."""
    from shuffler.faces import router, telemetry, web
    from shuffler.service import client, loop, machine, request

    assert request.schema()["properties"]["cmd"]["enum"] == list(machine.COMMANDS)
    assert {n for n, c in machine.COMMANDS.items() if c.moves} <= {
        n for n, c in machine.COMMANDS.items() if c.claimed}
    for module, names in ((loop, ("CLAIMED", "MOVING", "SCORE_COMMANDS", "TRAITS")),
                          (request, ("TRAITS", "Command")), (client, ("RESULT_SCHEMAS",)),
                          (web, ("ACTIONS",)), (router, ("PAGE_ACTIONS", "VERSIONED")),
                          (telemetry, ("REMOTE_COMMANDS",))):
        assert not [n for n in names if hasattr(module, n)], module
    assert machine.sent_by(machine.MQTT) == ("clear", "new_game")
    assert machine.sent_by(machine.PAGE) == ("clear", "stop", "score", "undo", "redo",
                                             "new_game")
