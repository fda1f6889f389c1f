"""A booted guest (tests/vm/image.py's image) under QEMU, driven through
qemu-guest-agent: commands run as root with ``guest-exec``, files go in on its stdin.

Emulated (TCG): this machine's /dev/kvm cannot boot a guest, and CI's may not either.
The image is never written: each boot gets a throwaway qcow2 overlay on it. A second,
read-only disk carries what the host hands in (the project's wheels, its files, the
simulator modules), mounted at :data:`DATA` in the guest: the guest needs no network.
The serial console goes to ``console.log`` in the run folder (read it when a boot fails).
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.vm.image import Image
from tests.waiting import wait_for

T = TypeVar("T")

#: where the host's disk of wheels and files is mounted in the guest
DATA = "/mnt/shuffler"
#: the simulated chip's platform device (tests/vm/conftest.py makes it through configfs)
SIM_DEVICE = "/sys/devices/platform/gpio-sim.0"
#: guest memory and vCPUs: two vCPUs let TCG run them on two host threads (MTTCG)
MEMORY_MIB = 1024
CPUS = 2
KERNEL_CMDLINE = ("root=/dev/vda rw console=ttyS0 panic=-1 quiet "
                  "systemd.show_status=false net.ifnames=0")


@dataclass(frozen=True)
class Result:
    rc: int
    out: str
    err: str


class GuestError(AssertionError):
    """A command in the guest failed, or the guest stopped answering."""


class Agent:
    """qemu-guest-agent's JSON protocol over QEMU's unix socket for its virtio port."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock: socket.socket | None = None
        self.buffer = b""

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _connect(self) -> socket.socket:
        if self.sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(self.path))
            self.sock, self.buffer = sock, b""
        return self.sock

    def _reply(self, deadline: float) -> dict[str, Any]:
        sock = self._connect()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from the guest agent")
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                self.close()
                raise ConnectionError("QEMU closed the guest agent's socket")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        line = line.rsplit(b"\xff", 1)[-1].strip()
        return json.loads(line) if line else {}

    def sync(self, timeout: float = 5.0) -> bool:
        """True once the agent answers: ``guest-sync-delimited`` with a fresh id, every
        reply before it (a stale one from an earlier try) dropped."""
        token = secrets.randbelow(2**31)
        deadline = time.monotonic() + timeout
        try:
            sock = self._connect()
            sock.sendall(b"\xff" + json.dumps(
                {"execute": "guest-sync-delimited", "arguments": {"id": token}}).encode())
            while True:
                if self._reply(deadline).get("return") == token:
                    return True
        except (OSError, TimeoutError, ValueError):
            self.close()
            return False

    def send(self, command: str) -> None:
        """A command that answers nothing when it works (``guest-shutdown``)."""
        self._connect().sendall(json.dumps({"execute": command}).encode())

    def call(self, command: str, timeout: float = 30.0, **arguments: Any) -> Any:
        message: dict[str, Any] = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        self._connect().sendall(json.dumps(message).encode())
        reply = self._reply(time.monotonic() + timeout)
        if "error" in reply:
            raise GuestError(f"guest agent: {command}: {reply['error']}")
        return reply.get("return")


class Guest:
    """The booted guest; see tests/vm/conftest.py for what the session sets up in it."""

    def __init__(self, process: subprocess.Popen[bytes] | None, agent: Agent,
                 run_dir: Path, relaunch: Callable[[], Guest] | None = None) -> None:
        self.process = process
        self.agent = agent
        self.run_dir = run_dir
        self._relaunch = relaunch
        self._chip: str | None = None
        self._done: dict[int, Result] = {}

    # -- commands and files
    def start(self, cmd: str, input: bytes | None = None) -> int:
        """``cmd`` in ``sh -c`` as root, not waited for: its pid for :meth:`result`."""
        args: dict[str, Any] = {"path": "/bin/sh", "arg": ["-c", cmd], "capture-output": True}
        if input is not None:
            args["input-data"] = base64.b64encode(input).decode()
        return int(self.agent.call("guest-exec", **args)["pid"])

    def poll(self, pid: int) -> Result | None:
        """:meth:`start`'s command's result once it has exited, else None."""
        if pid not in self._done:
            status = self.agent.call("guest-exec-status", pid=pid)
            if not status["exited"]:
                return None
            self._done[pid] = Result(status.get("exitcode", 128 + status.get("signal", 0)),
                                     _decoded(status.get("out-data")),
                                     _decoded(status.get("err-data")))
        return self._done[pid]

    def result(self, pid: int, timeout: float = 120, what: str = "") -> Result:
        """What :meth:`start`'s command exited with and printed, once it has exited."""
        deadline = time.monotonic() + timeout
        every = 0.05
        while (done := self.poll(pid)) is None:
            if time.monotonic() > deadline:
                self.agent.call("guest-exec", path="/bin/kill", arg=["-9", str(pid)])
                raise GuestError(f"guest: {what or pid!r} still running after {timeout} s")
            time.sleep(every)
            every = min(every * 2, 0.5)
        return done

    def run(self, cmd: str, timeout: float = 120, check: bool = True,
            input: bytes | None = None) -> Result:
        """``cmd`` in ``sh -c`` as root in the guest; with ``check``, a non-zero exit
        raises naming the command and what it printed."""
        result = self.result(self.start(cmd, input), timeout, cmd)
        if check and result.rc != 0:
            raise GuestError(f"guest: {cmd!r} exited {result.rc}\n"
                             f"stdout: {result.out}\nstderr: {result.err}")
        return result

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        quoted = shlex.quote(path)
        self.run(f"mkdir -p \"$(dirname {quoted})\" && cat > {quoted} && "
                 f"chmod {mode:o} {quoted}", input=data)

    def get(self, path: str) -> bytes:
        return base64.b64decode(self.run(f"base64 -w0 {shlex.quote(path)}").out)

    # -- the simulated GPIO chip: BCM number = line offset, as on a Pi's gpiochip0
    def _sim_line(self, bcm: int) -> str:
        if self._chip is None:
            self._chip = self.run(f"echo {SIM_DEVICE}/gpiochip*").out.strip()
        return f"{self._chip}/sim_gpio{bcm}"

    def line(self, bcm: int) -> int:
        """The kernel's level of line ``bcm`` (what the pin drives, or its pull)."""
        return int(self.run(f"cat {self._sim_line(bcm)}/value").out.strip())

    def pull(self, bcm: int, up: bool) -> None:
        """Pull line ``bcm`` up or down from the simulator's side (a sensor's output)."""
        value = "pull-up" if up else "pull-down"
        self.run(f"echo {value} > {self._sim_line(bcm)}/pull")

    # -- the journal
    def cursor(self) -> str:
        """The journal's current end, for :meth:`journal` to read only what follows."""
        out = self.run("journalctl -q -n 1 -o json --show-cursor").out
        return out.rsplit("-- cursor: ", 1)[-1].strip()

    def journal(self, unit: str | None = "shuffler", cursor: str | None = None) -> list[dict]:
        """The journal's entries (``journalctl -o json``) of ``unit`` (None: all), after
        ``cursor`` if given. systemd's own lines about the unit count as the unit's."""
        cmd = "journalctl -q -o json --no-pager"
        if unit is not None:
            cmd += f" -u {shlex.quote(unit)}"
        if cursor is not None:
            cmd += f" --after-cursor={shlex.quote(cursor)}"
        return [json.loads(line) for line in self.run(cmd).out.splitlines() if line.strip()]

    def show(self, unit: str, *props: str) -> dict[str, str]:
        """``systemctl show`` of ``props`` (all when none)."""
        cmd = f"systemctl show {shlex.quote(unit)}"
        if props:
            cmd += " -p " + ",".join(props)
        return dict(line.split("=", 1) for line in self.run(cmd).out.splitlines() if "=" in line)

    def wait(self, predicate: Callable[[], T], timeout: float, what: str) -> T:
        return wait_for(predicate, timeout=timeout, what=what, every=0.5)

    # -- the machine
    def console(self) -> str:
        path = self.run_dir / "console.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def reboot(self, timeout: float = 900) -> None:
        """``systemctl reboot`` in the guest: QEMU runs with ``-no-reboot``, so it exits,
        and the same overlay (the disk as the guest left it) is booted again; the earlier
        boot's console is kept as ``console-<n>.log``. Only for a guest this process
        booted (an attached one has no QEMU here to start again)."""
        if self.process is None or self._relaunch is None:
            raise GuestError("an attached guest cannot be rebooted from here")
        self.start("systemctl reboot")
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise GuestError(f"the guest did not reboot within {timeout} s "
                             f"(QEMU still runs)\n{self.console()[-3000:]}") from None
        self.agent.close()
        boots = len(list(self.run_dir.glob("console-*.log"))) + 1
        (self.run_dir / "console.log").rename(self.run_dir / f"console-{boots}.log")
        again = self._relaunch()
        self.process, self.agent, self._chip, self._done = again.process, again.agent, None, {}

    def shutdown(self) -> None:
        """Power the guest off (one this process booted; an attached one is left)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.agent.send("guest-shutdown")
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.agent.close()


@contextlib.contextmanager
def shut_down_after(guest: Guest, run: Path, what: str) -> Iterator[None]:
    """The guest shut down when the block ends; ``run`` (its folder) removed if the block
    ended well, else kept, and the console's tail printed for the failure's report."""
    ok = False
    try:
        yield
        ok = True
    finally:
        console = guest.console()
        guest.shutdown()
        if ok:
            shutil.rmtree(run, ignore_errors=True)
        else:
            print(f"{what}: the guest's console and disks are kept in {run}\n{console[-4000:]}")


def _decoded(data: str | None) -> str:
    return base64.b64decode(data).decode(errors="replace") if data else ""


#: the page's port in the guest, forwarded to :func:`page_port` on the host's loopback
GUEST_PAGE_PORT = 8080
#: the guest's address on QEMU's user network (what the guest configures for it)
GUEST_ADDRESS = "10.0.2.15/24"


def page_port(run_dir: Path) -> int:
    """The host's port for the guest's page: a free one, chosen once for ``run_dir`` (a
    reboot keeps it; an attached run reads it)."""
    kept = run_dir / "page-port"
    if not kept.exists():
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            kept.write_text(str(probe.getsockname()[1]))
    return int(kept.read_text())


def attach(run_dir: Path) -> Guest:
    """The guest already running from ``run_dir`` (``python -m tests.vm --keep``)."""
    agent = Agent(run_dir / "qga.sock")
    if not agent.sync():
        raise GuestError(f"no guest agent answers on {run_dir / 'qga.sock'}")
    return Guest(None, agent, run_dir)


def data_disk(folder: Path, disk: Path) -> Path:
    """``folder``'s files as a raw ext4 disk (no root needed: ``mkfs.ext4 -d``)."""
    used = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    size_mib = max(64, used * 2 // (1024 * 1024) + 32)
    subprocess.run(["mkfs.ext4", "-q", "-L", "shuffler-data", "-d", str(folder), str(disk),
                    f"{size_mib}M"], check=True)
    return disk


def boot(image: Image, data: Path, run_dir: Path, timeout: float = 900) -> Guest:
    """Boot ``image`` with ``data`` (a disk from :func:`data_disk`) on a fresh overlay and
    return the guest once its agent answers; the console is in ``run_dir/console.log``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    overlay = run_dir / "root.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw",
                    "-b", str(image.disk), str(overlay)], check=True)
    return launch(image, data, run_dir, timeout)


def launch(image: Image, data: Path, run_dir: Path, timeout: float = 900) -> Guest:
    """QEMU on ``run_dir``'s overlay as it is (:func:`boot` made it; :meth:`Guest.reboot`
    boots it again), the guest once its agent answers."""
    overlay = run_dir / "root.qcow2"
    command = [
        "qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-smp", str(CPUS),
        "-m", str(MEMORY_MIB), "-display", "none", "-monitor", "none",
        # the guest's page port on the host's loopback (restrict: no other network)
        "-nic", f"user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:"
                f"{page_port(run_dir)}-:{GUEST_PAGE_PORT}",
        "-no-reboot", "-serial", f"file:{run_dir / 'console.log'}",
        "-kernel", str(image.kernel), "-initrd", str(image.initrd),
        "-append", KERNEL_CMDLINE,
        "-drive", f"file={overlay},if=virtio,format=qcow2,cache=unsafe,discard=unmap",
        "-drive", f"file={data},if=virtio,format=raw,readonly=on",
        *agent_device(run_dir),
    ]
    return start_qemu(command, run_dir, timeout, lambda: launch(image, data, run_dir, timeout))


def agent_device(run_dir: Path) -> list[str]:
    """QEMU's options for the guest agent's virtio port, on ``run_dir/qga.sock``."""
    return ["-device", "virtio-serial",
            "-chardev", f"socket,path={run_dir / 'qga.sock'},server=on,wait=off,id=qga0",
            "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0"]


def start_qemu(command: list[str], run_dir: Path, timeout: float,
               relaunch: Callable[[], Guest] | None = None) -> Guest:
    """QEMU run as ``command`` (with :func:`agent_device`'s options), its output in
    ``run_dir/qemu.log``; the guest once its agent answers (the VM tier's amd64 guest,
    and the Raspberry Pi image's arm64 one, tests/image/)."""
    agent_path = run_dir / "qga.sock"
    with open(run_dir / "qemu.log", "wb") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT)
    agent = Agent(agent_path)
    guest = Guest(process, agent, run_dir, relaunch)

    def answering() -> bool:
        if process.poll() is not None:
            raise GuestError(f"QEMU exited {process.returncode} during boot: "
                             f"{(run_dir / 'qemu.log').read_text(errors='replace')[-2000:]}"
                             f"\nconsole:\n{guest.console()[-3000:]}")
        return agent_path.exists() and agent.sync()

    try:
        wait_for(answering, timeout=timeout, what="the guest agent to answer (boot)", every=1.0)
    except BaseException:
        guest.shutdown()
        raise
    return guest

