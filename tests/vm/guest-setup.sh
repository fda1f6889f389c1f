#!/bin/sh
# mmdebstrap's customize hook for the VM tier's guest (tests/vm/image.py): $1 is the
# guest's root. Part of the image's cache key: an edit here rebuilds the image.
set -eu
root="$1"
echo shuffler-vm > "$root/etc/hostname"
printf '/dev/vda / ext4 rw,noatime 0 1\n' > "$root/etc/fstab"
# root logs in on the serial console without a password (a throwaway guest, no network)
chroot "$root" passwd -d root >/dev/null
# nothing that wakes up on a timer or waits for a network: under emulation each costs
# seconds of boot, and a timer firing mid-scenario would skew its timing
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service \
            fstrim.timer man-db.timer dpkg-db-backup.timer systemd-timesyncd.service \
            systemd-networkd-wait-online.service getty@tty1.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# the journal in RAM: the guest is thrown away after the session
mkdir -p "$root/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\nRateLimitBurst=0\n' \
    > "$root/etc/systemd/journald.conf.d/vm.conf"
# the checkout handed in on the data disk belongs to the host's user: git may clone it
chroot "$root" git config --system --add safe.directory '*'
# the disk with the project's wheels and files (tests/vm/guest.py), read-only
mkdir -p "$root/mnt/shuffler"
