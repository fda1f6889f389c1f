"""What a command answers, frozen: the dispatcher's return (:class:`Result`), its body a
record (:mod:`shuffler.control.reports`, the score's :mod:`shuffler.control.scorebook`).
Nothing handed from the machine to a face can be changed by it under another face's
feet; JSON is made only at the edges (the socket, the CLI's output, the page, MQTT) with
:meth:`Result.to_json` or a record's ``to_json``.

    >>> from shuffler.control.reports import Stopped
    >>> r = Result("stop", Stopped(True))
    >>> r.to_json()
    {'stopped': True}
    >>> r.body.stopped = False
    Traceback (most recent call last):
    ...
    dataclasses.FrozenInstanceError: cannot assign to field 'stopped'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shuffler.core.record import Record


@dataclass(frozen=True, eq=True)
class Result:
    """One command's answer: the schema it keeps (``shuffler/schemas/<schema>.json``, the
    command's ``Command.schema``) and its record."""

    schema: str
    body: Record

    def to_json(self) -> dict[str, Any]:
        """The object as the socket sends it and ``--json`` prints it."""
        return self.body.to_json()
