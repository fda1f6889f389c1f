"""Output that cannot be written ends the command cleanly, never with a traceback.

stdout on a full disk (``>/dev/full``), a closed descriptor (``>&-``), a pipe whose
reader left (``| head``), stderr likewise: every write to them goes through a
:class:`Guarded` stream that swallows the error and remembers it, so the command
finishes what it was doing (the motor stops, the state is written) and exits with:

- its own code if it failed (a jam with stderr on ``/dev/full`` is still exit 3);
- else 0 when the reader of stdout went away (``| head`` took what it wanted);
- else 2 when stdout could not take the output (``EXIT_OUTPUT``: the report is lost).

A lost stderr alone changes nothing: the exit code still says what happened.
"""

from __future__ import annotations

import errno
import io
import os
import sys

from shuffler.constants import EXIT_OUTPUT  # the report could not be written to stdout

TYPE_CHECKING = False  # not ``typing``'s: the fast stop (cli/quickstop.py) loads this module
if TYPE_CHECKING:
    from typing import Any, TextIO



class Guarded:
    """A text stream whose write and flush errors are remembered, not raised."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self.lost: OSError | None = None

    def write(self, text: str) -> int:
        written = self._try(self._inner.write, text)
        return len(text) if written is None else written

    def flush(self) -> None:
        self._try(self._inner.flush)

    def _try(self, call: Any, *args: Any) -> Any:
        """``call(*args)``, or None once the stream is lost (its error kept)."""
        if self.lost is None:
            try:
                return call(*args)
            except OSError as e:
                self.lost = e
            except ValueError:  # closed
                self.lost = OSError(errno.EBADF, "the stream is closed")
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def guard() -> tuple[Guarded, Guarded]:
    """Put guarded streams in place of sys.stdout and sys.stderr (None when closed). A
    closed descriptor 0, 1 or 2 gets /dev/null, so no file the program opens later
    takes its number (and its output)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
    out = Guarded(sys.stdout if sys.stdout is not None else io.StringIO())
    err = Guarded(sys.stderr if sys.stderr is not None else io.StringIO())
    if sys.stdout is None:
        out.lost = OSError(errno.EBADF, "stdout is closed")
    sys.stdout, sys.stderr = out, err
    return out, err


def finish(code: int, out: Guarded, err: Guarded) -> None:
    """Exit with the command's code, given what became of its stdout (see the module
    notes); when a stream was lost, without the interpreter's own flush at exit (it would
    fail again and print a warning)."""
    if out.lost is not None and code == 0:
        code = 0 if out.lost.errno == errno.EPIPE else EXIT_OUTPUT
    out.flush()
    err.flush()
    if out.lost is not None and code == EXIT_OUTPUT and err.lost is None:
        err.write(f"shuffler: cannot write the output: {out.lost.strerror or out.lost}\n")
        err.flush()
    if out.lost is None and err.lost is None:
        sys.exit(code)
    os._exit(code)
