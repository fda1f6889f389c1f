"""Which kernel PWM chip and channel time a pin's pulses (``diverter = "hardware_servo"``).

A Pi 1-4 has one PWM block of two channels, each on two pins; a Pi 5's RP1 has four
channels, one per pin, and its chip number differs between kernels. So the chip is
found by what it is (its device in sysfs), not by its number."""

from __future__ import annotations

from pathlib import Path

from shuffler.errors import DeviceError

SYSFS = Path("/sys/class/pwm")
#: the BCM283x/2711 PWM (Pi 1-4, Zero): its device name ends like this on every model
BCM_DEVICE, BCM_CHANNELS = "20c000.pwm", {12: 0, 18: 0, 13: 1, 19: 1}
#: the Pi 5's RP1 PWM0 (PWM1 drives the fan)
RP1_DEVICE, RP1_CHANNELS = "1f00098000.pwm", {12: 0, 13: 1, 18: 2, 19: 3}
OVERLAY = "add dtoverlay=pwm-2chan to /boot/firmware/config.txt and reboot"


def pwm_channel(pin: int, root: Path = SYSFS) -> tuple[int, int]:
    """The (chip, channel) that drives GPIO ``pin``, or a DeviceError saying what to do."""
    chips = sorted(root.glob("pwmchip*"), key=lambda p: int(p.name[7:] or 0))
    for chip in chips:
        device = (chip / "device").resolve().name
        for suffix, channels in ((RP1_DEVICE, RP1_CHANNELS), (BCM_DEVICE, BCM_CHANNELS)):
            if device.endswith(suffix):
                if pin not in channels:
                    raise DeviceError(f"GPIO{pin} has no hardware PWM channel (use GPIO12, "
                                      "13, 18 or 19)")
                return int(chip.name[7:]), channels[pin]
    found = ", ".join(f"{c.name} ({(c / 'device').resolve().name})" for c in chips) or "none"
    raise DeviceError(f"no Raspberry Pi PWM chip in {root} (found: {found}): {OVERLAY}")
