"""The protocol declared once: the C header and the document follow the declarations,
and every payload is validated before anyone uses it."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import re
from pathlib import Path

import pytest

from firmware_bridge import gen_header
from firmware_bridge.messages import (
    FAULT_KIND,
    MESSAGES,
    Card,
    Config,
    FaultCode,
    Msg,
    Pass,
    PassDone,
    PayloadError,
    StatusReply,
    decode_payload,
    wire_fields,
)
from shuffler.device.contract import FaultKind

ROOT = Path(__file__).resolve().parent.parent


def test_the_committed_c_header_is_the_generated_one():
    committed = (ROOT / "firmware" / "protocol_gen.h").read_text()
    assert committed == gen_header.header(), (
        "run: python -m firmware_bridge.gen_header > firmware/protocol_gen.h")


def test_the_documents_tables_are_the_generated_ones():
    doc = (ROOT / "docs" / "protocol.md").read_text()
    found = re.search(r"<!-- generated: .*? -->\n(.*?)<!-- end generated -->", doc, re.S)
    assert found, "docs/protocol.md lost its generated markers"
    assert found.group(1) == gen_header.markdown(), (
        "paste `python -m firmware_bridge.gen_header --markdown` into docs/protocol.md")


def test_every_message_type_is_declared_and_every_stop_reason_is_a_fault_kind():
    assert set(MESSAGES) == set(Msg)
    kinds = {k.value for k in FaultKind}
    for code, kind in FAULT_KIND.items():
        assert code.name == kind.upper()  # one name for one thing
    assert set(FAULT_KIND.values()) <= kinds
    stops = {"jam", "misfeed", "low_battery", "link_lost", "timeout", "mcu_restarted",
             "stopped"}
    assert stops <= set(FAULT_KIND.values())


def _sample(cls):
    """A valid message of every type, to break field by field."""
    return {
        Pass: Pass(9, 10, (1, 0) * 5),
        Card: Card(9, 3, 1, 2),
        PassDone: PassDone(9, 3, 1, 2, 1500, 7000, True, 0, FaultCode.JAM, 4),
        Config: Config(500, 1000, 2, 300, 90_000, 60, 200, 2000, 5600, 100, 0),
        StatusReply: StatusReply(False, True, False, FaultCode.NONE, 0, True, 0),
    }.get(cls)


@pytest.mark.parametrize("cls", [c for c in MESSAGES.values() if _sample(c)],
                         ids=lambda c: c.TYPE.name)
def test_a_valid_payload_round_trips_and_every_cut_or_extension_is_refused(cls):
    msg = _sample(cls)
    payload = msg.pack()
    assert decode_payload(cls.TYPE, payload) == msg
    later = {n: w for n, w in wire_fields(cls) if w.since}  # fields a newer minor added
    older = {cls.fixed_size(w.since - 1) for w in later.values()}
    for cut in range(len(payload)):
        if cut in older:  # an older peer's payload: what it does not know reads as absent
            absent = dataclasses.replace(msg, **{n: w.absent for n, w in later.items()})
            assert decode_payload(cls.TYPE, payload[:cut]) == absent
            continue
        with pytest.raises(PayloadError):
            decode_payload(cls.TYPE, payload[:cut])
    with pytest.raises(PayloadError):
        decode_payload(cls.TYPE, payload + b"\x00")


@pytest.mark.parametrize("kind, payload, why", [
    (Msg.PASS, bytes.fromhex("0000 0002 01"), "pass_id = 0"),
    (Msg.PASS, bytes.fromhex("0001 0000"), "cards = 0"),
    (Msg.PASS, bytes.fromhex("0001 0003 f0"), "beyond card 3"),
    (Msg.PASS_DONE, PassDone(1, 3, 1, 2, 0, 0, False, 0, FaultCode.NONE, 0).pack()[:-5]
     + bytes([0, 0, 99, 0, 0]), "not a FaultCode"),
    (Msg.PASS_DONE, PassDone(1, 3, 1, 2, 0, 0, False, 0, FaultCode.NONE, 0).pack()
     .replace(b"\x00\x02", b"\x00\x05", 1), "is not counted"),
    (Msg.STATUS_REPLY, bytes([2, 0, 0, 0, 0, 0, 1, 0, 0]), "motor_on = 2"),
    (Msg.CONFIG, Config(500, 1000, 2, 300, 90_000, 200, 200, 2000, 5600, 100, 0).pack(),
     "the diverter needs 200 ms"),
    (0x7E, b"", "unknown message type"),
])
def test_a_payload_that_breaks_its_declaration_is_refused_with_the_reason(kind, payload, why):
    with pytest.raises(PayloadError, match=why):
        decode_payload(kind, payload)


def test_random_payloads_never_raise_anything_but_a_payload_error():
    rng = random.Random(17)
    for _ in range(20_000):
        kind = rng.choice(list(Msg))
        payload = bytes(rng.randrange(256) for _ in range(rng.randrange(30)))
        with contextlib.suppress(PayloadError):  # the one error it may raise
            decode_payload(kind, payload)
