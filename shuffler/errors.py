"""The exception hierarchy.

Every error raised on purpose derives from :class:`ShufflerError`; the specific
classes also inherit the builtin that fits, so callers may catch either::

    >>> try:
    ...     raise ConfigError("shuffler.toml: [hand] passes: expected 1..30, got 0")
    ... except ValueError as e:
    ...     print(e)
    shuffler.toml: [hand] passes: expected 1..30, got 0
"""

from __future__ import annotations

from shuffler.constants import EXIT_BATTERY, EXIT_BUG, EXIT_FAULT, EXIT_USAGE
from shuffler.limits import DRIVER_VM_MAX_VOLTS


class ShufflerError(Exception):
    """Base class of every error this package raises on purpose."""

    #: the process exit code the CLI uses for this error
    exit_code = EXIT_BUG


class BadInputError(ShufflerError, ValueError):
    """A value given by a user (option, file, request) is not acceptable."""

    exit_code = EXIT_USAGE


class ConfigError(BadInputError):
    """A config file is unreadable or holds a bad value; the message names file and key."""


class FileAccessError(BadInputError):
    """A file or folder the program keeps cannot be read or written (permission, a
    read-only or full disk, a missing folder); the message names the path."""


class StateFileError(BadInputError):
    """The state file fails its schema; the message names the file, the field and the
    problem, and says how to continue."""


class DeviceError(ShufflerError, RuntimeError):
    """The machine cannot do what was asked."""

    exit_code = EXIT_FAULT


class FaultLatchedError(DeviceError):
    """A fault is latched: nothing moves until the dealer clears it."""


class UnsavedFaultError(DeviceError):
    """A pass ended with a latching fault that could not be written (a full or failing
    disk): shown, exit 3, kept in memory; the state file keeps the pass's latch."""

    kind = "fault_unsaved"


class TrayEmptyError(DeviceError):
    """The tray holds no cards: nothing was started."""


class DeviceTimeoutError(DeviceError, TimeoutError):
    """The machine or the dealer did not answer in time."""


class BatteryMonitorError(DeviceError):
    """The battery monitor reads what no connected block gives (at the floor or full
    scale): the mechanism switched off, or the monitor absent or broken; nothing was
    started. Not :class:`LowBatteryError`: a fresh battery would not help."""


class LowBatteryError(ShufflerError, RuntimeError):
    """The battery cannot finish what was asked; nothing was started."""

    exit_code = EXIT_BATTERY


class OverVoltageError(ShufflerError, RuntimeError):
    """The 9 V side reads above the motor driver's limit (shuffler.limits): nothing was
    started. Exit 4, as a low battery: the block is what must change."""

    exit_code = EXIT_BATTERY


#: every ``error.kind`` a failure can carry (``--json``, the socket, the page), closed:
#: the schema's enum is this list (a test keeps them equal) and docs/json.md lists it
ERROR_KINDS: dict[str, str] = {
    # exit 1
    "internal": "a bug: an unexpected error (please report it)",
    # exit 2: usage and bad input
    "usage": "a bad option or argument on the command line",
    "bad_input": "a value given (an option, a file, a request) is not acceptable",
    "config": "the config file is unreadable or holds a bad value; the message names "
              "the file and the key",
    "file_access": "a file or folder the program keeps cannot be read or written "
                   "(permission, a full or read-only disk); the message names the path",
    "state_file": "the state file fails its schema; the message says how to continue",
    "bad_request": "the service refused a malformed request",
    "too_deep": "a request nested too deep for the service to read",
    "bad_score": "a score the game cannot take (a seat, a trick count)",
    "stale_score": "a score change made against a version of the score no longer current",
    "touch_ignored": "the page's Start pass started no pass (the message says why)",
    "already_running": "`shuffler serve` while a service already runs",
    "too_long": "a request line (socket) or body (page) longer than the service reads",
    "idle": "a socket connection sent no request for too long and was closed",
    "not_found": "the page has no such path or action",
    "forbidden": "the page refused an action: not paired, or a wrong or expired code",
    "throttled": "too many wrong pairing codes: wait the seconds the message names",
    "wrong_host": "the page was asked under a host name it does not answer to",
    "too_slow": "a request to the page was not sent in time (10 s from its first byte, "
                "the body 3 s of it) and the connection was closed",
    "pairing_busy": "the page cannot pair by touch while a hand is being dealt (a touch "
                    "starts its next pass): pair after its last pass",
    "pairing_ambiguous": "two devices asked to pair by touch at the same moment, so the "
                         "touch paired neither: ask again, or use a code from `shuffler pair`",
    "pairing_expired": "no touch on the machine within 30 s of the phone's asking to pair",
    # exit 3: the machine
    "device": "the machine cannot do what was asked",
    "battery_monitor": "refused: the battery monitor reads at the floor or full scale, "
                       "which no connected 9 V block gives (the mechanism switched off at "
                       "SW1, or the monitor absent or miswired; a build without one sets "
                       "`[gpio] adc_channel = false`); the message says what to check",
    "fault_latched": "a fault is latched: free the machine, then `shuffler clear`",
    "jam": "a card stuck in the throat: a pass or a hand stopped there "
           "(`pass_reports` holds what ran); free it, then `shuffler clear`",
    "misfeed": "no card reached the gate while the tray held cards: as a jam",
    "count_mismatch": "a pass counted fewer cards than it planned, the tray empty (a "
                      "double feed, a missing card); the pass ran, degraded",
    "miscount": "a pass reached its count with cards still in the tray: the beam saw a "
                "card as two (a drop-out inside a card), or more cards were loaded than "
                "the pass was for; latched: check the beam, put every card back, then "
                "`shuffler clear`",
    "timeout": "a pass ran longer than the machine allows",
    "tray_empty": "refused: the tray sensor sees no cards; nothing was started (load the "
                  "pack, then start again)",
    "device_timeout": "the machine or the dealer did not answer in time (no touch "
                      "between a hand's passes)",
    "link_lost": "the microcontroller stopped answering",
    "mcu_restarted": "the microcontroller restarted during a pass",
    "interrupted": "a pass was cut short (a crash, a kill, the power, a failed write, "
                   "its program frozen while the motor ran): "
                   "latched, as cards may be in the machine; put them back, then "
                   "`shuffler clear`",
    "fault_unsaved": "a pass ended with a latching fault that could not be written (a "
                     "full or failing disk): shown and kept in memory; the state file "
                     "keeps the pass's `interrupted` latch",
    "lock_lost": "the machine's lock file was removed or replaced while held: the holder "
                 "stopped, as another process may drive the machine",
    "state_damaged": "the state file was damaged and set aside",
    "stopped": "a stop was asked for and the motor stopped",
    "protocol": "the microcontroller broke the serial protocol",
    "frame": "a serial frame failed its check",
    "payload": "a serial message held a value out of range",
    "busy": "another process drives the machine (the message names it and the fix)",
    "too_many_clients": "the service has as many clients as it takes",
    "unsupported": "a remote (MQTT) command this service does not handle",
    "service_protocol": "the service speaks another protocol version than this CLI",
    "service_permission": "this user may not talk to the service (the message names "
                          "the group to join)",
    "service_not_running": "no service answers where one should: not started, a "
                           "socket named (--socket, the user's config) that is not "
                           "there, or a socket left by a start that never finished or "
                           "by an earlier run (the message says which)",
    "service_not_answering": "the service is there but did not answer in time",
    "service_bad_answer": "the service answered something this CLI cannot read",
    "service_untrusted": "the socket is not owned by the service's account",
    "service_stopped": "the service stopped while it ran the request",
    "service_closed": "the connection to the service ended before its answer came",
    "bad_answer": "a line from the service that is not what the protocol says",
    # exit 4
    "low_battery": "refused, or stopped, for low battery: change the 9 V battery",
    "over_voltage": "refused: the 9 V side reads above the motor driver's "
                    f"{DRIVER_VM_MAX_VOLTS:g} V limit (a 12 V supply, an 8-cell NiMH "
                    "block): use a 9 V block",
}


def error_kind(error: BaseException) -> str:
    """The documented slug for an error: its ``kind`` if listed, else its class's name
    (``FaultLatchedError`` -> ``fault_latched``), else the nearest listed base class's,
    else ``internal``."""
    kind = getattr(error, "kind", None)
    if isinstance(kind, str) and kind in ERROR_KINDS:
        return kind
    for cls in type(error).__mro__:
        if cls is ShufflerError or not issubclass(cls, ShufflerError):
            continue
        slug = class_kind(cls)
        if slug in ERROR_KINDS:
            return slug
    if isinstance(error, BadInputError):
        return "bad_input"
    return "internal"


def class_kind(cls: type) -> str:
    """``FaultLatchedError`` -> ``fault_latched``, ``BadInputError`` -> ``bad_input``."""
    import re

    name = cls.__name__.removesuffix("Error") or "error"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
