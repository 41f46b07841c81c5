#!/bin/busybox sh
# /init of the PPPoE test bed's initramfs (vmtest/bed_pppoe_test.go,
# docs/platforms.md "Test beds"). The guest is the router: its single-queue
# virtio NIC is the WAN, carrying a kernel-only PPPoE session (vmguest
# pppoe) whose frames the host sends into the NIC's tap; the ppp netdev
# pppoe-wan is named in /etc/config/network as netifd would run it; the
# decapsulated packets are forwarded out of dummy0 (the LAN, counted by its
# tx_packets). Prints sections between "=== BEGIN name" and "=== END name
# rc" for the harness; ends with poweroff.
# shellcheck shell=sh

/bin/busybox mkdir -p /proc /sys /dev /sbin /usr/bin /usr/sbin
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /tmp /var/run/ubus /var/lock /etc/config
mount -t tmpfs tmp /tmp
echo 1 >/proc/sys/kernel/printk

# VMT_MODULES, VMT_DEVICES, BED_* (bed_pppoe_test.go)
# shellcheck source=/dev/null
. /etc/vmtest.conf

section() {
	name=$1
	shift
	echo "=== BEGIN $name"
	"$@" 2>&1
	rc=$?
	echo "=== END $name $rc"
}

finish() {
	echo "=== FLOOD stop"
	echo "=== DONE"
	sync
	poweroff -f
}

for m in $VMT_MODULES; do
	insmod "/lib/modules/$m.ko" || echo "insmod $m failed"
done

# neths prints how many eth* netdevs exist.
neths() {
	set -- /sys/class/net/eth*
	[ -e "$1" ] || set --
	echo $#
}
n=0
while [ "$(neths)" -lt "$VMT_DEVICES" ] && [ $n -lt 100 ]; do
	sleep 0.1
	n=$((n + 1))
done
# The single-queue NIC is the WAN.
WAN=
for d in /sys/class/net/eth*; do
	set -- "$d"/queues/rx-*
	[ $# = 1 ] && WAN=${d##*/}
done
[ -n "$WAN" ] || {
	echo "=== INFO no single-queue NIC"
	finish
}
ip link set "$WAN" address "$BED_WAN_MAC"
ip link set "$WAN" promisc on
ip link set "$WAN" up
echo 1 >"/sys/class/net/$WAN/threaded"
ip link set lo up

# The session: the host's frames come from BED_PEER_MAC with BED_SID.
/usr/bin/vmguest pppoe -dev "$WAN" -peer "$BED_PEER_MAC" -sid "$BED_SID" -name pppoe-wan >/tmp/pppoe.out 2>&1 &
n=0
while [ ! -e /sys/class/net/pppoe-wan ] && [ $n -lt 100 ]; do
	sleep 0.1
	n=$((n + 1))
done
section pppoe cat /tmp/pppoe.out
ip link set pppoe-wan mtu 1492 up
ip addr add 198.18.40.1 peer 198.18.40.2 dev pppoe-wan
# The LAN: a dummy device (no ARP, counts what it sends).
ip link add lan0 type dummy 2>/dev/null || true
ip link set lan0 up
ip addr add 198.18.42.1/24 dev lan0
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.ipv4.conf.all.rp_filter=0
sysctl -qw net.ipv4.conf.pppoe-wan.rp_filter=0

# netifd's view: the wan interface runs PPPoE over the WAN NIC, so the
# platform ties pppoe-wan to it.
printf "config interface 'wan'\n\toption proto 'pppoe'\n\toption device '%s'\n" "$WAN" >/etc/config/network
printf "config globals 'globals'\n\toption mode 'auto'\n" >/etc/config/packet_steering
echo "=== INFO wan=$WAN cpus=$(nproc)"

ps_=/usr/sbin/packet-steering
# The host floods from now on; a first count shows the session works.
echo "=== FLOOD start"
sleep 2
section count sh /etc/bed-count.sh 1

# auto must steer the ppp device: rx-0 RPS away from the carrier's CPUs.
section apply-auto $ps_ apply --reason bed
read -r m </sys/class/net/pppoe-wan/queues/rx-0/rps_cpus
echo "=== INFO ppp_rps_auto=$m"
section queues-auto $ps_ queues
# shellcheck disable=SC2016 # expanded by the inner sh
section state-auto sh -c 'for q in /sys/class/net/*/queues/rx-*; do echo "$q $(cat "$q/rps_cpus")"; done; for p in /proc/[0-9]*; do c=$(cat "$p/comm"); case $c in napi/*) echo "$c $(grep Cpus_allowed_list "$p/status")";; esac; done'

# The sweep: the stock rule, auto, off, and every RPS mask of pppoe-wan
# (with the rest as auto places it).
cands="legacy;auto;off"
m=0
while [ $m -lt $((1 << $(nproc))) ]; do
	cands="$cands;pppoe-wan:$(printf %x $m)"
	m=$((m + 1))
done
# In rounds (--interleave) unless BED_INTERLEAVE=0: the host's drift then
# falls on every candidate alike.
il=
[ "$BED_INTERLEAVE" = 0 ] || il=--interleave
# shellcheck disable=SC2086 # $il is one flag or nothing
$ps_ tune --target 198.18.42.2 --load "sh /etc/bed-count.sh $BED_LOAD_SECONDS" \
	--load-time "${BED_LOAD_SECONDS}s" --runs "$BED_RUNS" --settle 1s $il \
	--candidates "$cands" --max-configs 64 --max-duration 30m --json >/tmp/tune.json 2>/tmp/tune.err
echo "=== INFO tune_rc=$?"
section tune-log cat /tmp/tune.err
section tune-json cat /tmp/tune.json
finish
