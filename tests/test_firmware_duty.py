"""The Nano build cannot overdrive its motor, and reads its battery whatever its 5 V is
(issue 46), on the very ELF that would be flashed, in simavr.

The duty is measured on the motor driver's pins themselves: the harness times every
edge of D5 and D6 to the cycle ("pwm forward|reverse duty=..." lines), so what is
asserted is the waveform the DRV8833 would see, not a register. The battery reading is
taken with simavr's AVcc (the ADC's reference) set per case, as USB gives a Nano
anything from 4.4 to 5.25 V."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace

import pytest

from firmware_bridge import messages as wire
from firmware_bridge.device import config_message, default_timings
from firmware_bridge.framing import Frame, encode_frame
from firmware_bridge.messages import OLD_HOST_DUTY_PCT, Config
from hardware_sim.sim_avr import FIRMWARE_DIR, SimAvr, serial_on
from hardware_sim.virtual_mcu import duty_of, nano_battery_mv
from shuffler.core.planning import coin_plan
from shuffler.device.contract import FaultKind, FaultLimits

from .old_firmware import firmware_before
from .test_firmware import MISSING
from .test_firmware_link import RawHost

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]

FAST = ("--card-rate=50", "--spinup=0.01", "--flap-travel=0.01", "--frame-scale=0.1")


def new_chip(*args: str) -> SimAvr:
    chip = SimAvr("--cards=24", *FAST, *args)
    chip.record("pwm ")
    chip.record("motor ")
    return chip


def pin_duty(pct: int) -> float:
    """The duty the firmware's cap gives on the pin: (pct * 256 / 100) counts of 256."""
    return duty_of(1.0, pct)


@dataclass
class Waveform:
    """The harness's pwm lines, by pass state: the ramp (forward, below the top), the
    run (forward at the top), the reverse (backing a jammed card out) and after a stop."""

    top: float
    ramp: list[float] = field(default_factory=list)
    run: list[float] = field(default_factory=list)
    reverse: list[float] = field(default_factory=list)
    stop: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, chip: SimAvr, top: float, stopped_at: float | None = None) -> Waveform:
        """Every pwm line so far; those at or after ``stopped_at`` (the chip's ms) are the
        stop's."""
        w = cls(top)
        for line in chip.recorded["pwm "]:
            _, pin, duty_f, t_f = line.split()
            duty, t = float(duty_f.split("=")[1]), float(t_f.split("=")[1])
            if stopped_at is not None and t >= stopped_at:
                w.stop.append(duty)
            elif pin == "reverse":
                if duty:
                    w.reverse.append(duty)
            elif duty and duty < top - 0.0005:
                w.ramp.append(duty)
            elif duty:
                w.run.append(duty)
        return w

    def table(self) -> str:
        def most(values: list[float]) -> str:
            return f"{max(values):.4f}" if values else "-"
        return (f"ramp {most(self.ramp)} ({len(self.ramp)} readings), run {most(self.run)}, "
                f"reverse {most(self.reverse)}, after stop {most(self.stop)}")


def state_ms(chip: SimAvr) -> float:
    return float(chip.state()["t"])


@pytest.mark.parametrize("pct", [63, 40, 100])
def test_the_motor_duty_never_passes_the_cap_in_config_in_any_pass_state(pct):
    """A pass with a jam at card 5 that a reverse frees (ramp, run, reverse, ramp, run),
    then a pass stopped in the middle: the duty measured on the pins never goes above the
    CONFIG's cap, and the soft start's top is the cap."""
    chip = new_chip("--fault=jam:5:1")
    timings = replace(default_timings().quickened(0.1), max_duty=pct / 100)
    dev = serial_on(chip, limits=FaultLimits(jam_seconds=0.1, reverse_seconds=0.1),
                    timings=timings)
    try:
        assert dev.config.max_duty_pct == pct
        report = dev.run_pass(coin_plan(24, random.Random(1)))
        assert report.fault is None and report.counted == 24 and report.retries == 1, report
        chip.command("gather")

        def stop_at(counted, expected):
            if counted == 8:
                dev.stop()
        stopped = dev.run_pass(coin_plan(24, random.Random(2)), stop_at)
        assert stopped.fault is not None and stopped.fault.kind is FaultKind.STOPPED
        asked = state_ms(chip)  # the STOP has been acknowledged: the motor is off
        time.sleep(0.2)  # the pin stays low for all the periods after
        assert float(chip.state()["motor"]) == 0
        # the stop: from the motor line going off on it (the chip's time) on
        stopped_at = max(float(line.split("t=")[1].split()[0])
                         for line in chip.recorded["motor "]
                         if line.startswith("motor off") and
                         float(line.split("t=")[1].split()[0]) <= asked)
    finally:
        dev.close()
    top = pin_duty(pct)
    w = Waveform.of(chip, top, stopped_at)
    print(f"cap {pct} %: {w.table()}")
    assert w.run and max(w.run) == pytest.approx(top, abs=1e-4)  # the ramp's top is the cap
    assert top <= pct / 100
    assert len({round(d, 2) for d in w.ramp}) >= 4  # the soft start's steps below it
    assert max(w.ramp + w.run + w.reverse) <= pct / 100
    assert w.reverse and max(w.reverse) <= 0.6 * pct / 100 + 1 / 256  # backing out at 60 %
    assert w.stop == [0.0] * len(w.stop) and w.stop  # and off after the stop


def raw_session(host: RawHost, config: Config | bytes) -> int:
    """HELLO, then ``config`` (a payload as bytes: as an older host packs it)."""
    host.send(wire.Hello(wire.PROTOCOL_MAJOR, wire.PROTOCOL_MINOR))
    assert host.pump(10.0, lambda: any(isinstance(m, wire.HelloReply) for _, m in host.got))
    if isinstance(config, bytes):
        host.seq = host.seq % 255 + 1
        host.port.write(encode_frame(Frame(host.seq, wire.Msg.CONFIG, config)))
        return host.seq
    return host.send(config)


def run_raw_pass(host: RawHost, pass_id: int, during=None) -> None:
    host.send(wire.Pass(pass_id, 24, tuple(coin_plan(24, random.Random(pass_id)).labels)))
    end = time.monotonic() + 20
    while time.monotonic() < end and not [d for d in host.done() if d.pass_id == pass_id]:
        host.turn()
        if during is not None:
            during()
            during = None
    assert [d for d in host.done() if d.pass_id == pass_id], "no PASS_DONE"


def config_of(pct: int) -> Config:
    return config_message(FaultLimits(), 5.0,
                          replace(default_timings().quickened(0.1), max_duty=pct / 100))


def test_an_old_hosts_config_without_a_cap_gets_the_safe_default():
    """A 2.1 host's CONFIG (23 bytes, no max_duty_pct) is taken, with the default cap:
    the BOM's 6 V motor on the highest block any backend accepts."""
    chip = new_chip()
    host = RawHost(chip.path)
    try:
        seq = raw_session(host, config_of(100).pack(minor=1))  # as a 2.1 host packs it
        assert host.pump(10.0, lambda: host.acked(seq))
        assert host.pump(5.0, lambda: any(isinstance(m, wire.StatusReply) and m.configured
                                          for _, m in host.got))
        run_raw_pass(host, 11)
    finally:
        host.port.close()
        chip.close()
    w = Waveform.of(chip, pin_duty(OLD_HOST_DUTY_PCT))
    print(f"a 2.1 host's CONFIG (default {OLD_HOST_DUTY_PCT} %): {w.table()}")
    assert max(w.run) == pytest.approx(pin_duty(OLD_HOST_DUTY_PCT), abs=1e-4)
    assert max(w.ramp + w.run) <= OLD_HOST_DUTY_PCT / 100 <= 0.56


def test_a_hostile_host_never_raises_the_duty_past_the_cap_it_set():
    """Configured at 40 %: a CONFIG asking 255 % is dropped unacknowledged (its range), a
    CONFIG asking 100 % in the middle of a pass is not taken (a pass is running), and the
    pass and the next run at 40 % still."""
    chip = new_chip("--cards=48")
    host = RawHost(chip.path)
    try:
        seq = raw_session(host, config_of(40))
        assert host.pump(10.0, lambda: host.acked(seq))
        bad = host.send(replace(config_of(40), max_duty_pct=255))
        host.pump(1.0)
        assert not host.acked(bad)  # broke its declaration: never taken

        def mid_pass() -> None:
            host.pump(0.15)  # the motor at its top
            host.send(replace(config_of(40), max_duty_pct=100))
        run_raw_pass(host, 21, during=mid_pass)
        run_raw_pass(host, 22)
    finally:
        host.port.close()
        chip.close()
    w = Waveform.of(chip, pin_duty(40))
    print(f"hostile host, cap 40 %: {w.table()}")
    assert max(w.ramp + w.run + w.reverse) <= 0.40
    assert max(w.run) == pytest.approx(pin_duty(40), abs=1e-4)


@pytest.mark.parametrize("avcc", [4400, 4700, 5000, 5250])
def test_the_battery_reading_is_within_two_percent_at_every_avcc(avcc):
    """AVcc is measured against the 1.1 V bandgap before every reading: a Nano on a USB
    port's 4.4 V reads the block as one on 5.0 V does. The virtual MCU's model of the
    reading (nano_battery_mv) gives the firmware's figure."""
    chip = new_chip(f"--avcc={avcc}", "--fault=battery:9.2")
    dev = serial_on(chip)
    try:
        errors = []
        for now in (avcc, 4400 if avcc != 4400 else 5250):  # and after AVcc changed
            chip.command(f"avcc {now}")
            true = float(chip.state()["battery"])
            read = dev.battery().volts
            errors.append((now, read / true - 1))
            assert abs(read / true - 1) <= 0.02, (now, read, true)
            assert abs(read * 1000 - nano_battery_mv(true, now)) <= 3  # one LSB of A0: 15 mV
        print(f"AVcc {avcc} mV: block {true:.3f} V, errors "
              + ", ".join(f"{e * 100:+.2f} % at {a}" for a, e in errors)
              + f" (a fixed 5000 mV reference: {(5000 / avcc - 1) * 100:+.1f} %)")
    finally:
        dev.close()


def test_a_12_volt_block_on_a_sagged_5_volt_reads_as_over_voltage():
    """A Nano whose 5 V has sagged to 3.3 V (a weak port, a long cable): A0 clips at 3.3 V,
    3 x 3.3 = 9.9 V, under the driver's 10.8 V limit, whatever the block. The firmware
    reports a full-scale A0 as 65535 mV, so a 12 V block is refused, not read as 9.9 V;
    a 9.2 V block on the same 3.3 V still reads within 2 %."""
    from shuffler.limits import over_voltage

    for volts, refused in ((12.0, True), (9.2, False)):
        chip = new_chip("--avcc=3300", f"--fault=battery:{volts}")
        dev = serial_on(chip)
        try:
            read = dev.battery().volts
        finally:
            dev.close()
        assert (over_voltage(read) is not None) is refused, (volts, read)
        if not refused:
            assert abs(read / volts - 1) <= 0.02, read


@pytest.mark.parametrize("bandgap", [1000, 1200])
def test_a_chip_with_its_bandgap_at_either_end_of_the_datasheet_reads_every_usb_5_volt(
        bandgap):
    """The bandgap is 1.0 to 1.2 V from chip to chip. Uncalibrated (BANDGAP_MV 1100) the
    reading is off by 1100 / bandgap, the same at every AVcc from 4.4 to 5.25 V: a chip
    with a 1.0 V bandgap on a 5.25 V port must not read every block as 65535 mV (nothing
    would ever deal) while it reads 10 % high at 5.0 V."""
    for avcc in (4400, 5000, 5250):
        chip = new_chip(f"--avcc={avcc}", f"--bandgap={bandgap}", "--fault=battery:9.2")
        dev = serial_on(chip)
        try:
            read = dev.battery().volts
        finally:
            dev.close()
        assert read == pytest.approx(9.2 * 1100 / bandgap, rel=0.01), (avcc, read)


@pytest.fixture(scope="module")
def old_elf(tmp_path_factory):
    """The 2.1 firmware (shuffler-avr 0.1, full duty, no cap), built from the commit
    before protocol 2.2 (the first to name a 2.1 host's CONFIG)."""
    return firmware_before("MSG_CONFIG_LEN_2_1", tmp_path_factory.mktemp("old-firmware"))


def test_the_host_refuses_the_real_old_firmware_by_name_and_runs_it_only_at_full_rating(
        old_elf):
    """Against the very 2.1 ELF: with the default 63 % cap the host refuses to open it,
    naming it; with a motor rated at the block's volts (cap 100 %) its 23-byte CONFIG is
    taken and a pass deals."""
    from firmware_bridge.link import ProtocolError

    chip = SimAvr("--cards=24", *FAST, elf=old_elf)
    with pytest.raises(ProtocolError, match=r"shuffler-avr 0\.1, protocol 2\.1.*63 %"):
        serial_on(chip)
    chip = SimAvr("--cards=24", *FAST, elf=old_elf)
    dev = serial_on(chip, timings=replace(default_timings().quickened(0.1), max_duty=1.0))
    try:
        assert dev.hello.minor == 1 and dev.link.peer_minor == 1
        report = dev.run_pass(coin_plan(24, random.Random(5)))
        assert report.fault is None and report.counted == 24
    finally:
        dev.close()


def refusal_on(chip: SimAvr, tmp_path) -> tuple[float, str | None]:
    """The chip's reading, and what the controller says when asked for a pass (None: it
    would start); the chip is closed after."""
    from shuffler.control.controller import PassController
    from shuffler.errors import OverVoltageError
    from shuffler.store.state import StateStore

    dev = serial_on(chip)
    try:
        read = dev.battery().volts
        try:
            PassController(dev, StateStore(tmp_path)).check_ready(24)
        except OverVoltageError as e:
            return read, str(e)
        return read, None
    finally:
        dev.close()


@pytest.mark.parametrize("bandgap, volts, refused", [
    (1200, 11.5, True),  # reads 10.56 V: under the limit, as the reading goes
    (1100, 11.5, True),
    (1000, 11.5, True),
    (1200, 9.6, False),  # a fresh alkaline
    (1100, 9.6, False),
    (1000, 9.6, True),  # reads 10.56 V, as 11.5 V does at 1200: refused until calibrated
])
def test_an_uncalibrated_chip_refuses_11_5_volts_at_every_bandgap(bandgap, volts, refused,
                                                                   tmp_path):
    """The real firmware at either end of the bandgap's spread, on a 5.0 V AVcc: the host
    counts an uncalibrated reading as up to 1200 / 1100 low, so 11.5 V is refused on every
    chip, naming the driver's limit (and, where the reading alone would pass, the fix)."""
    chip = new_chip("--avcc=5000", f"--bandgap={bandgap}", f"--fault=battery:{volts}")
    read, why = refusal_on(chip, tmp_path)
    print(f"bandgap {bandgap} mV, block {volts} V: reads {read:.2f} V, "
          f"{'refused' if why else 'accepted'}")
    assert read == pytest.approx(volts * 1100 / bandgap, rel=0.01)
    assert (why is not None) is refused, why
    if refused:
        assert "10.8 V limit" in why
    if refused and read <= 10.75:
        assert "not calibrated" in why and "BANDGAP_MV" in why


@pytest.fixture(scope="module")
def calibrated_elf(tmp_path_factory):
    """The firmware built with its chip's measured bandgap (``make BANDGAP_MV=...``)."""
    import subprocess

    def build(mv: int):
        out = tmp_path_factory.mktemp(f"bandgap-{mv}")
        subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), f"BUILD={out}",
                        f"BANDGAP_MV={mv}", "all"], check=True, capture_output=True)
        return out / "shuffler.elf"

    return build


@pytest.mark.parametrize("bandgap", [1000, 1200])
def test_a_calibrated_chip_deals_a_fresh_nimh_at_either_end_and_refuses_11_5(
        bandgap, calibrated_elf, tmp_path):
    """Built with the bandgap the meter found, the chip names it in HELLO_REPLY and reads
    the block as it is: the host drops the margin, a fresh 10.1 V NiMH is taken, 11.5 V
    still refused."""
    elf = calibrated_elf(bandgap)
    for volts, refused in ((10.1, False), (11.5, True)):
        chip = SimAvr("--cards=24", *FAST, "--avcc=5000", f"--bandgap={bandgap}",
                      f"--fault=battery:{volts}", elf=elf)
        read, why = refusal_on(chip, tmp_path)
        print(f"calibrated, bandgap {bandgap} mV, block {volts} V: reads {read:.2f} V, "
              f"{'refused' if why else 'accepted'}")
        assert read == pytest.approx(volts, rel=0.01)
        assert (why is not None) is refused, (volts, why)


def test_the_servo_gets_no_pulse_until_a_pass_moves_it(tmp_path):
    """At power-on D9 stays low: an 11.5 V block the host refuses never parks the flap
    (the harness times D9's pulses on the pin). The first pass drives it."""
    chip = new_chip("--fault=battery:11.5")
    pulses = chip.record("servo ")
    _, why = refusal_on(chip, tmp_path)  # closes the chip, after the refusal
    assert why is not None and "10.8 V limit" in why
    assert pulses == [], pulses

    chip = new_chip("--fault=battery:9.2")
    pulses = chip.record("servo ")
    dev = serial_on(chip)
    try:
        time.sleep(0.3)  # fifteen servo frames: none may come
        assert pulses == [], pulses
        report = dev.run_pass(coin_plan(24, random.Random(3)))
        assert report.fault is None
    finally:
        dev.close()
    widths = [int(line.split()[2].removeprefix("us=")) for line in pulses]
    assert widths and all(950 <= w <= 2050 for w in widths), pulses
