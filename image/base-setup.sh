#!/bin/sh
# mmdebstrap's customize hook for the Raspberry Pi image's base (image/build.py): $1 is
# the image's root. Part of the base's cache key: an edit here rebuilds the base.
set -eu
root="$1"
here="$(dirname "$0")"
echo shuffler > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tshuffler\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
    > "$root/etc/hosts"
# the card's two partitions by label (image/build.py makes them), so the same image boots
# from an SD card (mmcblk0), a USB disk (sda) or QEMU's virtio disk (vda)
printf 'LABEL=RASPIROOT / ext4 rw,noatime,errors=remount-ro 0 1\n' > "$root/etc/fstab"
printf 'LABEL=RASPIFIRM /boot/firmware vfat rw,noatime,umask=0022 0 2\n' >> "$root/etc/fstab"
# raspi-firmware writes cmdline.txt from this (root=) and config.txt with the custom file
# (SPI on: the battery monitor's MCP3008); then its kernel hook runs again to apply them
echo 'dtparam=spi=on' > "$root/etc/default/raspi-firmware-custom"
sed -i 's|^#\?ROOTPART=.*|ROOTPART=LABEL=RASPIROOT|' "$root/etc/default/raspi-firmware"
grep -q '^ROOTPART=LABEL=RASPIROOT' "$root/etc/default/raspi-firmware"
for kernel in "$root"/boot/vmlinuz-*; do
    DEB_MAINT_PARAMS=configure chroot "$root" /etc/kernel/postinst.d/z50-raspi-firmware \
        "${kernel##*/vmlinuz-}"
done
grep -q 'root=LABEL=RASPIROOT' "$root/boot/firmware/cmdline.txt"
grep -q '^dtparam=spi=on' "$root/boot/firmware/config.txt"
# the network: DHCP on the wire and on Wi-Fi (wpa_supplicant@wlan0, from the boot file)
mkdir -p "$root/etc/systemd/network"
printf '[Match]\nName=e*\n\n[Network]\nDHCP=yes\n' > "$root/etc/systemd/network/20-wired.network"
printf '[Match]\nName=wl*\n\n[Network]\nDHCP=yes\n' > "$root/etc/systemd/network/25-wifi.network"
chroot "$root" systemctl enable systemd-networkd.service systemd-resolved.service >/dev/null
# avahi answers shuffler.local; resolved leaves multicast DNS to it
mkdir -p "$root/etc/systemd/resolved.conf.d"
printf '[Resolve]\nMulticastDNS=no\nLLMNR=no\n' > "$root/etc/systemd/resolved.conf.d/shuffler.conf"
# SSH only once the boot file gives a key: no shared host keys, no password log-in; and
# kept off by the first boot's preset-all, which enables what no preset disables
chroot "$root" systemctl disable ssh.service >/dev/null 2>&1 || true
rm -f "$root"/etc/ssh/ssh_host_*
mkdir -p "$root/etc/systemd/system-preset"
printf 'disable ssh.service\ndisable ssh.socket\ndisable rescue-ssh.target\n' \
    > "$root/etc/systemd/system-preset/10-shuffler.preset"
# each card its own machine id (the DHCP client's id comes from it), made at first boot
echo uninitialized > "$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
# the first boot
install -D -m 0755 "$here/firstboot.py" "$root/usr/local/lib/shuffler-image/firstboot.py"
install -D -m 0644 "$here/shuffler-firstboot.service" \
    "$root/etc/systemd/system/shuffler-firstboot.service"
chroot "$root" systemctl enable shuffler-firstboot.service >/dev/null
