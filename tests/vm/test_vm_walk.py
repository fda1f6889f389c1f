"""Issue 35: the rest of docs/deploy/README.md walked as a builder walks it, after the
install the session did (tests/vm/deploy.py), each step asserted on what the builder
sees. It runs last (file order) and the steps build on each other, in order:

1. The self-test with the service stopped, then a calibration entered: the real pins'
   ``selftest --yes`` exits 0 and the service starts again. The calibration is entered
   on ``--device sim-gpio``'s bench, through the same writer into the same
   /etc/shuffler/config.toml: gpio-sim has no MCP3008 (the VM config says
   ``adc_channel = false``), so the real pins' battery step has nothing to read; the
   simulated rig has the monitor and the divider once the config names a channel, so
   for that one run the config's ``adc_channel`` is 0 (rewritten in place: its owner,
   group and mode untouched). The file keeps its owner, group and mode through the
   writer (issue 35's S2: it used to become root:root 0640, which the service's
   ``User=shuffler`` cannot read), holds the new ratio, and the service starts on it.
2. ``shuffler status`` from a user outside the ``shuffler`` group: exit 3, a message
   naming the group and ``usermod -aG shuffler``.
3. That user in the group: ``shuffler --json status`` and a hand from their CLI (the
   hand waits for the dealer's touch: tests/vm/test_vm_scenarios.py's Machine), audited.
4. The page's ``upgrade`` block, line by line: the builder's ~/shuffler (root's here) is
   a clone of the handed-in checkout with one commit more, /opt/shuffler pulls it, pip
   installs from the handed-in wheels. The service is back, the counters and audit kept.
5. The page's ``journalctl -u shuffler -o cat ... | jq .`` over the service's whole log:
   every line it prints is JSON (parsed here: the image has no jq). Before the reboot:
   the journal is in RAM (tests/vm/guest-setup.sh), and the reboot starts a new one.
6. A reboot (QEMU's ``-no-reboot``: it exits, and the same overlay is booted again):
   a oneshot unit installed here mounts the data disk and makes the chip before the
   service starts, as a Pi's chip is there at boot. The service is enabled and active,
   the counters and audit kept, the new boot's log JSON too. Skipped in an attached
   guest (no QEMU here to boot again).
"""

from __future__ import annotations

import http.client
import json
import re
import time
from pathlib import Path

import pytest

from tests.vm import deploy
from tests.vm.guest import DATA, GUEST_ADDRESS, GUEST_PAGE_PORT, Guest, page_port
from tests.vm.image import Steps
from tests.vm.machine import chip_commands
from tests.vm.test_vm_scenarios import CARDS, STATE, Machine, went_low

README = Path(__file__).resolve().parents[2] / "docs/deploy/README.md"
CONFIG = "/etc/shuffler/config.toml"
USER = "dealer"
#: the self-test's steps but the battery's (cli/selftest.py's STEPS)
NOT_BATTERY = ("touch", "tray", "pile_left", "pile_right", "beam", "light", "buzzer",
               "motor", "flap")
#: what a Pi has at boot and the guest has not: the data disk, the chip (test only)
HARDWARE_UNIT = "shuffler-vm-hardware.service"
HARDWARE_SCRIPT = "/usr/local/sbin/shuffler-vm-hardware"
HARDWARE_UNIT_TEXT = f"""# test only (tests/vm/test_vm_walk.py): what a Pi has at boot
[Unit]
Description=the VM's hardware: the data disk and the gpio-sim chip
DefaultDependencies=no
After=local-fs.target systemd-udevd.service
Before=shuffler.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={HARDWARE_SCRIPT}

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture(scope="module")
def m(guest: Guest):
    machine = Machine(guest)
    machine.restore()
    return machine


def stat(g: Guest) -> str:
    return g.run(f"stat -c '%U %G %a' {CONFIG}").out.strip()


def set_adc_channel(g: Guest, value: str) -> None:
    """``[gpio] adc_channel`` in the config rewritten in place (the file's inode, owner,
    group and mode untouched)."""
    text, n = re.subn(r"(?m)^adc_channel = \S+", f"adc_channel = {value}",
                      g.get(CONFIG).decode())
    assert n == 1, "the config has no adc_channel line"
    g.run(f"cat > {CONFIG}", input=text.encode())


def as_user(cmd: str) -> str:
    return f"runuser -u {USER} -- {cmd}"


#: what the state file keeps across an upgrade and a reboot
KEPT = ("passes", "hands_completed", "cards", "jams", "faults", "interrupted", "fault",
        "last_hand", "dealer")


def kept(m: Machine) -> tuple[dict, dict, list]:
    """The counters status shows, the state file's, the audit lines."""
    state = json.loads(m.g.run(f"cat {STATE} 2>/dev/null || echo {{}}").out)
    return m.status()["counters"], {key: state.get(key) for key in KEPT}, m.audit()


def test_1_selftest_with_the_service_stopped_then_a_calibration_the_service_reads(m):
    g = m.g
    g.run("systemctl stop shuffler", timeout=300)
    # the real pins, nobody at the bench: nothing moves, every step passes or skips
    real = g.run("unshare -m sh -c 'mount --bind /etc/shuffler-vm/cpuinfo /proc/cpuinfo && "
                 f"exec shuffler --device gpio --config {CONFIG} selftest --yes'",
                 check=False, timeout=300)
    assert real.rc == 0, real
    assert "selftest: every step passed" in real.out, real
    assert "no battery monitor ([gpio] adc_channel = false)" in real.out, real
    before = stat(g)
    set_adc_channel(g, "0")
    selftest = (f"shuffler --device sim-gpio --config {CONFIG} selftest "
                + " ".join(f"--skip {step}" for step in NOT_BATTERY))
    # blank at the multimeter's question: the builder reads what the monitor says
    looked = g.run(selftest, input=b"\n", timeout=300)
    shown = re.search(r"The monitor reads (\d+\.\d+) V", looked.err)
    assert shown, looked
    assert "written to" not in looked.out, looked
    measured = round(float(shown[1]) * 0.98, 2)  # the multimeter: 2% under the monitor
    written = g.run(selftest, input=f"{measured}\ny\n".encode(), timeout=300)
    ratio = re.search(r"divider_ratio = (\d+\.\d+) written to " + re.escape(CONFIG),
                      written.out)
    assert ratio, written
    assert stat(g) == before, f"the calibration changed the config's owner, group or mode: " \
                              f"{before} -> {stat(g)}"
    set_adc_channel(g, "false")
    assert stat(g) == before
    text = g.run(f"runuser -u shuffler -- cat {CONFIG}").out  # the service's account
    assert re.search(rf"(?m)^divider_ratio = {ratio[1]}\b", text), text
    cursor = g.cursor()
    g.run("systemctl start shuffler", timeout=300)
    m.ready()
    assert g.show("shuffler", "ActiveState")["ActiveState"] == "active"
    assert any(line["event"] == "serving" for line in m.logs(cursor)), m.logs(cursor)


def test_2_status_outside_the_group_says_which_group_to_join(m):
    g = m.g
    g.run(f"id {USER} >/dev/null 2>&1 || useradd -m {USER}")
    g.run(f"gpasswd -d {USER} shuffler >/dev/null 2>&1; true")
    answer = g.run(as_user("shuffler status"), check=False)
    assert answer.rc == 3, answer
    assert "permission denied" in answer.err, answer
    assert "join the group 'shuffler'" in answer.err, answer
    assert "sudo usermod -aG shuffler $USER" in answer.err, answer


def test_3_in_the_group_status_and_a_hand_from_that_users_cli(m):
    g = m.g
    g.run(f"usermod -aG shuffler {USER}")
    status = json.loads(g.run(as_user("shuffler --json status")).out)
    assert status["device"]["kind"] == "gpio" and status["fault"] is None, status
    counters, _state, audit = kept(m)
    m.load()
    out, _feeder = m.watch(), m.feed()
    hand = g.start(as_user("shuffler --json hand"))
    g.wait(lambda: m.status()["hand_in_progress"] is not None or g.poll(hand) is not None,
           120, "the hand waiting for the dealer's touch")
    m.touch()
    went_low(m.changes(out))
    done = g.result(hand, timeout=300, what="shuffler hand")
    assert done.rc == 0, done
    g.wait(lambda: len(m.audit()) > len(audit), 60, "the hand's pass in the audit log")
    entry = m.audit()[-1]
    assert (entry["counted"], entry["fault"]) == (CARDS, None), entry
    after = m.status()["counters"]
    assert (after["hands"], after["passes"]) == (counters["hands"] + 1,
                                                 counters["passes"] + 1), (counters, after)


def test_4_the_upgrade_block_keeps_the_state_and_the_service_comes_back(m):
    g = m.g
    before = kept(m)
    # the builder's ~/shuffler: the checkout /opt/shuffler was cloned from, one commit on
    # (a guest kept for SHUFFLER_VM_ATTACH keeps it: one more commit each run)
    g.run(f"{{ test -d /root/shuffler || git clone -q {DATA}/src /root/shuffler; }} && "
          "cd /root/shuffler && echo '- test only: the walk upgrade' >> CHANGELOG.md && "
          "git -c user.name=vm -c user.email=vm@vm commit -qam 'the walk: an upgrade' && "
          "git -C /opt/shuffler remote set-url origin /root/shuffler")
    new = g.run("git -C /root/shuffler rev-parse HEAD").out.strip()
    lines = deploy.block(README, "```sh upgrade")
    assert lines, "docs/deploy/README.md has no ```sh upgrade block"
    wheels = tuple(edit for edit in deploy.EDITS if edit[0] == "the host's wheels")
    out = deploy.run_lines(g, deploy.edited(lines, wheels, "```sh upgrade"), Steps(),
                           what="upgrade")
    assert g.run("git -C /opt/shuffler rev-parse HEAD").out.strip() == new
    assert any(text.startswith("shuffler ") for line, text in out.items()
               if "--version" in line), out
    m.ready()
    assert kept(m) == before


def journal_lines(g: Guest) -> list[dict]:
    """The page's ``journalctl -u shuffler -o cat ... | jq .`` (its one such line): every
    line it prints parsed as JSON (the image has no jq), the offending ones named."""
    page = [line for line in README.read_text().splitlines()
            if line.startswith("journalctl -u shuffler -o cat") and "| jq ." in line]
    assert len(page) == 1, page
    command = page[0].split("|", 1)[0].strip()
    lines = [line for line in g.run(command).out.splitlines() if line.strip()]
    assert lines, f"{command} printed nothing"
    parsed, offending = [], []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            offending.append(line)
    assert not offending, f"{command} | jq . fails on {len(offending)} of {len(lines)} " \
                          f"lines: {offending[:10]}"
    return parsed


def test_5_the_pages_journal_command_reads_the_whole_log_as_json(m):
    # the session's whole log (the journal is in RAM: the reboot below starts a new one)
    events = {line.get("event") for line in journal_lines(m.g)}
    assert {"serving", "pass", "request"} <= events, events


def test_6_a_reboot_the_service_up_at_boot_on_its_hardware_the_state_kept(m, guest):
    g = m.g
    if guest.process is None:
        pytest.skip("an attached guest (SHUFFLER_VM_ATTACH): no QEMU here to boot it again")
    script = "#!/bin/sh\n# test only (tests/vm/test_vm_walk.py)\nset -e\n" \
             f"mount -o ro LABEL=shuffler-data {DATA}\n" + "\n".join(chip_commands()) + "\n"
    g.put(HARDWARE_SCRIPT, script.encode(), mode=0o755)
    g.put(f"/etc/systemd/system/{HARDWARE_UNIT}", HARDWARE_UNIT_TEXT.encode())
    g.run(f"systemctl daemon-reload && systemctl enable {HARDWARE_UNIT} 2>&1")
    assert g.run("systemctl is-enabled shuffler").out.strip() == "enabled"
    before = kept(m)
    guest.reboot()
    g.run("systemctl is-system-running --wait", check=False, timeout=900)
    m.ready()
    shown = g.show("shuffler", "ActiveState", "SubState", "NRestarts")
    assert (shown["ActiveState"], shown["SubState"]) == ("active", "running"), shown
    assert g.show(HARDWARE_UNIT, "Result")["Result"] == "success"
    assert kept(m) == before
    assert g.run("stat -c %G /dev/gpiochip0").out.strip() == "gpio"
    text = g.run("shuffler status").out
    assert text.strip(), "shuffler status printed nothing"
    assert "serving" in {line.get("event") for line in journal_lines(g)}  # this boot's log


# -- issue 45: the installer on the guest the page installed by it ------------------------
#: what else made files after the install, which the uninstall is not asked to remove: the
#: tests' own (named shuffler-vm-*: the walk's boot unit, the scenarios' watchers; their
#: drop-ins vm-*.conf, which the uninstall keeps as a builder's own; the guest's network),
#: and shadow's bookkeeping beside /etc/passwd (useradd's, the walk's `dealer` among them)
def not_the_installers(path: str) -> bool:
    return "/shuffler-vm-" in path or path.startswith("/etc/systemd/network") or \
        re.fullmatch(r"/etc/systemd/system/shuffler\.service\.d/vm-[a-z-]+\.conf", path) \
        is not None or path in (
        "/etc/.pwd.lock", "/etc/subuid", "/etc/subgid", "/etc/subuid-", "/etc/subgid-",
        "/etc/passwd-", "/etc/group-", "/etc/shadow-", "/etc/gshadow-")



NETWORK = f"""# test only (tests/vm/test_vm_walk.py): QEMU's user network, the page's port forwarded
[Match]
Type=ether
[Network]
Address={GUEST_ADDRESS}
"""


def files(g: Guest) -> set[str]:
    g.run(deploy.files_command("/root/files-now.list"), timeout=300)
    return set(g.run("cat /root/files-now.list").out.splitlines())


def page_status(guest: Guest) -> int:
    """GET / from the host, through the port QEMU forwards to the guest's 8080."""
    conn = http.client.HTTPConnection("127.0.0.1", page_port(guest.run_dir), timeout=20)
    try:
        conn.request("GET", "/", headers={"Host": f"localhost:{GUEST_PAGE_PORT}"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_7_the_page_turned_on_is_refused_by_name_until_the_installer_runs_then_answers(m):
    g = m.g
    g.put("/etc/systemd/network/10-vm.network", NETWORK.encode())
    g.run("systemctl restart systemd-networkd", timeout=300)
    cursor = g.cursor()
    restarts = m.restarts()
    # as the guide used to say: turned on in the config, the service restarted
    g.run(f"printf '\\n[web]\\nenabled = true\\nlan = true\\nport = {GUEST_PAGE_PORT}\\n'"
          f" >> {CONFIG}")
    g.run("systemctl restart shuffler", check=False, timeout=300)
    g.wait(lambda: m.show("ActiveState")["ActiveState"] == "failed", 120,
           "the service failed (the unit refuses AF_INET)")
    time.sleep(6)  # past RestartSec=2: RestartPreventExitStatus=2 keeps it down
    shown = m.show("ActiveState", "ExecMainStatus", "Result")
    assert (shown["ActiveState"], shown["ExecMainStatus"]) == ("failed", "2"), shown
    assert m.restarts() == restarts, "the unit restarted a service that exits 2"
    said = [e.get("MESSAGE", "") for e in g.journal(cursor=cursor)]
    why = [line for line in said if f"[web] port = {GUEST_PAGE_PORT}" in str(line)]
    assert why, said[-20:]
    assert "sudo shuffler-setup install" in str(why[0]) and "network.conf" in str(why[0]), why
    out = g.run("shuffler-setup install", timeout=600).out
    assert "installed /etc/systemd/system/shuffler.service.d/network.conf" in out, out
    assert "restarted shuffler (it was failed)" in out, out
    m.ready()
    g.wait(lambda: _answers(g), 120, "the page answering from the host")
    assert page_status(g) == 200


def _answers(g: Guest) -> bool:
    try:
        return page_status(g) == 200
    except OSError:
        return False


def test_8_install_twice_changes_nothing(m):
    g = m.g
    before, pid = files(g), m.show("MainPID")["MainPID"]
    out = g.run("shuffler-setup install", timeout=600).out
    assert "nothing to change" in out, out
    assert files(g) == before
    assert m.show("MainPID")["MainPID"] == pid  # not restarted
    assert g.run("shuffler-setup status", timeout=300).out.rstrip().endswith("as installed")


def test_9_upgrade_keeps_the_config_and_the_state(m):
    g = m.g
    config, before = g.get(CONFIG), kept(m)
    out = g.run("shuffler-setup upgrade", timeout=600).out
    assert "restarted shuffler" in out, out
    m.ready()
    assert g.get(CONFIG) == config
    assert kept(m) == before
    assert page_status(g) == 200


def test_10_uninstall_leaves_none_of_its_files_and_keeps_the_state(m):
    g = m.g
    state = g.run(f"ls {STATE}").out.strip()
    out = g.run("shuffler-setup uninstall", timeout=600).out
    assert "kept /var/lib/shuffler/" in out, out
    assert g.show("shuffler", "ActiveState")["ActiveState"] in ("inactive", "failed")
    scanned = tuple(deploy.SCANNED.split())
    before = {path for path in g.run(f"cat {deploy.BEFORE}").out.splitlines()
              if path.startswith(scanned)}
    after = files(g)
    new = {path for path in after - before if not not_the_installers(path)
           and not path.startswith("/var/lib/shuffler/")}
    # what is kept: the state folder, and the manifest that says the installer made it
    assert new == {"/var/lib/shuffler", "/var/lib/shuffler-setup",
                   "/var/lib/shuffler-setup/manifest.json"}, sorted(new)
    assert before - after == set(), sorted(before - after)  # nothing that was there went
    assert g.run(f"ls {STATE}").out.strip() == state
    assert g.run(f"test -f {deploy.DROPIN}", check=False).rc == 0  # the builder's drop-in
    assert g.run("id shuffler", check=False).rc != 0
    # and back: the guest as the session found it, by the same command
    assert g.run("command -v shuffler-setup", check=False).rc != 0  # its link went too
    out = g.run("/opt/shuffler/.venv/bin/shuffler-setup install && systemctl start shuffler",
                timeout=600).out
    assert "made the account shuffler" in out, out
    m.ready()
