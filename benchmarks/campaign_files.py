"""The campaign's file sections (#22): nothing is lost, whatever happens to the disk.

- ``files <scenario>``: every file operation that writes in the state folder (open for
  writing, write, fsync, replace, rename, unlink, ftruncate, pwrite, mkdir) of ``pass``,
  ``hand``, ``clear`` and a service's hand, each in turn killed just before it, killed
  just after it (``os._exit``: no ``finally`` runs, as SIGKILL), failed once with EIO, or
  failed with ENOSPC from there on. Each run is a forked child running the real CLI;
  afterwards the state file must pass its schema, every whole audit record written must
  still be there, no temporary file may survive the next command, and the next pass
  must be refused until ``clear`` whenever cards may be in the machine (a pass whose
  motor started and whose end was not written, a jam, a ``clear`` that did not land).
- ``torn audit``: the last audit line cut at many places; the next pass's record and
  every whole one before it must read back.
- ``tmpfs``: a real 1 MiB tmpfs filled while a pass runs (root only; skipped with the
  reason otherwise): a jam must be exit 3 and still latched once space comes back.
- ``symlinks``: each state-folder file a symlink to a file outside; no command may
  change the target.
- ``socket``: a socket squatted by another user (root only) must be refused, exit 3,
  naming the owner; 40 idle connections must not stop ``status``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from campaign import SHUFFLER, Section, cmdline, exit_outcome, invoke_cli, scratch, service

KILLED = 137
MODES = ("kill before", "kill after", "EIO", "ENOSPC")
#: the CLI arguments of each scenario (the state folder and a fast simulator are added)
SCENARIOS: dict[str, list[str]] = {
    "pass": ["pass"],
    "pass jam": ["--sim-fault", "jam:13", "pass"],
    "hand": ["hand", "--passes", "2"],
    "hand jam": ["--sim-fault", "jam:13", "hand", "--passes", "2"],
    "clear": ["clear"],
}
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Injector:
    """Wraps the ``os`` calls that change files under ``folder``; at the ``at``-th one
    (1-based) it kills the process or fails the call, per ``mode``. Reports on ``pipe``:
    ``M`` when a pass's motor starts, ``S`` when a state file replace landed, ``A`` when
    an audit record's write returned."""

    def __init__(self, folder: Path, at: int, mode: str | None, pipe: int) -> None:
        self.folder, self.at, self.mode, self.pipe = str(folder), at, mode, pipe
        self.real = {name: getattr(os, name) for name in
                     ("open", "write", "fsync", "replace", "rename", "unlink", "ftruncate",
                      "pwrite", "mkdir", "close")}
        self.fds: dict[int, str] = {}
        self.count = 0
        self.failing = False
        #: the operation count each time a pass's motor started
        self.motor: list[int] = []

    def mine(self, path) -> bool:
        try:
            return os.fspath(path).startswith(self.folder)
        except TypeError:
            return False

    def tell(self, what: bytes) -> None:
        self.real["write"](self.pipe, what)

    def step(self, name: str, where: str, call: Callable[[], object]) -> object:
        self.count += 1
        hit = self.count == self.at
        if hit and self.mode == "ENOSPC":
            self.failing = True  # the disk stays full; only freeing space (unlink) works
        if (hit and self.mode == "EIO") or (self.failing and name != "unlink"):
            code = errno.EIO if self.mode == "EIO" else errno.ENOSPC
            raise OSError(code, os.strerror(code), where)
        if hit and self.mode == "kill before":
            os._exit(KILLED)
        result = call()
        if name == "replace" and where.endswith("/state.json"):
            self.tell(b"S")
        if name == "write" and where.endswith("/audit.jsonl"):
            self.tell(b"A")
        if hit and self.mode == "kill after":
            os._exit(KILLED)
        return result

    def install(self) -> None:
        real = self.real

        def open_(path, flags, mode=0o777, *, dir_fd=None):
            if not self.mine(path) or not flags & WRITING:
                return real["open"](path, flags, mode, dir_fd=dir_fd)
            fd = self.step("open", os.fspath(path),
                           lambda: real["open"](path, flags, mode, dir_fd=dir_fd))
            self.fds[fd] = os.fspath(path)  # type: ignore[index]
            return fd

        def by_fd(name):
            def wrapped(fd, *args):
                if fd not in self.fds:
                    return real[name](fd, *args)
                return self.step(name, self.fds[fd], lambda: real[name](fd, *args))
            return wrapped

        def by_path(name, arg=0):
            def wrapped(*args, **kw):
                if not self.mine(args[arg]):
                    return real[name](*args, **kw)
                return self.step(name, os.fspath(args[arg]), lambda: real[name](*args, **kw))
            return wrapped

        def close(fd):
            self.fds.pop(fd, None)
            return real["close"](fd)

        os.open = open_  # type: ignore[assignment]
        for name in ("write", "fsync", "ftruncate", "pwrite"):
            setattr(os, name, by_fd(name))
        os.replace = by_path("replace", 1)  # type: ignore[assignment]
        os.rename = by_path("rename", 1)  # type: ignore[assignment]
        os.unlink = by_path("unlink")  # type: ignore[assignment]
        os.mkdir = by_path("mkdir")  # type: ignore[assignment]
        os.close = close  # type: ignore[assignment]


def _cli_args(state: Path, args: list[str]) -> list[str]:
    return ["--no-service", "--state-dir", str(state), "--sim-speed", "1e6", *args]


def _mark_motor(injector: Injector) -> None:
    """Tell the parent when a pass's motor starts (every pass here runs on SimDevice)."""
    from hardware_sim.device import SimDevice

    real = SimDevice.run_pass

    def run_pass(self, *args, **kw):
        injector.tell(b"M")
        injector.motor.append(injector.count)
        return real(self, *args, **kw)

    SimDevice.run_pass = run_pass  # type: ignore[method-assign]


def child_run(state: Path, args: list[str], at: int, mode: str | None,
              serve: Path | None = None, log: Path | None = None
              ) -> tuple[int, bytes, dict]:
    """Fork; the child runs the CLI with the injector; (exit code, reports, and the
    operation count with the counts at which a motor started, if it got to the end)."""
    read, write = os.pipe()
    count_r, count_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the real CLI, as a dealer would run it
        code = 1
        try:
            os.close(read)
            os.close(count_r)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            err = os.open(log or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(err, 2)
            os.environ["SHUFFLER_CONFIG"] = ""
            injector = Injector(state, at, mode, write)
            _mark_motor(injector)
            injector.install()
            from shuffler_cli.main import main

            argv = _cli_args(state, args)
            if serve is not None:
                argv = ["--socket", str(serve), *argv]
            try:
                main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            injector.real["write"](count_w, json.dumps(
                {"count": injector.count, "motor": injector.motor}).encode())
        finally:
            os._exit(code)
    os.close(write)
    os.close(count_w)
    if serve is not None:
        _drive_service(pid, serve)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    reports = _drain(read)
    counts = _drain(count_r)
    return code, reports, json.loads(counts) if counts else {"count": 0, "motor": []}


def _drain(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _drive_service(pid: int, sock: Path) -> None:
    """Ask the service in the child for a hand, then stop it as systemctl would (the
    child is reaped by the caller)."""
    from shuffler.service.client import ServiceClient

    deadline = time.monotonic() + 20
    client = None
    while client is None and time.monotonic() < deadline and not _ended(pid):
        client = ServiceClient.connect(sock, timeout=5)
        if client is None:
            time.sleep(0.01)
    if client is not None:
        with contextlib.suppress(Exception):  # the service may die mid-hand: that is the test
            client.sock.settimeout(30)
            client.request("hand", None, passes=2)
        client.close()
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 15
    while not _ended(pid) and time.monotonic() < end:
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        if not _ended(pid):
            os.kill(pid, signal.SIGKILL)


def _ended(pid: int) -> bool:
    """Whether the child has exited (a zombie waiting to be reaped, or gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def _records(state: Path) -> list[dict]:
    from shuffler.store.audit import AuditLog

    return list(AuditLog(state / "audit.jsonl").read())


def must_refuse(scenario: str, reports: bytes) -> bool:
    """Whether cards may be in the machine after the run: a pass whose motor started
    and whose end reached neither the audit log nor the state file (the journal says
    how a pass ended: one it records as clean left the cards on the piles), any pass of
    a jam scenario, a clear that never landed."""
    if scenario == "clear":
        return b"S" not in reports
    if "jam" in scenario:
        return b"M" in reports
    after = reports[reports.rfind(b"M"):] if b"M" in reports else None
    return after is not None and b"S" not in after and b"A" not in after


def judge(state: Path, scenario: str, reports: bytes, code: int, before: int,
          log: Path) -> tuple[str, str]:
    """The outcome of one injected run, from what it left behind."""
    from shuffler.store.state import Invalid, check_state

    err = log.read_text(errors="replace") if log.exists() else ""
    if "Traceback" in err or code not in (0, 2, 3, 4, KILLED, 128 + signal.SIGTERM):
        return "traceback", f"exit {code}: {err[-400:]}"
    raw = (state / "state.json").read_bytes() if (state / "state.json").exists() else None
    if raw is not None:
        try:
            check_state(json.loads(raw))
        except (Invalid, ValueError) as e:
            return "wrong", f"state.json fails its schema after the run: {e}"
    elif before:
        return "lost latch", "state.json is gone"
    whole = len(_records(state))
    if whole < before + reports.count(b"A"):
        return "lost record", (f"{before} records before, {reports.count(b'A')} appended, "
                               f"{whole} whole afterwards")
    env = {"SHUFFLER_CONFIG": "", "SHUFFLER_NO_SERVICE": "1"}
    status, out = invoke_cli(_cli_args(state, ["--json", "status"]), env)
    if status not in ("ok", "clean error"):
        return status, f"status after the run: {out[-300:]}"
    nxt, out = invoke_cli(_cli_args(state, ["pass"]), env)
    if nxt == "traceback":
        return nxt, out[-300:]
    if list(state.glob(".state.json.*")):
        return "wrong", "a temporary state file survived the next command"
    if must_refuse(scenario, reports) and nxt == "ok":
        return "lost latch", f"cards may be in the machine, yet the next pass ran ({scenario})"
    return ("ok", "") if status == "ok" or raw is None else ("clean error", out[-300:])


def _prepare(state: Path, scenario: str) -> int:
    """The state before the run (a latched jam for ``clear``); the whole records."""
    state.mkdir(parents=True, exist_ok=True)
    for old in state.iterdir():
        old.unlink()
    if scenario == "clear":
        env = {"SHUFFLER_CONFIG": "", "SHUFFLER_NO_SERVICE": "1"}
        invoke_cli(_cli_args(state, ["--sim-fault", "jam:13", "pass"]), env)
    return len(_records(state))


def run_files(scenario: str, full: bool) -> Section:
    """Every writing file operation of ``scenario`` under every mode (quick: a few)."""
    section = Section(f"files {scenario}")
    folder = scratch("campaign-files-")
    state, log = folder / "state", folder / "child.log"
    serve = folder / "s.sock" if scenario == "service hand" else None
    args = ["serve"] if serve else SCENARIOS[scenario]
    _prepare(state, scenario)
    _, _, dry = child_run(state, args, 0, None, serve, log)  # count the operations
    total = dry["count"]
    # quick: the first, the first after a motor started, the last
    after_motor = min(dry["motor"][0] + 1, total) if dry["motor"] else total // 2 or 1
    points = range(1, total + 1) if full else sorted({1, after_motor, total})
    for at in points:
        for mode in MODES:
            before = _prepare(state, scenario)
            code, reports, _ = child_run(state, args, at, mode, serve, log)
            kind = "hand" if serve else scenario
            outcome, detail = judge(state, kind, reports, code, before, log)
            section.add(outcome, f"{scenario}: op {at}/{total} {mode}",
                        f"python benchmarks/campaign.py --only files  # {scenario} op {at} "
                        f"{mode}: " + cmdline(args), detail)
    return section


# -- torn tails, a real full disk, symlinks, the socket ---------------------------------


def run_torn(full: bool) -> Section:
    section = Section("torn audit")
    folder = scratch("campaign-torn-")
    env = {"SHUFFLER_CONFIG": "", "SHUFFLER_NO_SERVICE": "1"}
    record = json.dumps({"id": 1, "counted": 24, "expected": 24, "fault": None}).encode()
    cuts = range(1, len(record)) if full else (1, len(record) // 2, len(record) - 1)
    for cut in cuts:
        state = folder / f"s{cut}"
        state.mkdir()
        whole = json.dumps({"id": 0, "counted": 24, "expected": 24, "fault": None}).encode()
        (state / "audit.jsonl").write_bytes(whole + b"\n" + record[:cut])
        (state / "state.json").write_text(json.dumps({"version": 1, "fault": None,
                                                      "next_pass_id": 2}))
        outcome, out = invoke_cli(_cli_args(state, ["pass"]), env)
        ids = [e.get("id") for e in _records(state)]
        if outcome == "ok" and ids != [0, 2]:
            outcome, out = "lost record", f"records after the pass: {ids}"
        section.add(outcome, f"the last line cut after {cut} bytes",
                    cmdline(_cli_args(state, ["pass"])), out)
    return section


def _fill(folder: Path) -> None:
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 16, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, bytes(size))
    finally:
        os.close(fd)


def run_tmpfs(full: bool) -> Section:
    section = Section("tmpfs full")
    if os.geteuid() != 0:
        section.skipped = "needs root to mount a tmpfs"
        return section
    folder = scratch("campaign-tmpfs-")
    delays = (0.0, 0.3, 1.0, 2.0, 3.0, 4.5) if full else (1.0,)
    for delay in delays:
        for fault in (["--sim-fault", "jam:13"], []):
            mnt = folder / f"m{len(section.counts) + section.tried}"
            mnt.mkdir()
            if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                              capture_output=True).returncode:
                section.skipped = "mount -t tmpfs failed"
                return section
            try:
                section.add(*_full_disk_case(mnt, fault, delay),
                            cmdline([*fault, "pass"]) + f" & sleep {delay}; fill the disk")
            finally:
                subprocess.run(["umount", str(mnt)], check=False)
    return section


def _full_disk_case(mnt: Path, fault: list[str], delay: float) -> tuple[str, str]:
    env = {**os.environ, "SHUFFLER_CONFIG": ""}
    child = subprocess.Popen([SHUFFLER, "--no-service", "--state-dir", str(mnt), "--sim-speed",
                              "4", *fault, "pass"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 20
    while not (mnt / "state.json").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(delay)
    _fill(mnt)
    err = child.communicate(timeout=60)[1]
    what = f"{'jam' if fault else 'clean'} pass, disk filled {delay} s in"
    if "Traceback" in err:
        return "traceback", err[-400:]
    if fault and child.returncode != 3:
        return "lost latch", f"{what}: exit {child.returncode}, not 3: {err[-300:]}"
    (mnt / "filler").unlink()
    status = subprocess.run([SHUFFLER, "--no-service", "--state-dir", str(mnt), "--json",
                             "status"], capture_output=True, text=True, env=env, timeout=60)
    latched = status.returncode == 0 and json.loads(status.stdout).get("fault")
    if fault and not latched:
        return "lost latch", f"{what}: once space came back, status says {status.stdout}"
    return exit_outcome(0 if fault else child.returncode, err), ""


def run_symlinks(full: bool) -> Section:
    section = Section("symlinks")
    folder = scratch("campaign-links-")
    env = {"SHUFFLER_CONFIG": "", "SHUFFLER_NO_SERVICE": "1"}
    commands = (["status"], ["pass"], ["clear"], ["hand", "--passes", "2"]) if full else (
        ["pass"],)
    for name in ("state.json", "audit.jsonl", "machine.lock", ".reserve"):
        for command in commands:
            state = folder / f"{name}-{command[0]}"
            state.mkdir()
            target = folder / f"target-{name}-{command[0]}"
            target.write_text("precious\n")
            (state / name).symlink_to(target)
            outcome, out = invoke_cli(_cli_args(state, command), env)
            if target.read_text() != "precious\n":
                outcome, out = "wrong", f"{name} was followed: the target changed"
            section.add(outcome, f"{name} a symlink, {' '.join(command)}",
                        cmdline(_cli_args(state, command)), out)
    return section


def run_socket(full: bool) -> Section:
    section = Section("socket")
    folder = scratch("campaign-sock-")
    folder.chmod(0o755)
    env = {"SHUFFLER_CONFIG": "", "SHUFFLER_STATE_DIR": str(folder / "state")}
    if os.geteuid() == 0:
        open_dir = folder / "open"
        open_dir.mkdir()
        open_dir.chmod(0o777)
        path = open_dir / "shuffler.sock"
        with _squatter(path) as owner:
            outcome, out = invoke_cli(["--socket", str(path), "--json", "status"], env)
        if outcome != "clean error" or f"'{owner}'" not in out:
            outcome = "wrong" if outcome != "traceback" else outcome
        else:
            outcome = "ok"
        section.add(outcome, "a socket squatted by another user", "shuffler --socket "
                    f"{path} status", out)
    else:
        section.skipped = "the squatter needs root"
    floods = (40, 64, 200) if full else (40,)
    with service(folder) as (_child, sock):
        for n in floods:
            idle = []
            try:
                for _ in range(n):
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(str(sock))
                    idle.append(s)
                start = time.monotonic()
                proc = subprocess.run([SHUFFLER, "--socket", str(sock), "--json", "status"],
                                      capture_output=True, text=True, timeout=60,
                                      env={**os.environ, **env})
                took = time.monotonic() - start
                outcome = exit_outcome(proc.returncode, proc.stderr)
                if outcome == "ok" and took > 10:
                    outcome = "hang"
                section.add(outcome, f"{n} idle connections, then status ({took:.1f} s)",
                            f"{n} x socat UNIX-CONNECT:{sock} & shuffler status", proc.stderr)
            finally:
                for s in idle:
                    s.close()
    return section


@contextlib.contextmanager
def _squatter(path: Path) -> Iterator[str]:
    """A process of ``nobody`` listening on ``path`` and answering like a service (the
    suite's squatter, tests/test_socket_trust.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.test_socket_trust import squat

    nobody = pwd.getpwnam("nobody")
    pid = squat(path, nobody.pw_uid, nobody.pw_gid)
    try:
        yield nobody.pw_name
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def plan_files(full: bool) -> list[tuple[str, Callable[..., Section], tuple]]:
    jobs: list[tuple[str, Callable[..., Section], tuple]] = [
        ("files", run_files, (scenario, full)) for scenario in (*SCENARIOS, "service hand")]
    jobs += [("files", fn, (full,)) for fn in (run_torn, run_tmpfs, run_symlinks, run_socket)]
    return jobs


if __name__ == "__main__":
    sys.exit("run it through benchmarks/campaign.py --only files")
