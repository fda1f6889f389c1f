"""The control socket's protocol (version 1): one JSON object per line each way.

::

    <- {"shuffler": "0.2.0", "protocol": 1, "device": "sim"}        greeting
    -> {"cmd": "status"} | {"cmd": "battery", "cards": 24}
       {"cmd": "pass", "cards": 24, "mode": "planned"}
       {"cmd": "hand", "passes": 5, "cards": 24, "mode": "coin"}
       {"cmd": "clear"} | {"cmd": "stop"}
       {"cmd": "score"} | {"cmd": "score", "makers": 0, "tricks": 5, "alone": true}
       {"cmd": "score", "version": 7, "makers": 1, "tricks": 3, "renege": 0, "hand": 2}
       {"cmd": "undo", "version": 8} | {"cmd": "redo", "version": 9}
       {"cmd": "new_game", "first_dealer": "East", "target": 11, "version": 10}
    <- {"event": "card", "counted": 3, "expected": 24}               while a pass runs
    <- {"ok": true, "result": {...}}  or  {"ok": false, "error": {"kind": "busy", ...}}

A line longer than :data:`MAX_LINE` bytes is ``too_long`` (then closed), nesting deeper
than :data:`MAX_DEPTH` is ``too_deep``; each request's fields are declared in
:mod:`shuffler.service.request`.
"""

from __future__ import annotations

import json
from typing import Any

from shuffler.errors import ShufflerError, error_kind
from shuffler.service.request import RequestError
from shuffler.service.request import check as check_request

MAX_LINE = 64 * 1024  # bytes in one request line
MAX_DEPTH = 4  # nesting of a request: a flat object is 1; deeper is never a request


def _depth(line: bytes) -> int:
    """The deepest nesting of brackets and braces outside strings, without parsing
    (the parser recurses: a deep enough line would exhaust the stack)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in line:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def parse_request(line: bytes) -> dict[str, Any]:
    """Check one request line; the error says what is wrong with it."""
    if _depth(line) > MAX_DEPTH:
        raise RequestError(f"nested deeper than {MAX_DEPTH} levels: a request is one flat "
                           "JSON object", "too_deep")
    try:
        req = json.loads(line)
    except (ValueError, UnicodeDecodeError) as e:
        if "integer string conversion" in str(e):  # Python's digit limit (4300)
            raise RequestError("a number with thousands of digits: no value a request "
                               "takes is that long") from None
        raise RequestError("not a JSON object: send one JSON object per line") from None
    return check_request(req)


def error_reply(error: ShufflerError, exit_code: int | None = None) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": error_kind(error), "message": str(error),
                                   "exit": error.exit_code if exit_code is None else exit_code}}
