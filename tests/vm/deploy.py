"""docs/deploy/README.md's Debian install (the ``sh deploy-debian`` block), run line by
line in the guest as root, so the VM tier installs the project exactly as a builder
does. The guest has no network and no terminal, so a few lines are changed, each by a
named edit that must match exactly one line (a README that moved fails the setup, naming
the edit, rather than installing something else):

- ``apt install``: the image already carries the packages (tests/vm/image.py); the line
  checks that they are installed.
- ``git clone ~/shuffler``: the checkout is the host's, handed in as a git repository on
  the data disk (tests/vm/machine.py).
- ``pip install '.[pi]'``: from the wheels the host fetched (``pip wheel '.[pi]'``).
- before ``shuffler-setup install``: the scenario's config (tests/vm/config.toml: the
  shipped one with emulation's timings; the installer keeps a config it finds), the one
  test-only drop-in (the unit sees a Pi's /proc/cpuinfo: gpiozero refuses to run off a
  Pi; a drop-in of the builder's own to the installer, which never removes it), and a
  list of the guest's files (:data:`BEFORE`) for the uninstall to be checked against.
- ``selftest``: it asks the builder to touch each part; the scenarios drive the parts.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

from tests.vm.guest import DATA, Guest
from tests.vm.image import Steps

FENCE = "```sh deploy-debian"
#: the drop-in's path in the guest; its text is machine.CPUINFO_DROPIN
DROPIN = "/etc/systemd/system/shuffler.service.d/vm-pi.conf"
#: the guest's files just before the installer ran (tests/vm/test_vm_walk.py's uninstall)
BEFORE = "/root/files-before-install.list"
#: where the installer may leave a file: what that list covers (not /opt: the checkout and
#: its venv are the builder's, made by the page's own lines, and git and pip write there)
SCANNED = "/etc /usr/local /var/lib /boot"


def files_command(out: str) -> str:
    """The guest's files under :data:`SCANNED` into ``out``, sorted (the package manager's
    and systemd's own bookkeeping left out)."""
    return (f"find {SCANNED} -xdev \\( -path /var/lib/systemd -o -path /var/lib/dpkg -o "
            f"-path /var/lib/apt -o -name __pycache__ \\) -prune -o -print 2>/dev/null "
            f"| sort > {out}")


def block(readme: Path, fence: str = FENCE) -> list[str] | None:
    """The block's commands (no comments, no blank lines, no ``sudo``), None if the
    README has no such block (``fence``: its opening line, the Debian install's unless
    given)."""
    text = readme.read_text()
    if fence not in text:
        return None
    body = text.split(fence, 1)[1].split("\n```", 1)[0]
    lines = [line.strip() for line in body.splitlines()]
    return [re.sub(r"^sudo ", "", line) for line in lines if line and not line.startswith("#")]


#: (what the edit is for, the line it matches, what the line becomes: a function of it)
EDITS: tuple[tuple[str, str, Callable[[str], str]], ...] = (
    ("the image carries the packages", r"^apt install ",
     lambda line: "dpkg-query -W " + line.split(" ", 2)[2] + " >/dev/null"),
    ("the host's checkout", r"^git clone ~/shuffler ",
     lambda line: line.replace("~/shuffler", f"{DATA}/src", 1)),
    ("the host's wheels", r"^\.venv/bin/pip install ",
     lambda line: line + f" --no-index --find-links {DATA}/wheels"),
    ("the scenario's config, the test's drop-in, the list of files before",
     r"^\.venv/bin/shuffler-setup install$",
     lambda line: f"test -f {DROPIN} && install -D -m 0644 tests/vm/config.toml "
                  f"/etc/shuffler/config.toml && {files_command(BEFORE)} && {line}"),
    ("selftest asks the builder to touch each part", r"^shuffler .*selftest$",
     lambda line: "true"),
)


Edit = tuple[str, str, Callable[[str], str]]


def edited(lines: list[str], edits: tuple[Edit, ...] = EDITS, fence: str = FENCE) -> list[str]:
    """The block with ``edits`` (the install's :data:`EDITS` unless given) applied; an edit
    that matches no line, or more than one, is an error naming it."""
    out = list(lines)
    for what, pattern, change in edits:
        hits = [i for i, line in enumerate(lines) if re.search(pattern, line)]
        if len(hits) != 1:
            raise AssertionError(f"docs/deploy/README.md's {fence[6:]} block: the edit for "
                                 f"{what!r} matches {len(hits)} lines, not one")
        out[hits[0]] = change(lines[hits[0]])
    return out


def run(guest: Guest, readme: Path, steps: Steps, before_reload: Callable[[], None]) -> None:
    """Each line in a shell of its own, in the folder the block's ``cd`` lines left;
    ``before_reload()`` puts the test-only files in place before the installer runs."""
    lines = block(readme)
    assert lines is not None, f"{readme} has no {FENCE[6:]} block"
    run_lines(guest, edited(lines), steps, before_reload)


def run_lines(guest: Guest, lines: list[str], steps: Steps, before_reload: Callable[[], None]
              = lambda: None, what: str = "deploy") -> dict[str, str]:
    """Each line in a shell of its own as root (``~`` is /root), in the folder the
    block's ``cd`` lines left; each line's output, by line."""
    cwd, out = "/", {}
    for line in lines:
        if line.startswith("cd "):
            cwd = line[3:].strip()
            continue
        if line.startswith(f"test -f {DROPIN}"):
            before_reload()
        with steps.step(f"{what}: {line[:70]}"):
            out[line] = guest.run(f"export HOME=/root; cd {shlex.quote(cwd)} && {line}",
                                  timeout=900).out
    return out
