"""The console script's start (cli/start.py) and the fast ``stop`` (cli/quickstop.py):
Ctrl-C taken over by the entry's first statement, a SIGINT the shell ignored left
ignored, and the config scanned for the service's socket where TOML cannot read it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib

import pytest

from shuffler_cli import quickstop
from tests.cli import SHUFFLER

#: sends SIGINT to itself when the entry imports its first module of ours: the moment
#: right after the entry's first statements
INTERRUPT_AT_FIRST_IMPORT = """
import os, signal, sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "shuffler.control.signals":
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
sys.argv = ["shuffler", "--no-service", "status"]
from shuffler_cli.start import main
main()
"""


def test_a_ctrl_c_as_the_entry_starts_importing_is_a_quiet_exit(tmp_path):
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-c", INTERRUPT_AT_FIRST_IMPORT], env=env,
                          capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 130, done
    assert done.stderr == "shuffler: interrupted while starting; nothing was started\n"
    assert not (tmp_path / "state").exists()


def test_a_sigint_the_shell_ignored_stays_ignored_through_start_up(tmp_path):
    """A script's ``shuffler status &`` runs with SIGINT ignored: the entry leaves it so
    (it takes over Python's own handler only), and the command finishes, exit 0."""
    env = {**os.environ, "SHUFFLER_STATE_DIR": str(tmp_path / "state"),
           "SHUFFLER_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")
    proc = subprocess.Popen([SHUFFLER, "--no-service", "status"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.005)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "device: simulated shuffler" in out and "interrupted" not in err


def test_the_scan_reads_the_socket_of_a_file_toml_cannot_read(tmp_path):
    broken = tmp_path / "c.toml"
    broken.write_text('[hand\ncards = 24\n[ service ]  # the service\n'
                      'socket = "/run/x.sock"  # here\nuser = \'dealer\'\n[pins]\nsocket = "no"\n')
    assert quickstop.service_keys([broken]) == {"socket": "/run/x.sock", "user": "dealer"}


def test_the_scan_takes_nothing_it_cannot_read_whole(tmp_path):
    """An escape, an unclosed string, a value then more words, a key outside [service]:
    nothing is guessed; a later file's key wins over an earlier's."""
    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    first.write_text('[oops\n[service]\nsocket = "/a.sock"\nuser = "root"\n')
    second.write_text('[oops\nsocket = "/top.sock"\n[service]\nsocket = "/b\\u0041.sock"\n'
                      'user = "half\n')
    assert quickstop.service_keys([first, second]) == {"socket": "/a.sock", "user": "root"}
    second.write_text('[oops\n[service]\nsocket = "/b.sock" and more\n')
    assert quickstop.service_keys([second]) == {}


@pytest.mark.parametrize("text", [
    'service.socket = "/d.sock"\n',
    'service = {socket = "/i.sock", user = "0"}\n',
    '[service]\nsocket = "/a\\u0062.sock"\n',
    'note = """\n[service]\nsocket = "/fake.sock"\n"""\n[service]\nuser = "x"\n',
    '[ "service" ]\nsocket = \'/q.sock\'\n',
    '[service] # the service\nsocket = "/s.sock" # its socket\nuser = "7"\n[pins]\n',
    '[hand]\ncards = 24\n',
])
def test_a_config_toml_reads_gives_what_toml_reads(tmp_path, text):
    """Dotted keys, inline tables, escapes, a multi-line string that looks like the
    table, a quoted header, comments: whether scanned or parsed, TOML's answer."""
    config = tmp_path / "c.toml"
    config.write_text(text)
    table = tomllib.loads(text).get("service", {})
    assert quickstop.service_keys([config]) == {k: table[k] for k in ("socket", "user")
                                                if k in table}


def test_a_fifo_or_a_huge_file_is_never_read(tmp_path):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.toml"
    huge.write_text('[service]\nsocket = "/h.sock"\n' + "#" * (1 << 20))
    assert quickstop.service_keys([fifo, huge]) == {}


def test_anything_but_a_plain_stop_is_the_full_command_lines():
    env: dict[str, str] = {}
    assert quickstop.parse(["--json", "stop", "--socket=/s"], env) == {
        "json": True, "socket": "/s", "config": None, "state-dir": None}
    for argv in (["stop", "-v"], ["stop", "--help"], ["--socket", "stop"], ["stop", "stop"],
                 ["--device", "sim", "stop"], ["stop", "--config="], ["--json=1", "stop"],
                 ["status"], ["stop", "--socket", "/" + "s" * 107]):
        assert quickstop.parse(argv, env) is None, argv
    for variable in ("SHUFFLER_NO_SERVICE", "SHUFFLER_DEVICE", "SHUFFLER_SIM_FAULT",
                     "SHUFFLER_VERBOSE", "SHUFFLER_LOG_JSON"):
        assert quickstop.parse(["stop"], {variable: "1"}) is None, variable
    assert quickstop.parse(["stop"], {"SHUFFLER_JSON": "maybe"}) is None
    assert quickstop.parse(["stop"], {"SHUFFLER_JSON": "yes"})["json"] is True

