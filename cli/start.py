"""The console script's entry. Its first statements make Ctrl-C during start-up a quiet
exit: ``_signal`` is built into the interpreter and ``os`` already loaded, so the
handler is in place before this module reads anything from disk (the window left is the
interpreter's own start-up, README "Signals"). Then every ending signal is quiet until
the command runs (:func:`shuffler.control.signals.quiet_until_ready`); a plain ``stop``
goes to the service at once (:mod:`.quickstop`, before click and the config load);
anything else is the command line (:func:`shuffler_cli.main.main`)."""

import _signal  # type: ignore[import-not-found]  # built in; signal.py wraps it (and loads enum)
import os as _os  # loaded by the interpreter itself


def _leave(signum: int, frame: object = None) -> None:
    _os.write(2, b"shuffler: interrupted while starting; nothing was started\n")
    _os._exit(128 + signum)


#: Ctrl-C is Python's (not ignored by a shell's `&`, nor another's): ours from here on
_TAKEN = _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
if _TAKEN:
    _signal.signal(_signal.SIGINT, _leave)

try:  # a Ctrl-C inside these lines themselves is quiet too
    from shuffler.control.signals import quiet_until_ready

    if _TAKEN:  # handed to the signal policy, which takes over only Python's own
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    quiet_until_ready()
except KeyboardInterrupt:
    _leave(_signal.SIGINT)


def main() -> None:
    import sys

    if "stop" in sys.argv[1:]:
        from .quickstop import run as stop

        stop(sys.argv[1:])
    from .main import main as run

    run()
