"""The Raspberry Pi image (image/build.py, docs/image.md) built, or found cached, then
booted in qemu-system-aarch64 (``-M virt -cpu cortex-a72``, TCG: no KVM) with its own
kernel and initrd taken from its boot partition with mcopy, as a builder would flash it:
a copy of the image with a ``shuffler.toml`` put on that partition, the card bigger than
the image. From the host, through QEMU's user network and the guest agent: the first
boot applied the file and deleted it, the service is active, ``shuffler.local``
resolves, the page answers 200 on the forwarded port, and a hand runs on the simulator.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from image.build import (
    BOOT_START_MIB,
    ROOT_LABEL,
    base_key,
    binfmt_ready,
    build,
    missing_host_tools,
)
from image.cache import Steps, cache_dir
from tests.vm.guest import Guest, agent_device, shut_down_after, start_qemu
from tests.waiting import wait_for

pytestmark = [pytest.mark.vm, pytest.mark.slow]

#: the page's port in the image (docs/deploy/config.toml's [web] port)
PAGE_PORT = 8080
#: what the builder writes on the boot partition (docs/image.md); the key is a test key
#: made for this file (no private half exists anywhere)
KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFZ5bXVsYXRlZCBrZXkgb2YgdGhlIGltYWdlIHRlc3Qg "
       "dealer@laptop")
PASSPHRASE = "correct horse battery staple"
SETTINGS = f"""# the builder's settings for the first boot
[wifi]
ssid = "Card room"
psk = "{PASSPHRASE}"
country = "GB"

[ssh]
authorized_keys = ["{KEY}"]

[shuffler]
device = "sim"          # QEMU has no GPIO: the simulator plays the machine
"""
#: the card is this much bigger than the image: the first boot grows the root into it
CARD_EXTRA_MIB = 512
CMDLINE = (f"root=LABEL={ROOT_LABEL} rw console=ttyAMA0 panic=-1 net.ifnames=0 "
           "systemd.show_status=false")
HOST_TOOLS = {"qemu-system-aarch64": "qemu-system-arm", "mcopy": "mtools"}


def skip_reasons() -> list[str]:
    reasons = [f"{tool} not found (apt install {package})" for tool, package in
               HOST_TOOLS.items() if shutil.which(tool) is None]
    reasons += [f"apt install {package}" for package in missing_host_tools()]
    if not cache_dir("pi-base", base_key()).is_dir():
        if os.geteuid() != 0:
            reasons.append("the image's base is not cached and building it needs root")
        elif problem := binfmt_ready():
            reasons.append(f"arm64 programs cannot run here ({problem}; apt install "
                           "qemu-user-static binfmt-support)")
    return reasons


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Booted:
    guest: Guest
    port: int
    image_mib: int
    seconds: dict[str, float]


def flash(image: Path, card: Path, run: Path) -> tuple[Path, Path]:
    """``image`` copied to ``card`` (bigger, as an SD card is), the settings put on its
    boot partition; the kernel and initrd read back from that partition."""
    subprocess.run(["cp", "--sparse=always", str(image), str(card)], check=True)
    os.truncate(card, card.stat().st_size + CARD_EXTRA_MIB * 2**20)
    fat = f"{card}@@{BOOT_START_MIB * 2**20}"
    (run / "shuffler.toml").write_text(SETTINGS)
    subprocess.run(["mcopy", "-i", fat, str(run / "shuffler.toml"), "::/shuffler.toml"],
                   check=True)
    names = subprocess.run(["mdir", "-b", "-i", fat, "::/"], check=True, capture_output=True,
                           text=True).stdout.split()
    picked = []
    for prefix in ("::/vmlinuz-", "::/initrd.img-"):
        (name,) = [n for n in names if n.startswith(prefix)]
        target = run / name.removeprefix("::/")
        subprocess.run(["mcopy", "-i", fat, name, str(target)], check=True)
        picked.append(target)
    return picked[0], picked[1]


@pytest.fixture(scope="module")
def pi() -> Iterator[Booted]:
    reasons = skip_reasons()
    if reasons:
        pytest.skip("Raspberry Pi image: " + "; ".join(reasons))
    steps = Steps(prefix="image")
    with steps.step("build (cached or built)"):
        built = build(steps)
    run = Path(tempfile.mkdtemp(prefix="shuffler-pi-"))
    card = run / "card.img"
    with steps.step("flash: copy, boot file, kernel out"):
        kernel, initrd = flash(built.image, card, run)
    port = free_port()
    command = [
        "qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a72", "-accel", "tcg",
        "-smp", "2", "-m", "1024", "-display", "none", "-monitor", "none", "-no-reboot",
        "-serial", f"file:{run / 'console.log'}",
        "-kernel", str(kernel), "-initrd", str(initrd), "-append", CMDLINE,
        "-drive", f"file={card},if=virtio,format=raw,cache=unsafe",
        "-nic", f"user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:{port}-:{PAGE_PORT}",
        *agent_device(run),
    ]
    started = time.monotonic()
    with steps.step("boot to agent"):
        guest = start_qemu(command, run, timeout=1800)
    with shut_down_after(guest, run, "image"):
        with steps.step("boot to page"):
            wait_for(lambda: page(port)[0] == 200, timeout=1800, what="the page", every=2.0)
        steps.times["qemu start to page (s)"] = time.monotonic() - started
        steps.say(json.dumps({k: round(v, 1) for k, v in steps.times.items()}))
        yield Booted(guest, port, built.image.stat().st_size // 2**20, steps.times)


def page(port: int, path: str = "/") -> tuple[int, bytes]:
    """GET ``path`` from the host, as a phone on the LAN names the machine."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", path, headers={"Host": f"shuffler.local:{PAGE_PORT}"})
        response = connection.getresponse()
        return response.status, response.read()
    except OSError:
        return 0, b""


def test_the_page_answers_from_the_host_and_the_service_is_active(pi: Booted):
    status, body = page(pi.port)
    assert status == 200, body[:500]
    assert b"<html" in body.lower()
    assert pi.guest.run("systemctl is-active shuffler").out.strip() == "active"
    # the page listens on the LAN, not only on loopback: the unit's network drop-in is in
    dropins = pi.guest.run("systemctl show -p DropInPaths --value shuffler").out
    assert "network" in dropins, dropins


def test_the_first_boot_set_the_name_wifi_and_ssh_and_deleted_the_file(pi: Booted):
    g = pi.guest
    assert g.run("hostname").out.strip() == "shuffler"
    assert g.run("systemctl is-active avahi-daemon").out.strip() == "active"
    resolved = g.run("getent hosts shuffler.local", check=False)
    assert resolved.rc == 0 and "shuffler.local" in resolved.out, resolved
    boot = g.run("ls /boot/firmware").out.split()
    assert "shuffler.toml" not in boot and "shuffler-firstboot.txt" in boot
    outcome = g.run("cat /boot/firmware/shuffler-firstboot.txt").out
    assert "Wi-Fi 'Card room' (GB)" in outcome and "device sim" in outcome, outcome
    # the passphrase is nowhere on the card: the Wi-Fi's config holds its WPA hash
    found = g.run(f"grep -rlF '{PASSPHRASE}' /boot/firmware /etc /var/lib /root",
                  check=False, timeout=900)
    assert found.rc == 1 and not found.out, found
    wpa = g.run("stat -c %a /etc/wpa_supplicant/wpa_supplicant-wlan0.conf && "
                "cat /etc/wpa_supplicant/wpa_supplicant-wlan0.conf").out
    assert wpa.startswith("600\n") and "country=GB" in wpa and 'ssid="Card room"' in wpa
    assert g.run("cat /root/.ssh/authorized_keys").out == KEY + "\n"
    assert g.run("systemctl is-enabled ssh").out.strip() == "enabled"
    assert g.run("ls /etc/ssh/ssh_host_ed25519_key.pub", check=False).rc == 0
    assert g.run("systemctl is-enabled wpa_supplicant@wlan0").out.strip() == "enabled"


def test_the_root_was_grown_to_the_card(pi: Booted):
    size = int(pi.guest.run("findmnt -bno SIZE /").out.strip())
    assert size > (pi.image_mib + CARD_EXTRA_MIB // 2) * 2**20 - 300 * 2**20, size
    disk_end = int(pi.guest.run("cat /sys/class/block/vda/size").out) * 512
    part_end = (int(pi.guest.run("cat /sys/class/block/vda2/start").out)
                + int(pi.guest.run("cat /sys/class/block/vda2/size").out)) * 512
    assert disk_end - part_end < 2**20, (disk_end, part_end)


def test_a_hand_runs_on_the_simulator(pi: Booted):
    result = pi.guest.run("shuffler --json hand --passes 2", timeout=900)
    report = json.loads(result.out)
    assert report["device"]["kind"] == "sim", report["device"]
    hand = report["hand"]
    assert hand["completed"] and hand["passes_done"] == 2 and hand["fault"] is None, hand
    assert [p["counted"] for p in hand["pass_reports"]] == [24, 24]
    status = json.loads(pi.guest.run("shuffler --json status").out)
    assert status["device"]["kind"] == "sim", status
