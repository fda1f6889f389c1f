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


class ShufflerError(Exception):
    """Base class of every error this package raises on purpose."""

    #: the process exit code the CLI uses for this error
    exit_code = 1


class BadInputError(ShufflerError, ValueError):
    """A value given by a user (option, file, request) is not acceptable."""

    exit_code = 2


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

    exit_code = 3


class FaultLatchedError(DeviceError):
    """A fault is latched: nothing moves until the dealer clears it."""


class JamError(DeviceError):
    """A card stuck in the throat and retries did not free it."""


class MisfeedError(DeviceError):
    """No card reached the gate while the tray still held cards."""


class CountMismatchError(DeviceError):
    """The pass counted a different number of cards than it planned."""


class DeviceTimeoutError(DeviceError, TimeoutError):
    """The machine or the dealer did not answer in time."""


class LowBatteryError(ShufflerError, RuntimeError):
    """The battery cannot finish what was asked; nothing was started."""

    exit_code = 4
