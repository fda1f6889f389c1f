"""``shuffler stop`` without the command line's machinery: the motor off within a card
interval of the command, whatever the config on disk holds.

The console script (:mod:`.start`) hands a plain ``stop`` here before it imports click,
structlog or the config's model. It takes ``--json``, ``--socket``, ``--config``,
``--state-dir`` and ``--color/--no-color`` (before or after ``stop``) and their
``SHUFFLER_*`` variables (:func:`parse`), finds the socket as the full CLI does
(:func:`run`; a config that is not TOML is scanned for the two keys it needs,
:func:`service_keys`), trusts it as :mod:`shuffler.service.client` does (:func:`ask`),
sends ``stop`` and prints what the full ``stop`` prints, exit 0. Anything else falls
back to the full command line, which says what it says; the stop is idempotent, so a
fall-back after an odd answer only asks again.
"""

from __future__ import annotations

import os

from shuffler.constants import MAX_FILE_BYTES, PROTOCOL, SCHEMA, SOCKET_PATH_BYTES

TYPE_CHECKING = False  # not ``typing``'s: this module is on the stop's clock
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

#: the global options that take a value, as the variables that may give them
VALUED = {"--socket": "SHUFFLER_SOCKET", "--config": "SHUFFLER_CONFIG",
          "--state-dir": "SHUFFLER_STATE_DIR"}
#: the flags the fast path takes; colour changes nothing in the stop's plain words
FLAGS = {"--json", "--color", "--no-color"}
#: variables of options that change what a stop means (or how it logs): the full CLI's
MEANINGFUL = ("SHUFFLER_DEVICE", "SHUFFLER_NO_SERVICE", "SHUFFLER_VERBOSE",
              "SHUFFLER_LOG_JSON")
#: click's words for a flag's variable (click.types.BoolParamType)
TRUE = ("1", "true", "t", "yes", "y", "on")
FALSE = ("0", "false", "f", "no", "n", "off", "")
TIMEOUT = 2.0
STOPPED = "stopped: the motor is off"
NOTHING = "nothing to stop: no pass or hand was running (the motor is off)"


def parse(argv: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    """The options of a plain ``stop`` (``json``, ``socket``, ``config``), or None."""
    if argv.count("stop") != 1 or any(k.startswith("SHUFFLER_SIM_") for k in env) or any(
            env.get(k) for k in MEANINGFUL):
        return None
    given: dict[str, Any] = {}
    args = iter(argv)
    for tok in args:
        name, eq, value = tok.partition("=")
        if tok == "stop" or tok in FLAGS:
            given[tok] = True
        elif name in VALUED:
            given[name] = value if eq else next(args, "")
        else:
            return None
    if "stop" not in given:  # "stop" was an option's value: no command given
        return None
    as_json = env.get("SHUFFLER_JSON", "").lower()
    if as_json not in TRUE + FALSE or env.get("SHUFFLER_COLOR", "").lower() not in TRUE + FALSE:
        return None
    opts: dict[str, Any] = {"json": "--json" in given or as_json in TRUE}
    for option, variable in VALUED.items():
        named: str | None = given.get(option, env.get(variable))
        if named is not None and (not named or "\0" in named or len(os.fsencode(named)) > (
                SOCKET_PATH_BYTES if option == "--socket" else 4096)):
            return None  # the full CLI names what is wrong with it
        opts[option[2:]] = named
    return opts


def read_config(path: Path) -> str | None:
    """A config file's text: a regular file of at most 1 MiB, never a FIFO or a device;
    None when it is missing or cannot be read (the full CLI names why)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        return os.read(fd, MAX_FILE_BYTES + 1).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def service_keys(paths: list[Path]) -> dict[str, str]:
    """``[service] socket`` and ``user`` as the config files write them (the later
    file's over the earlier's), without checking anything else: where the service
    listens when the config does not load. A file TOML reads gives its keys as TOML
    reads them; one with a TOML error anywhere is scanned line by line (:func:`scan`),
    and so is one written the plain way (:func:`plain`), without loading the TOML parser:
    the same keys, a few milliseconds sooner."""
    keys: dict[str, str] = {}
    for path in paths:
        text = read_config(path)
        if text is None:
            continue
        table: object = scan(text) if plain(text) else None
        if table is None:
            import tomllib

            try:
                table = tomllib.loads(text).get("service")
            except (tomllib.TOMLDecodeError, RecursionError):
                table = scan(text)
        if not isinstance(table, dict):
            continue
        for key in ("socket", "user"):
            value = table.get(key)
            if isinstance(value, str) and value and "\0" not in value and len(
                    os.fsencode(value)) <= SOCKET_PATH_BYTES:
                keys[key] = value
    return keys


def plain(text: str) -> bool:
    """Whether the scan reads ``[service]`` as TOML would: nothing names the table but
    its header (``service.socket = ...``, ``service = {...}``, a quoted ``"service"``),
    no multi-line string could hide a line that looks like a header or a key, and no
    escape needs decoding."""
    rest = text.replace("[service]", "")
    return ("service" not in rest and '"""' not in text and "'''" not in text
            and "\\" not in text)


def scan(text: str) -> dict[str, str]:
    """``socket`` and ``user`` in the ``[service]`` table of a file TOML cannot read,
    as far as their own lines can be read: a header ``[service]``, then ``key = "..."``
    or ``key = '...'`` (a basic string without escapes) up to the next header. A line
    that says more than that is skipped; the last good one of a key wins."""
    found: dict[str, str] = {}
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            inside = line.split("#", 1)[0].strip().replace(" ", "") == "[service]"
            continue
        key, eq, rest = line.partition("=")
        key = key.strip().strip("\"'")
        if not (inside and eq and key in ("socket", "user")):
            continue
        rest = rest.strip()  # one plain string, then at most a comment
        end = rest.find(rest[0], 1) if rest[:1] in ("\"", "'") else -1
        if end < 0 or (rest[0] == '"' and "\\" in rest[1:end]):
            continue
        if not (after := rest[end + 1:].strip()) or after.startswith("#"):
            found[key] = rest[1:end]
    return found


def default_socket(written: str | None) -> Path:
    """Where a command asks the service, given no --socket: ``[service] socket`` as
    written, else the deployed service's (/run/shuffler/shuffler.sock) when it is there
    or a service is installed, else the user's own service's."""
    from pathlib import Path

    from shuffler.paths import default_socket_path, service_installed, service_socket_path

    if written is not None:
        return Path(written)
    deployed = service_socket_path()
    if os.path.lexists(deployed) or service_installed():
        return deployed
    return default_socket_path()


def ask(path: Path, uids: frozenset[int]) -> list[dict[str, Any]] | None:
    """The greeting and the reply to ``stop`` from a trusted service at ``path``; None
    when anything is unusual (the full CLI then says what)."""
    import json
    import socket
    import stat

    from shuffler.service.trust import peer_uid

    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid not in uids:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    try:
        sock.connect(os.fspath(path))
        if peer_uid(sock) not in uids:
            return None
        lines = sock.makefile("rwb")
        greeting = json.loads(lines.readline(1 << 16) or b"null")
        if not isinstance(greeting, dict) or greeting.get("protocol") != PROTOCOL:
            return None
        lines.write(b'{"cmd": "stop"}\n')
        lines.flush()
        messages = [greeting]
        while isinstance(msg := json.loads(lines.readline(4 << 20) or b"null"), dict):
            messages.append(msg)
            if "ok" in msg:
                return messages
        return None
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        sock.close()


def answered(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The stop's output object, when the reply is a stop's answer (checked against the
    schemas when SHUFFLER_CHECK_SCHEMAS asks, as the full CLI checks them)."""
    reply = messages[-1]
    result = reply.get("result")
    if reply.get("ok") is not True or not isinstance(result, dict) or not isinstance(
            result.get("stopped"), bool):
        return None
    out = {"schema": SCHEMA, **result}
    if os.environ.get("SHUFFLER_CHECK_SCHEMAS", "") not in ("", "0"):
        from shuffler.schemas import validate

        try:
            for msg in messages:
                validate(msg, "reply" if "ok" in msg else "event" if "event" in msg
                         else "greeting")
            validate(result, "stop")
            validate(out, "stop")
        except Exception:  # SchemaMismatch, or anything: the full CLI's to say
            return None
    return out


def run(argv: list[str]) -> None:
    """Stop the service's pass or hand, print what the full ``stop`` prints and exit 0
    (:func:`shuffler_cli.streams.finish`); return to let the full CLI run instead."""
    opts = parse(argv, dict(os.environ))
    if opts is None:
        return
    from pathlib import Path

    from shuffler.paths import discovered_config_paths
    from shuffler.service.trust import trusted_uids

    # where the service listens and [service] user, as the full CLI finds them (make_app)
    keys = service_keys([Path(opts["config"])] if opts["config"] else discovered_config_paths())
    path = Path(opts["socket"]) if opts["socket"] else default_socket(keys.get("socket"))
    messages = ask(path, trusted_uids(keys.get("user")))
    out = answered(messages) if messages is not None else None
    if out is None:
        return
    if opts["json"]:
        import json

        text = json.dumps(out)
    else:
        text = STOPPED if out["stopped"] else NOTHING
    from .streams import finish, guard

    stdout, stderr = guard()
    stdout.write(text + "\n")
    finish(0, stdout, stderr)
