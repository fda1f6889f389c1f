"""A second host on a private link: a network namespace joined to this one by a veth
pair, so a request can come from a LAN address while never leaving the machine."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

IP = shutil.which("ip") or ("/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else None)

needs_netns = pytest.mark.skipif(
    IP is None or os.geteuid() != 0,
    reason="needs root and iproute2 (apt-get install iproute2) to make a test host in a "
           "network namespace")


class LanHost:
    def __init__(self, name: str, here: str, there: str,
                 others: tuple[str, ...] = ()) -> None:
        self.name, self.here, self.there = name, here, there
        #: more addresses of the other host (a connection binds one to come from it)
        self.others = others

    def python(self, code: str, timeout: float = 20) -> subprocess.CompletedProcess:
        """Run ``code`` with this interpreter on the other host."""
        return subprocess.run([IP, "netns", "exec", self.name, sys.executable, "-c", code],
                              capture_output=True, text=True, timeout=timeout, check=False)


@contextmanager
def lan_host(addresses: int = 0) -> Iterator[LanHost]:
    """The other host, with ``addresses`` more addresses of its own (at most 200): as
    many phones, or attackers, on one link."""
    tag = secrets.token_hex(3)
    ns, a, b = f"shuf{tag}", f"sha{tag}", f"shb{tag}"
    octet = 16 + secrets.randbelow(200)
    here, there = f"10.213.{octet}.1", f"10.213.{octet}.2"

    def ip(*args: str) -> None:
        subprocess.run([IP, *args], check=True, capture_output=True)

    ip("netns", "add", ns)
    try:
        ip("link", "add", a, "type", "veth", "peer", "name", b)
        ip("link", "set", b, "netns", ns)
        ip("addr", "add", f"{here}/{24 if addresses else 30}", "dev", a)
        ip("link", "set", a, "up")
        ip("netns", "exec", ns, IP, "addr", "add", f"{there}/{24 if addresses else 30}",
           "dev", b)
        others = tuple(f"10.213.{octet}.{3 + i}" for i in range(addresses))
        for other in others:
            ip("netns", "exec", ns, IP, "addr", "add", f"{other}/24", "dev", b)
        ip("netns", "exec", ns, IP, "link", "set", b, "up")
        ip("netns", "exec", ns, IP, "link", "set", "lo", "up")
        yield LanHost(ns, here, there, others)
    finally:
        subprocess.run([IP, "link", "del", a], capture_output=True, check=False)
        subprocess.run([IP, "netns", "del", ns], capture_output=True, check=False)


def popen(host: LanHost, code: str) -> subprocess.Popen:
    """Start ``code`` on the other host and leave it running (stdout piped)."""
    return subprocess.Popen([IP, "netns", "exec", host.name, sys.executable, "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
