"""docs/troubleshooting.md's software section quotes what the machine says: every message
in double quotes there is checked here against what the code prints (or, for systemd's,
pip's and the kernel's words, against where they come from), and a new quote with no
check fails until one is added."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from shuffler.service import client

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "troubleshooting.md"


def quotes() -> list[str]:
    """The double-quoted words of the software section, outside code (spans and blocks),
    whitespace made single."""
    section = PAGE.read_text(encoding="utf-8").split("\n## The software\n", 1)[1]
    prose = re.sub(r"```.*?```", "", section, flags=re.DOTALL)
    prose = re.sub(r"`[^`]*`", "", prose)
    return re.findall(r'"([^"]+)"', re.sub(r"\s+", " ", prose))


#: words that are not ours, each with where they come from: systemd's journal line for a
#: watchdog abort (src/core/service.c), pip's, and Debian 12's PEP 668 marker
NOT_OURS = {"Watchdog timeout": "systemd", "No matching distribution found": "pip",
            "externally-managed-environment": "Debian's pip (PEP 668)"}


def bad_config(run, tmp_path: Path, text: str) -> str:
    config = tmp_path / "config.toml"
    config.write_text(text)
    result = run("--config", str(config), "--no-service", "status")
    assert result.exit_code == 2, result.output
    return result.stderr.replace(str(config), "/etc/shuffler/config.toml")


def permission_message(tmp_path: Path, monkeypatch) -> str:
    """What `status` says to a user who may not enter the service's socket folder (the
    deployed /run/shuffler, 0750 for the group shuffler)."""
    folder = tmp_path / "run" / "shuffler"
    folder.mkdir(parents=True)
    sock = folder / "shuffler.sock"
    real_lstat, real_access = os.lstat, os.access

    def lstat(path, *a, **k):
        if Path(path) == sock:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_lstat(path, *a, **k)

    monkeypatch.setattr(client.os, "lstat", lstat)
    monkeypatch.setattr(client.os, "access",
                        lambda p, m: Path(p) != folder and real_access(p, m))
    monkeypatch.setattr(client.grp, "getgrgid", lambda gid: SimpleNamespace(gr_name="shuffler"))
    with pytest.raises(client.ServiceUnreachableError) as caught:
        client.socket_there(sock)
    assert caught.value.kind == "service_permission"
    return str(caught.value).replace(str(folder), "/run/shuffler")


def test_every_quoted_message_is_what_the_machine_says(run, tmp_path, monkeypatch):
    said = quotes()
    assert said, "the software section quotes no message"
    port = bad_config(run, tmp_path, '[web]\nenabled = true\nport = "eighty"\n')
    misspelt = bad_config(run, tmp_path, "[web]\nprot = 8080\n")
    permission = permission_message(tmp_path, monkeypatch)
    web = (ROOT / "shuffler" / "faces" / "web.py").read_text(encoding="utf-8")
    unchecked = []
    for quote in said:
        if quote == "Exit codes":  # the README's section of that name
            assert "\n## Exit codes\n" in (ROOT / "README.md").read_text(encoding="utf-8")
        elif quote in NOT_OURS:
            continue
        elif quote.startswith("Address "):  # the kernel's: a listener's OSError
            assert quote in (os.strerror(errno.EAFNOSUPPORT), os.strerror(errno.EADDRINUSE))
        elif "port: expected" in quote:
            assert quote in port, port
        elif "unknown key" in quote:
            assert quote in misspelt, misspelt
        elif quote.startswith("permission denied"):
            assert quote in permission, permission
        elif "answers only to" in quote:  # the page's 421 (wrong_host), one literal
            assert f'"{quote}"' in web
        else:
            unchecked.append(quote)
    assert not unchecked, f"quoted with no check here: {unchecked}"


def test_a_misquoted_message_is_caught(run, tmp_path):
    """The check is not a formality: a word changed in the quote no longer matches."""
    port = bad_config(run, tmp_path, '[web]\nenabled = true\nport = "eighty"\n')
    assert "[web] port: expected a whole number from 1 to 65535, got 'eighty'" in port
    assert "[web] port: expected an integer from 1 to 65535, got 'eighty'" not in port
