#!/bin/busybox sh
# /init of the reboot pair's shim initramfs (vmtest/openwrt_reboot_test.go).
# Debian's kernel has virtio_blk and ext4 as modules, so it cannot mount
# the router's root disk by itself: this loads them (the list in /modules,
# in dependency order), mounts /dev/vda (ext4, the prepared OpenWrt root
# file system) read-write and hands over to the image's own /sbin/init
# (procd), which then boots as on OpenWrt's x86 ext4 images: preinit's
# mount_root finds no rootfs_data and remounts /dev/root, and every file
# the router changes is on the disk. Both boots of the pair run this.
# shellcheck shell=sh

bb=/bin/busybox
fail() {
	echo "shim: $*"
	$bb poweroff -f
}
$bb mkdir -p /proc /dev /newroot
$bb mount -t proc proc /proc
$bb mount -t devtmpfs dev /dev
for m in $($bb cat /modules); do
	$bb insmod "/lib/modules/$m" || fail "insmod $m failed"
done
i=0
while [ ! -b /dev/vda ]; do
	i=$((i + 1))
	[ "$i" -gt 300 ] && fail "no /dev/vda after 30 s"
	$bb sleep 0.1
done
$bb mount -t ext4 -o rw,noatime /dev/vda /newroot || fail "cannot mount /dev/vda"
[ -x /newroot/sbin/init ] || fail "no /sbin/init on /dev/vda"
$bb umount /dev
$bb umount /proc
echo "shim: /dev/vda (ext4) mounted, switch_root to its /sbin/init"
exec $bb switch_root /newroot /sbin/init
