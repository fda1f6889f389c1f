"""The motor is off on every way out: signals, a SIGKILL (through ``shuffler-safe``), and a
pin factory that cannot load is one clear line.

The sim-gpio runs here keep their pin levels in a file (``hardware_sim.kept_pins``), as a
Raspberry Pi kernel keeps a released line at its last level, so what a killed process
leaves behind can be read after it is gone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import firmware_bridge
import hardware_sim
import shuffler
import shuffler_cli
from hardware_sim.motor_log import MOTOR_LOG_ENV
from shuffler.config import GpioConfig
from shuffler.service.client import ServiceClient
from tests.kept import kept_pins_env
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

MOTOR, BACKWARD, DIVERTER = "GPIO12", "GPIO13", "GPIO18"

def level(pins: Path, name: str) -> float | None:
    try:
        entry = json.loads(pins.read_text()).get(name)
    except (FileNotFoundError, ValueError):
        return None
    return entry["level"] if entry else None


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "SHUFFLER_CONFIG": "", "SHUFFLER_KEPT_PINS": str(tmp / "pins.json"),
           "PYTHONFAULTHANDLER": "1", "XDG_RUNTIME_DIR": str(tmp / "run"),
           "XDG_CONFIG_HOME": str(tmp / "config"), "XDG_STATE_HOME": str(tmp / "xdg-state")}
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "GPIOZERO_PIN_FACTORY", "RUNTIME_DIRECTORY"):
        env.pop(key, None)
    return {**env, **extra}


def hangup_as_in_a_terminal() -> None:
    """In the child: SIGHUP's default action, as in an SSH session. Run under ``nohup``
    (as CI may be) the child inherits SIGHUP ignored, and the CLI rightly leaves an
    ignored SIGHUP alone: ``nohup shuffler hand`` is asked to survive a hang-up."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start_pass(tmp: Path) -> subprocess.Popen:
    """A real-time sim-gpio pass (about 5 s for 24 cards): long enough to catch it."""
    return subprocess.Popen(
        [sys.executable, "-m", "shuffler", "--device", "sim-gpio", "--sim-speed", "1",
         "--state-dir", str(tmp / "state"), "pass"],
        env=env_for(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=hangup_as_in_a_terminal)


def motor_running(pins: Path) -> bool:
    return (level(pins, MOTOR) or 0) >= 0.99 * GpioConfig().motor_max_duty  # full speed


def signal_mid_pass(proc: subprocess.Popen, pins: Path, sig: int) -> tuple[int, str]:
    """Send ``sig`` once the motor runs at full speed; the exit code and stderr."""
    try:
        wait_for(lambda: motor_running(pins), what="the motor to run")
        proc.send_signal(sig)
        code = proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: say where it hangs
        proc.wait(5)
        raise AssertionError(proc.stderr.read()) from None
    finally:
        if proc.poll() is None:
            proc.kill()
    return code, proc.stderr.read() if proc.stderr else ""


def test_sigkill_mid_pass_leaves_the_motor_on_until_the_safe_command(tmp_path):
    pins = tmp_path / "pins.json"
    code, _ = signal_mid_pass(start_pass(tmp_path), pins, signal.SIGKILL)
    assert code == -signal.SIGKILL  # no Python ran: nothing stopped the motor
    assert level(pins, MOTOR) == GpioConfig().motor_max_duty  # kept: the motor turns on

    out = subprocess.run([sys.executable, "-m", "shuffler_cli.safe", "--device", "gpio"],
                         env=kept_pins_env(env_for(tmp_path)),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    kept = json.loads(pins.read_text())
    for name in (MOTOR, BACKWARD, DIVERTER):
        assert kept[name] == {"function": "output", "level": 0.0}, name
    assert "Traceback" not in out.stderr and "motor GPIO12" in out.stderr


def test_sighup_mid_pass_stops_the_motor_and_exits_cleanly(tmp_path):
    pins = tmp_path / "pins.json"
    # the SSH session running the CLI dropped
    code, stderr = signal_mid_pass(start_pass(tmp_path), pins, signal.SIGHUP)
    assert code == 128 + signal.SIGHUP and "Traceback" not in stderr, stderr
    assert level(pins, MOTOR) == 0.0 and level(pins, BACKWARD) == 0.0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGQUIT,
                                 signal.SIGUSR1, signal.SIGUSR2],
                         ids=lambda s: signal.Signals(s).name)
def test_the_service_stops_the_motor_and_exits_0_on_every_ending_signal(tmp_path, sig):
    """(SIGHUP is the service's reload: tests/test_reload.py.)"""
    pins, sock = tmp_path / "pins.json", tmp_path / "s.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "shuffler", "--device", "sim-gpio", "--sim-speed", "1",
         "--state-dir", str(tmp_path / "state"), "--socket", str(sock), "serve"],
        env=env_for(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: ServiceClient.connect(sock) is not None, what="the service")
    except AssertionError:
        proc.kill()
        raise
    client = ServiceClient.connect(sock)
    assert client is not None
    client.sock.sendall(b'{"cmd": "pass"}\n')
    code, stderr = signal_mid_pass(proc, pins, sig)
    assert code == 0 and "Traceback" not in stderr, stderr
    assert level(pins, MOTOR) == 0.0
    assert not sock.exists()


def one_line_exit_3(out: subprocess.CompletedProcess) -> str:
    # the first run's note on where the state is kept is not the error
    lines = [ln for ln in out.stderr.strip().splitlines()
             if not ln.startswith("shuffler: first run here:")]
    assert out.returncode == 3, out.stderr
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def test_gpio_without_lgpio_is_one_line_naming_the_cause(tmp_path):
    env = env_for(tmp_path, GPIOZERO_PIN_FACTORY="lgpio")
    out = subprocess.run([sys.executable, "-m", "shuffler", "--device", "gpio", "--state-dir",
                          str(tmp_path / "s"), "status"], env=env, capture_output=True,
                         text=True, timeout=60)
    line = one_line_exit_3(out)
    assert "GPIOZERO_PIN_FACTORY=lgpio" in line and "No module named 'lgpio'" in line
    assert "python3-lgpio" in line


def test_no_pin_library_names_each_fallback_reason(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shuffler", "--device", "gpio", "--state-dir",
                          str(tmp_path / "s"), "status"], env=env_for(tmp_path),
                         capture_output=True, text=True, timeout=60)
    line = one_line_exit_3(out)
    assert "Falling back from lgpio: No module named 'lgpio'" in line
    assert "Falling back from native" in line


def test_the_safe_command_without_lgpio_is_one_line_too(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shuffler_cli.safe", "--device", "gpio"],
                         env=env_for(tmp_path, GPIOZERO_PIN_FACTORY="lgpio"),
                         capture_output=True, text=True, timeout=60)
    assert "No module named 'lgpio'" in one_line_exit_3(out)


def test_the_safe_command_has_nothing_to_do_off_gpio(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shuffler_cli.safe"], env=env_for(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "no GPIO pins to drive" in out.stderr


def test_lgpio_busy_is_a_device_error_with_the_cause(monkeypatch):
    """lgpio raises its own ``lgpio.error``; lgpio is not installed here, so a pin factory
    raises an exception of that name and module, as lgpio's claim does."""
    from gpiozero import Device
    from gpiozero.pins.mock import MockFactory, MockPWMPin

    from shuffler.config import Config
    from shuffler.errors import DeviceError
    from shuffler.gpio.backend import open_gpio

    error = type("error", (Exception,), {"__module__": "lgpio"})

    class Busy(MockFactory):
        def pin(self, spec, **kwargs):
            if str(spec) == "12":
                raise error("GPIO busy")
            return super().pin(spec, **kwargs)

    monkeypatch.setattr(Device, "pin_factory", Busy(pin_class=MockPWMPin))
    with pytest.raises(DeviceError) as caught:
        open_gpio(Config())
    message = str(caught.value)
    assert message.startswith("cannot open the GPIO pins: lgpio: GPIO busy")
    assert "second shuffler" in message and "\n" not in message


DEFAULT_OUTPUTS = {"GPIO12": "motor", "GPIO13": "motor_backward", "GPIO18": "diverter",
                   "GPIO26": "buzzer"}
BROKEN = {"a TOML error": "[pins\nmotor = 22\n",
          "a pin clash": "[pins]\nmotor = 17\n",  # the touch sensor's pin
          "a bad value": "[pins]\nmotor = \"twelve\"\n"}


def safe(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shuffler_cli.safe", *args],
                          env=kept_pins_env(env_for(tmp)),
                          capture_output=True, text=True, timeout=60)


def all_high(pins: Path, names) -> None:
    """What a killed service leaves: its outputs high, kept by the kernel."""
    pins.write_text(json.dumps({n: {"function": "output", "level": 1.0} for n in names}))


@pytest.mark.parametrize("case", ["no config file", *BROKEN])
def test_the_safe_command_falls_back_to_the_default_pin_map_and_exits_0(tmp_path, case):
    pins, config = tmp_path / "pins.json", tmp_path / "config.toml"
    all_high(pins, DEFAULT_OUTPUTS)
    if case != "no config file":
        config.write_text(BROKEN[case])
    out = safe(tmp_path, "--config", str(config))
    assert out.returncode == 0, out.stderr
    kept = json.loads(pins.read_text())
    for name in DEFAULT_OUTPUTS:
        assert kept[name] == {"function": "output", "level": 0.0}, name
    assert "warning" in out.stderr and "default pin map" in out.stderr
    assert "Traceback" not in out.stderr and str(config) in out.stderr


@pytest.mark.parametrize("change", ["a pin changed", *BROKEN])
def test_the_safe_command_drives_the_pins_the_killed_service_drove(tmp_path, change):
    pins, config = tmp_path / "pins.json", tmp_path / "config.toml"
    config.write_text("[pins]\nmotor = 22\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "shuffler", "--config", str(config), "--device", "sim-gpio",
         "--sim-speed", "1", "--state-dir", str(tmp_path / "state"), "pass"],
        env=env_for(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (level(pins, "GPIO22") or 0) >= 0.99 * GpioConfig().motor_max_duty,
                 what="the motor on GPIO22")
        proc.kill()
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert level(pins, "GPIO22") == GpioConfig().motor_max_duty  # left running
    config.write_text("[pins]\nmotor = 23\n" if change == "a pin changed" else BROKEN[change])
    out = safe(tmp_path, "--config", str(config))
    assert out.returncode == 0, out.stderr
    assert level(pins, "GPIO22") == 0.0 and "motor GPIO22" in out.stderr
    assert "the pins the service drove" in out.stderr and "Traceback" not in out.stderr


ENDING = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
          signal.SIGUSR2]


def start_cli(tmp: Path, command: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "shuffler", "--device", "sim-gpio", "--sim-speed", "1",
         "--state-dir", str(tmp / "state"), command],
        env=env_for(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=hangup_as_in_a_terminal)


def motor_off_at(pins: Path) -> bool:
    return level(pins, MOTOR) in (None, 0.0) and level(pins, BACKWARD) in (None, 0.0)


@pytest.mark.parametrize("command", ["pass", "hand"])
@pytest.mark.parametrize("sig", ENDING, ids=lambda s: signal.Signals(s).name)
def test_every_ending_signal_mid_pass_stops_the_motor_without_a_traceback(tmp_path, sig,
                                                                          command):
    pins = tmp_path / "pins.json"
    code, stderr = signal_mid_pass(start_cli(tmp_path, command), pins, sig)
    assert code == 128 + sig and "Traceback" not in stderr, stderr
    assert motor_off_at(pins)


#: where a signal lands in start-up: every 7.5 ms of the first 0.3 s (the interpreter's
#: own start-up, then our imports, the config, the device opening), then later on
START_UP_OFFSETS = [round(k * 0.0075, 4) for k in range(41)] + [0.45, 0.6]
#: the project's own source folders: a traceback frame in any of them is ours
OURS = tuple(str(Path(module.__file__).resolve().parent) + os.sep
             for module in (shuffler, shuffler_cli, hardware_sim, firmware_bridge))


def frames_of_ours(stderr: str) -> list[str]:
    """The frames of a Python traceback (or a fatal error's frame dump) in our files."""
    return [f for f in re.findall(r'^\s*File "([^"]+)", line', stderr, flags=re.M)
            if str(Path(f).resolve()).startswith(OURS)]


def test_a_frame_of_ours_is_told_from_the_interpreters_own():
    ours = f'  File "{Path(shuffler.__file__).parent / "config.py"}", line 3, in <module>'
    assert frames_of_ours(f"Traceback (most recent call last):\n{ours}\n") != []
    theirs = ('Fatal Python error: init_import_site: Failed to import the site module\n'
              'Traceback (most recent call last):\n  File "<frozen site>", line 973, in '
              '<module>\n  File "/usr/lib/python3.11/pathlib.py", line 1, in <module>\n')
    assert frames_of_ours(theirs) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGQUIT, signal.SIGTERM],
                         ids=lambda s: signal.Signals(s).name)
def test_a_signal_during_start_up_is_a_quiet_exit(tmp_path, sig):
    """At every moment of start-up an ending signal is a quiet exit: 128 + N (our code
    had started), 0 (the pass was over) or -N (no handler of ours yet), and never a
    traceback through our files. Before any code of ours runs the interpreter is still
    starting: importing ``site`` and the editable install's ``.pth`` (which imports
    pathlib), then for ``-m`` runpy finding and compiling the package. A SIGINT there is
    Python's own KeyboardInterrupt: a traceback of ``<frozen site>``, ``<frozen runpy>``
    or importlib frames, exit -2 (or 1, "Fatal Python error: init_import_site" or
    "init_sys_streams", inside its own init); README, "Signals". That window is allowed;
    a frame of our files never is. Four processes at a time: the load widens every
    window."""
    offsets = START_UP_OFFSETS if sig == signal.SIGINT else START_UP_OFFSETS[::3]
    bad = []
    for first in range(0, len(offsets), 4):
        runs = []
        for k, after in enumerate(offsets[first:first + 4], start=first):
            (tmp_path / str(k)).mkdir()
            runs.append((after, time.monotonic(), start_cli(tmp_path / str(k), "pass")))
        for after, started, proc in sorted(runs, key=lambda r: r[0] + r[1]):
            time.sleep(max(0.0, started + after - time.monotonic()))
            proc.send_signal(sig)
        for after, _, proc in runs:
            _, stderr = proc.communicate(timeout=30)
            code = proc.returncode
            # "Fatal Python error: init_import_site" (or init_sys_streams), or "Could not
            # import runpy module" for -m: the interpreter's own init, before our code
            interpreters = (sig == signal.SIGINT and code == 1
                            and ("Fatal Python error: init_" in stderr
                                 or stderr.startswith("Could not import runpy module")))
            if frames_of_ours(stderr) or not (code in (128 + sig, -sig, 0) or interpreters):
                bad.append(f"at {after:.4f} s: exit {code}\n{stderr}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("command", ["pass", "hand"])
def test_ctrl_z_stops_the_motor_before_the_process_suspends(tmp_path, command):
    pins = tmp_path / "pins.json"
    proc = start_cli(tmp_path, command)
    try:
        wait_for(lambda: motor_running(pins), what="the motor to run")
        proc.send_signal(signal.SIGTSTP)
        wait_for(lambda: Path(f"/proc/{proc.pid}/stat").read_text().split()[2] == "T",
                 what="the process to be suspended")
        assert motor_off_at(pins)  # off before it was suspended
        time.sleep(0.5)
        assert motor_off_at(pins)
        proc.send_signal(signal.SIGCONT)  # fg: the pass reports itself stopped
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3 and "Traceback" not in stderr, stderr
    assert "stopped" in stderr and motor_off_at(pins)


def motor_line(log: Path) -> list[tuple[float, bool]]:
    try:
        rows = log.read_text().split("\n")
    except FileNotFoundError:
        return []
    return [(float(t), s == "on") for t, s in (r.split() for r in rows if r.strip())]


@pytest.mark.parametrize("command", ["pass", "hand"])
@pytest.mark.parametrize("device", ["sim-serial", "sim-avr"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT],
                         ids=lambda s: signal.Signals(s).name)
def test_every_ending_signal_stops_the_microcontrollers_motor(tmp_path, sig, device, command):
    if device == "sim-avr":
        from tests.test_touch_told import avr_missing

        if why := avr_missing():
            pytest.skip(why)
    log = tmp_path / "motor.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "shuffler", "--device", device, "--sim-speed", "1",
         "--state-dir", str(tmp_path / "state"), command],
        env=env_for(tmp_path, **{MOTOR_LOG_ENV: str(log)}), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=hangup_as_in_a_terminal)
    try:
        wait_for(lambda: any(on for _, on in motor_line(log)), what="the MCU's motor to run")
        time.sleep(0.3)  # mid-pass
        sent = time.monotonic()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig and "Traceback" not in stderr, stderr
    line = motor_line(log)
    assert line and not line[-1][1], line  # the MCU's motor is off
    off_at = min(t for t, on in line if not on and t >= sent)
    assert off_at - sent <= 0.2 + 0.3  # one card interval at speed 1, and the link's ack


SELFTEST_ONLY_MOTOR = [a for step in ("battery", "touch", "tray", "pile_left", "pile_right",
                                      "beam", "light", "buzzer", "flap")
                       for a in ("--skip", step)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGQUIT],
                         ids=lambda s: signal.Signals(s).name)
def test_an_ending_signal_while_selftest_turns_the_motor_stops_it(tmp_path, sig):
    """The interactive motor step (the builder answers y at the prompt: hands clear) is
    signalled while the roller turns: the pin goes low and the command ends quietly."""
    pins = tmp_path / "pins.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "shuffler", "--device", "sim-gpio", "--sim-speed", "1",
         "--state-dir", str(tmp_path / "state"), "selftest", *SELFTEST_ONLY_MOTOR],
        env=env_for(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=hangup_as_in_a_terminal)
    try:
        assert proc.stdin is not None
        proc.stdin.write("y\n")  # hands clear: run it (the stdin stays open: no EOF)
        proc.stdin.flush()
        wait_for(lambda: (level(pins, MOTOR) or 0) > 0.05 or (level(pins, BACKWARD) or 0)
                 > 0.05, what="the selftest's motor to turn")
        proc.send_signal(sig)
        code = proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert code == 128 + sig and "Traceback" not in stderr, stderr
    assert motor_off_at(pins), json.loads(pins.read_text())
