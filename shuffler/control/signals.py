"""What each signal a terminal (or systemd) can send does to a running shuffler.

- SIGINT (Ctrl-C), SIGTERM (``kill``, systemd), SIGHUP (the SSH session dropped;
  left alone under ``nohup``), SIGQUIT (Ctrl-\\, no core dump), SIGUSR1, SIGUSR2: the
  motor goes off and the command exits 128 + N (130, 143, 129, 131, 138, 140); ``serve``
  exits 0, and takes SIGHUP as the daemon's reload (:mod:`shuffler.service.loop`).
- SIGTSTP (Ctrl-Z): the motor stops first (the pass ends ``stopped``, a hand with it),
  then the process suspends; ``fg`` goes on from there.
- SIGKILL and SIGSTOP run nothing: ``shuffler-safe`` (systemd's ``ExecStopPost=``) and
  the pull-downs are the backstop (docs/hardware.md).

An ending signal raises in the main thread (SystemExit, or KeyboardInterrupt for
SIGINT), so the pass unwinds through the ``finally`` that turns the motor off and the
process leaves with no traceback; the handler itself touches no pin (it may have
interrupted the main thread inside a pin write). A signal already ignored (``nohup``)
or handled by someone else is left alone. SIGTSTP stops every open device from a
thread (``stop()`` is safe from any thread), waits for it, then suspends the process
with SIGSTOP; the pass in progress ends ``stopped`` and a hand ends with it.

Before the command's code runs (while Python imports it) an ending signal exits at
once, quietly: nothing is open yet (:func:`quiet_until_ready`).
"""

from __future__ import annotations

import os
import signal

TYPE_CHECKING = False  # not ``typing``'s: this module loads first, and must load fast
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Handler = Callable[[int, Any], Any]

#: signals that end the process: the motor goes off on the way out
ENDINGS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1,
           signal.SIGUSR2)
#: the terminal's Ctrl-Z: motor off first, then suspended
SUSPEND = signal.SIGTSTP


def _untouched(sig: int) -> bool:
    """Nobody chose what ``sig`` does: the default action (or Python's Ctrl-C)."""
    return signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler)


def quiet_until_ready() -> None:
    """While the command is still importing: an ending signal exits at once with
    128 + N and one line, never an import's traceback. Nothing is open to stop yet."""
    def leave(signum: int, frame: Any) -> None:
        os.write(2, b"shuffler: interrupted while starting; nothing was started\n")
        os._exit(128 + signum)

    for sig in ENDINGS:
        if _untouched(sig):
            signal.signal(sig, leave)


#: the ending signal received, kept in case its exception was swallowed (below)
pending: int | None = None


def _leaving(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else SystemExit(128 + signum)


def ending(signum: int, frame: Any) -> None:
    """Unwind the main thread: KeyboardInterrupt for SIGINT, SystemExit(128 + N) else.

    Python swallows an exception raised where it cannot propagate (the handler ran
    inside a weakref callback or a ``__del__``, e.g. an import's module-lock callback:
    "Exception ignored in ..."). So the signal is also kept: :func:`leave_if_pending`
    raises it again at the next checkpoint (before the device opens, before each pass),
    and a timer stops every open device if the process is still here half a second on."""
    global pending
    if pending is None:
        pending = signum
        import sys
        import threading

        sys.unraisablehook = _quiet_if_ours(sys.unraisablehook)
        timer = threading.Timer(0.5, stop_every_device)
        timer.daemon = True
        timer.start()
    raise _leaving(signum)


def leave_if_pending() -> None:
    """A checkpoint: leave now if an ending signal came and its exception was lost."""
    if pending is not None:
        raise _leaving(pending)


def _quiet_if_ours(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """Say nothing of our own swallowed exit: the checkpoint raises it again."""
    def unraisable(info: Any) -> object:
        if isinstance(info.exc_value, (SystemExit, KeyboardInterrupt)) and pending is not None:
            return None
        return hook(info)

    return unraisable


def suspend_after(stop: Callable[[], object]) -> Handler:
    """A SIGTSTP handler: ``stop()`` on a thread of its own, then SIGSTOP to this process."""
    import threading

    def on_suspend(signum: int, frame: Any) -> None:
        def work() -> None:
            try:
                stop()
            finally:
                os.kill(os.getpid(), signal.SIGSTOP)

        threading.Thread(target=work, name="suspend", daemon=True).start()

    return on_suspend


def stop_every_device() -> None:
    """Motor off on every device this process opened (for SIGTSTP)."""
    import contextlib

    from shuffler.device.contract import open_devices

    for device in open_devices():
        with contextlib.suppress(Exception):  # closed or broken: no motor to stop
            device.stop()


def install(leaving: Handler = ending,
            stop: Callable[[], object] = stop_every_device) -> None:
    """Handle every terminal signal as the table above says, once the command runs:
    ``leaving`` for the endings, ``stop()`` then a suspension for SIGTSTP. A signal
    ignored (``nohup``) or handled elsewhere is left alone; one this module handled
    before (:func:`quiet_until_ready`) is taken over."""
    for sig in ENDINGS:
        if _untouched(sig) or _is_ours(sig):
            signal.signal(sig, leaving)
    if _untouched(SUSPEND) or _is_ours(SUSPEND):
        signal.signal(SUSPEND, suspend_after(stop))


def _is_ours(sig: int) -> bool:
    handler = signal.getsignal(sig)
    return getattr(handler, "__module__", None) == __name__
