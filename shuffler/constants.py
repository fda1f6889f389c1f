"""The numbers every layer shares, declared once. Pure: no imports, no I/O.

The exit codes (README, "Exit codes"), the socket's protocol, the version of every
JSON object (docs/json.md), the most cards in a load, the longest socket path and file
read. The CLI's fast stop (cli/quickstop.py) and its options read them from here, as the
service and the core do;
``tests/test_constants.py`` fails if one of them is assigned anywhere else.

    >>> EXIT_FAULT, EXIT_BATTERY
    (3, 4)
"""

from __future__ import annotations

#: the process's exit codes: 0 done; 1 a bug; 2 bad input or usage; 3 the machine could
#: not (a fault, busy, no service); 4 the battery (low, or over the driver's limit)
EXIT_OK, EXIT_BUG, EXIT_USAGE, EXIT_FAULT, EXIT_BATTERY = 0, 1, 2, 3, 4
#: ``shuffler-setup``: the system refused (a command failed, a file could not be written)
EXIT_SYSTEM = EXIT_FAULT
#: stdout could not take the report (a full disk, a closed descriptor): bad output, as usage
EXIT_OUTPUT = EXIT_USAGE

#: the control socket's protocol (shuffler.service.protocol)
PROTOCOL = 1
#: the version in every JSON object's ``schema`` key (``--json``, the socket, the page, MQTT);
#: bumped on a breaking change
SCHEMA = 1

#: the most cards in a load (a double deck and its jokers)
MAX_CARDS = 104

#: what fits in a Unix socket address (sun_path less its final NUL)
SOCKET_PATH_BYTES = 107
#: what a user-named file may hold at most, in bytes
MAX_FILE_BYTES = 1 << 20
