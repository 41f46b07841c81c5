#!/bin/busybox sh
# /init of the big.LITTLE test bed's initramfs (vmtest/bed_biglittle_test.go,
# docs/platforms.md "Test beds"). The guest is an arm64 router whose device
# tree gives its CPUs different capacity-dmips-mhz (the host throttles the
# little vCPUs' threads): its multi-queue virtio NIC eth0 (threaded NAPI)
# receives UDP flows the host sends into the NIC's tap, and forwards them
# out of a dummy LAN device lan0 (counted by its tx_packets). Prints
# sections between "=== BEGIN name" and "=== END name rc" for the harness;
# ends with poweroff.
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

# VMT_MODULES, VMT_DEVICES, BED_* (bed_biglittle_test.go)
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

n=0
while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 100 ]; do
	sleep 0.1
	n=$((n + 1))
done
ETH=eth0
[ -e /sys/class/net/$ETH ] || {
	echo "=== INFO no NIC"
	finish
}

# What the kernel made of the device tree: each CPU's capacity (from
# capacity-dmips-mhz) and topology.
caps=
for c in /sys/devices/system/cpu/cpu[0-9]*; do
	v=-
	[ -r "$c/cpu_capacity" ] && read -r v <"$c/cpu_capacity"
	caps="$caps${caps:+,}$v"
done
set -- "/sys/class/net/$ETH"/queues/rx-*
echo "=== INFO cpus=$(nproc) capacity=$caps queues=$#"
# shellcheck disable=SC2016 # expanded by the inner sh
section topology sh -c 'for c in /sys/devices/system/cpu/cpu[0-9]*; do t=$c/topology; echo "${c##*/} capacity $(cat $c/cpu_capacity) core_id $(cat $t/core_id) cluster_id $(cat $t/cluster_id 2>/dev/null) thread_siblings $(cat $t/thread_siblings_list) core_siblings $(cat $t/core_siblings_list)"; done'

ip link set $ETH address "$BED_MAC"
ip link set $ETH up
echo 1 >/sys/class/net/$ETH/threaded
ip addr add 198.18.0.2/24 dev $ETH
ip link set lo up
# The LAN: a dummy device (no ARP, counts what it sends).
ip link add lan0 type dummy 2>/dev/null || true
ip link set lan0 up
ip addr add 198.18.42.1/24 dev lan0
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.ipv4.conf.all.rp_filter=0
sysctl -qw net.ipv4.conf.$ETH.rp_filter=0

ps_=/usr/sbin/packet-steering
vdev=$(basename "$(readlink /sys/class/net/$ETH/device)")

# placement MODE applies MODE and prints where eth0's receive work went:
# its rx NAPI threads' CPUs (napi/eth0-N, N > 0, in name order), its rx
# queues' RPS masks and its input IRQs' CPUs, each joined by "/".
placement() {
	printf "config globals 'globals'\n\toption mode '%s'\n" "$1" >/etc/config/packet_steering
	section "plan-$1" $ps_ plan
	section "apply-$1" $ps_ apply --reason bed
	napi=
	for p in /proc/[0-9]*; do
		read -r c 2>/dev/null <"$p/comm" || continue
		case $c in
		"napi/$ETH-0") ;;
		"napi/$ETH-"*) echo "$c $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$p/status")" ;;
		esac
	done | sort >/tmp/napi
	while read -r _ l; do napi="$napi${napi:+/}$l"; done </tmp/napi
	rps=
	for q in "/sys/class/net/$ETH"/queues/rx-*; do
		read -r m <"$q/rps_cpus"
		rps="$rps${rps:+/}$m"
	done
	irq=
	grep "$vdev-input" /proc/interrupts | sed 's/^ *\([0-9]*\):.*/\1/' >/tmp/irqs
	while read -r i; do
		read -r l <"/proc/irq/$i/smp_affinity_list"
		irq="$irq${irq:+/}$l"
	done </tmp/irqs
	echo "=== INFO napi_$1=$napi rps_$1=$rps irq_$1=$irq"
}

# The host floods from now on; a first count shows the forwarding works.
echo "=== FLOOD start"
sleep 2
section count sh /etc/bed-count.sh 1

# Where the stock rule, off and auto put the NIC's work (auto last: the
# sweep starts from it and tune puts it back at the end).
for m in legacy off auto; do
	placement $m
done
section queues-auto $ps_ queues

il=
[ "$BED_INTERLEAVE" = 0 ] || il=--interleave
# shellcheck disable=SC2086 # $il is one flag or nothing
$ps_ tune --target 198.18.42.2 --load "sh /etc/bed-count.sh $BED_LOAD_SECONDS" \
	--load-time "${BED_LOAD_SECONDS}s" --runs "$BED_RUNS" --settle 1s $il \
	--candidates "$BED_CANDIDATES" --max-configs 64 --max-duration 60m --json >/tmp/tune.json 2>/tmp/tune.err
echo "=== INFO tune_rc=$?"
section tune-log cat /tmp/tune.err
section tune-json cat /tmp/tune.json
finish
