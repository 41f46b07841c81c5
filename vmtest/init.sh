#!/bin/busybox sh
# /init of the VM test's initramfs (package vmtest). Runs packet-steering on
# the guest's real root and prints what it did and what the kernel reports
# between "=== BEGIN name" and "=== END name rc" lines on the console, for
# the harness to parse. Ends with poweroff.
# shellcheck shell=sh

/bin/busybox mkdir -p /proc /sys /dev /sbin /usr/bin /usr/sbin
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /tmp /var/run/ubus /var/lock /etc/config
mount -t tmpfs tmp /tmp
# Kernel messages off the console: only the sections below go there.
echo 1 >/proc/sys/kernel/printk

# VMT_MODULES, VMT_TRAFFIC, VMT_ECHO, VMT_COUNT, VMT_DEVICES, VMT_ADAPTIVE,
# VMT_FLOOD, VMT_PPPOE, VMT_MEMORY
# shellcheck source=/dev/null
. /etc/vmtest.conf

section() {
	name=$1
	shift
	echo "=== T $name $(cut -d' ' -f1 /proc/uptime)"
	echo "=== BEGIN $name"
	"$@" 2>&1
	rc=$?
	echo "=== END $name $rc"
}

finish() {
	echo "=== T done $(cut -d' ' -f1 /proc/uptime)"
	echo "=== DONE"
	sync
	poweroff -f
}

for m in $VMT_MODULES; do
	insmod "/lib/modules/$m.ko" || echo "insmod $m failed"
done

# count prints how many of its arguments exist.
count() {
	k=0
	for f in "$@"; do
		[ -e "$f" ] && k=$((k + 1))
	done
	echo $k
}

# Wait for the NICs the harness gave the guest.
n=0
while [ "$(count /sys/class/net/eth*)" -lt "$VMT_DEVICES" ] && [ $n -lt 100 ]; do
	sleep 0.1
	n=$((n + 1))
done

# The multi-queue NIC (more than one rx queue) gets 198.18.0.2, the other
# 198.18.1.2; threaded NAPI on both.
MQ=
SQ=
for d in /sys/class/net/eth*; do
	[ -e "$d" ] || continue
	dev=${d##*/}
	ip link set "$dev" up
	if [ "$(count "$d"/queues/rx-*)" -gt 1 ]; then
		MQ=$dev
		ip addr add 198.18.0.2/24 dev "$dev"
	else
		SQ=$dev
		ip addr add 198.18.1.2/24 dev "$dev"
	fi
	echo 1 >"$d/threaded"
done
echo "=== INFO mq=$MQ sq=$SQ cpus=$(nproc)"

ps_=/usr/sbin/packet-steering
sock=/var/run/ubus/ubus.sock

# napi_pids lists the threaded-NAPI kernel threads (they exist once
# `threaded` is on, and stay).
napi_pids() {
	for p in /proc/[0-9]*; do
		read -r c <"$p/comm" 2>/dev/null || continue
		case $c in
		napi/*) echo "${p##*/}" ;;
		esac
	done
}
NAPI_PIDS=$(napi_pids)

# kernel_state prints the kernel's own view of every knob, read directly
# from the files (not through packet-steering). Shell builtins only in the
# loops: a fork costs a lot on an emulated CPU.
kernel_state() {
	for f in /proc/irq/[0-9]*; do
		read -r v <"$f/smp_affinity_list" 2>/dev/null || continue
		echo "irq ${f##*/} $v"
	done
	for p in $NAPI_PIDS; do
		read -r c <"/proc/$p/comm"
		v=
		while read -r k rest; do
			[ "$k" = Cpus_allowed_list: ] && v=$rest
		done <"/proc/$p/status"
		echo "thread $p $c $v"
	done
	for q in /sys/class/net/*/queues/rx-*; do
		d=${q%/queues/*}
		read -r m <"$q/rps_cpus"
		read -r n <"$q/rps_flow_cnt"
		echo "rps ${d##*/} ${q##*/} $m $n"
	done
	for q in /sys/class/net/*/queues/tx-*; do
		d=${q%/queues/*}
		m=
		read -r m <"$q/xps_cpus" 2>/dev/null
		echo "xps ${d##*/} ${q##*/} $m"
	done
	read -r v </proc/sys/net/core/rps_sock_flow_entries
	echo "sysctl rps_sock_flow_entries $v"
	grep -E 'virtio|eth' /proc/interrupts
	for d in /sys/class/net/eth*; do
		echo "busdev ${d##*/} $(basename "$(readlink -f "$d/device")")"
	done
}

# counters prints what the traffic phases compare: every NAPI thread's
# /proc/PID/stat and schedstat, and the per-CPU softnet counters and IRQ
# counts as packet-steering's snapshot reads them.
counters() {
	for p in $NAPI_PIDS; do
		read -r s <"/proc/$p/stat"
		read -r ss <"/proc/$p/schedstat"
		echo "stat $s schedstat $ss"
	done
	printf 'snapshot '
	$ps_ snapshot | tr -d '\n\t'
	echo
}

section snapshot $ps_ snapshot
section plan $ps_ plan --json
section status-before $ps_ status
section apply $ps_ apply --json --reason vmtest
section queues $ps_ queues
section queues-json $ps_ queues --json
section state kernel_state
section apply-again $ps_ apply --json --reason vmtest-again

# Per-NAPI knobs (napi_check_test.go): custom mode with defer_hard_irqs,
# gro_flush_timeout and, for rx-3, per-NAPI threaded 0 on the multi-queue
# NIC. Every guest plans it (a kernel without napi-set: the hint); one
# with napi-set (6.13+) applies it, shows it, applies again, releases,
# and then goes back to the plain apply the daemon check expects (with
# the NAPI threads listed again: rx-3's thread is a new one).
if [ -n "$MQ" ]; then
	saved=
	[ -e /etc/config/packet_steering ] && cp /etc/config/packet_steering /tmp/ps.saved && saved=1
	printf "config globals 'globals'\n\toption mode 'custom'\n\nconfig device\n\toption name '%s'\n\toption defer_hard_irqs '2'\n\toption gro_flush_timeout '20000'\n\tlist queue_gro_flush_timeout 'rx-1=200000'\n\tlist queue_napi_threaded 'rx-3=0'\n" "$MQ" >/etc/config/packet_steering
	section napi-plan $ps_ plan --json
	if $ps_ snapshot | grep -q '"napi-set"'; then
		section napi-apply $ps_ apply --json --reason vmtest-napi
		section napi-snapshot $ps_ snapshot
		section napi-queues-json $ps_ queues --json
		section napi-apply-again $ps_ apply --json --reason vmtest-napi-again
		section napi-release $ps_ release --json
		section napi-released $ps_ snapshot
	fi
	if [ -n "$saved" ]; then cp /tmp/ps.saved /etc/config/packet_steering; else rm -f /etc/config/packet_steering; fi
	section napi-reapply $ps_ apply --json --reason vmtest-napi-reapply
	NAPI_PIDS=$(napi_pids)
fi

# The daemon on a ubus broker, driven with `packet-steering call`. On a
# single-CPU guest packet_steering.globals.daemon 'auto' leaves the object to
# rpcd's exec plugin and the daemon refuses to start, so the guest forces
# the daemon (option daemon '1'): this is the daemon's test.
printf "\nconfig globals 'globals'\n\toption daemon '1'\n" >/etc/config/packet_steering
# start_broker starts the ubus broker and waits for its socket.
start_broker() {
	/usr/bin/vmguest broker "$sock" &
	broker=$!
	n=0
	while [ ! -S "$sock" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
}
# start_daemon BINARY LOG starts BINARY's daemon, its log appended to LOG,
# and waits until it answers.
start_daemon() {
	$1 daemon --socket "$sock" 2>>"$2" &
	daemon=$!
	n=0
	until $1 call --socket "$sock" --timeout 5 status >/dev/null 2>&1 || [ $n -ge 150 ]; do
		sleep 0.2
		n=$((n + 1))
	done
}
start_broker
start_daemon $ps_ /tmp/daemon.log
section call-status $ps_ call --socket "$sock" --timeout 20 status
section call-queues $ps_ call --socket "$sock" --timeout 20 get_queues
section call-apply $ps_ call --socket "$sock" --timeout 20 apply '{"reason":"vmtest-daemon"}'
# The daemon's memory around 1,000 calls, on the guest of the budget's
# architecture (at most 6 MiB of RSS for the mipsel_24kc router build;
# check_test.go checkMemory): 1-3 minutes of TCG time.
if [ "$VMT_MEMORY" = 1 ]; then
	section daemon-memory /usr/bin/vmguest calls "$sock" "$daemon" 1000
fi
kill "$daemon"
wait "$daemon"
echo "daemon exit $?"
section daemon-log cat /tmp/daemon.log
kill "$broker"
wait "$broker"

if [ "$VMT_TRAFFIC" != 1 ] || [ -z "$MQ" ]; then
	finish
fi

# Traffic: for each tx queue of the multi-queue NIC, echo datagrams sent from
# a CPU whose XPS mask holds that queue. The host's tap remembers which queue
# each flow came from and sends the replies into the same queue pair, so
# phase i loads rx-i and tx-i. The single-queue NIC gets one phase.
ncpu=$(nproc)
# xps_cpu DEV TXQ prints the first CPU whose XPS mask holds the tx queue
# (the queue's number when none does).
xps_cpu() {
	mask=
	read -r mask <"/sys/class/net/$1/queues/$2/xps_cpus" 2>/dev/null
	mask=$(echo "$mask" | tr -d ,)
	cpu=
	c=0
	while [ $c -lt "$ncpu" ]; do
		if [ -n "$mask" ] && [ $(((0x$mask >> c) & 1)) = 1 ]; then
			cpu=$c
			break
		fi
		c=$((c + 1))
	done
	[ -n "$cpu" ] || cpu=${2#tx-}
	[ "$cpu" -lt "$ncpu" ] || cpu=0
	echo "$cpu"
}
phase() {
	ph=$1 dev=$2 txq=$3 dst=$4
	cpu=$(xps_cpu "$dev" "$txq")
	# One round first so the ARP entry and the tap's flow entry exist.
	/usr/bin/vmguest load -cpu "$cpu" -dst "$dst" -count 16 >/dev/null 2>&1
	section "$ph-before" counters
	section "$ph-load" /usr/bin/vmguest load -cpu "$cpu" -dst "$dst" -count "$VMT_COUNT"
	section "$ph-after" counters
	echo "=== PHASE $ph $dev $txq $cpu"
}
for q in /sys/class/net/"$MQ"/queues/tx-*; do
	txq=${q##*/}
	phase "load-$MQ-$txq" "$MQ" "$txq" "198.18.0.1:$VMT_ECHO"
done
if [ -n "$SQ" ]; then
	phase "load-$SQ-tx-0" "$SQ" tx-0 "198.18.1.1:$VMT_ECHO"
fi

# The adaptive mode, functionally (the router build's daemon): the
# loop's options shortened through the `config adaptive` section; a flood
# from the host side into every rx queue of the multi-queue NIC (steady,
# balanced: nothing may move); then a process that fills the CPU serving
# rx-1 (the loop must move rx-1's NAPI thread and IRQ away, announced as
# packet_steering.applied with the reason); a daemon restart (the
# deviation stays); then the process and the flood stop (rx-1 goes back).
# await_events N SECS waits up to SECS seconds until N adaptive moves were
# announced.
await_events() {
	want=$1 secs=$2
	n=0
	while [ "$(grep -c '"reason": *"adaptive: ' /tmp/events.log 2>/dev/null)" -lt "$want" ] && [ $n -lt "$secs" ]; do
		sleep 1
		n=$((n + 1))
	done
}
adaptive_check() {
	pst=/usr/sbin/packet-steering
	printf "config globals 'globals'\n\toption daemon '1'\n\toption mode 'adaptive'\n\n" >/etc/config/packet_steering
	printf "config adaptive 'adaptive'\n\toption interval '1'\n\toption max_idle_interval '2'\n\toption dwell '6'\n\toption cool_intervals '2'\n\toption idle_pps '50'\n\toption busy_load '80'\n\toption busy_net_load '2'\n\toption min_queue_load '1'\n\toption margin '5'\n" >>/etc/config/packet_steering
	start_broker
	start_daemon $pst /tmp/adaptive.log
	/usr/bin/vmguest events "$sock" 'packet_steering.*' >/tmp/events.log 2>/tmp/events.err &
	events=$!
	n=0
	until grep -q listening /tmp/events.err 2>/dev/null || [ $n -ge 100 ]; do sleep 0.1; n=$((n + 1)); done
	hogcpu=$(xps_cpu "$MQ" tx-1)
	echo "=== INFO adaptive_queue=rx-1 adaptive_cpu=$hogcpu"
	section adaptive-start $pst call --socket "$sock" --timeout 20 status
	kas=
	for q in /sys/class/net/"$MQ"/queues/tx-*; do
		i=${q##*-}
		/usr/bin/vmguest keepalive -cpu "$(xps_cpu "$MQ" "tx-$i")" -port $((VMT_FLOOD + i)) -dst "198.18.0.1:$((VMT_FLOOD + i))" &
		kas="$kas $!"
	done
	sleep 1
	echo "=== FLOOD start"
	sleep 10
	section adaptive-steady $pst call --socket "$sock" --timeout 20 status
	/usr/bin/vmguest hog -cpu "$hogcpu" &
	hog=$!
	await_events 1 45
	section adaptive-moved $pst call --socket "$sock" --timeout 20 status
	section adaptive-moved-queues $pst call --socket "$sock" --timeout 20 get_queues "{\"device\":\"$MQ\"}"
	section adaptive-moved-oneshot $pst status
	kill "$daemon"
	wait "$daemon"
	start_daemon $pst /tmp/adaptive.log
	sleep 3
	section adaptive-restarted $pst call --socket "$sock" --timeout 20 status
	kill "$hog"
	wait "$hog"
	await_events 2 20
	echo "=== FLOOD stop"
	await_events 2 30
	section adaptive-back $pst call --socket "$sock" --timeout 20 status
	section adaptive-back-queues $pst call --socket "$sock" --timeout 20 get_queues "{\"device\":\"$MQ\"}"
	# shellcheck disable=SC2086
	kill $kas "$events" "$daemon"
	wait "$daemon"
	kill "$broker"
	wait "$broker"
	section adaptive-events cat /tmp/events.log
	section adaptive-log cat /tmp/adaptive.log
}
if [ "$VMT_ADAPTIVE" = 1 ]; then
	adaptive_check
fi

# auto steers a PPPoE device: a kernel-only session over the single-queue
# NIC (no peer answers: the plan needs the ppp netdev and netifd's config,
# not traffic; vmtest/bed_pppoe_test.go is the bed with traffic). Its rx-0
# RPS must be set, away from the carrier's rx NAPI thread.
pppoe_check() {
	/usr/bin/vmguest pppoe -dev "$SQ" -peer 02:00:5e:10:00:01 -sid 4660 -name pppoe-wan >/tmp/pppoe.out 2>&1 &
	pppoe=$!
	n=0
	while [ ! -e /sys/class/net/pppoe-wan ] && [ $n -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	ip link set pppoe-wan up
	printf "config interface 'wan'\n\toption proto 'pppoe'\n\toption device '%s'\n" "$SQ" >/etc/config/network
	printf "config globals 'globals'\n\toption mode 'auto'\n" >/etc/config/packet_steering
	section pppoe-apply $ps_ apply --json --reason vmtest-pppoe
	m=
	read -r m </sys/class/net/pppoe-wan/queues/rx-0/rps_cpus
	napi=
	for p in $NAPI_PIDS; do
		read -r c <"/proc/$p/comm"
		case $c in
		napi/"$SQ"-0) ;;
		napi/"$SQ"-*)
			while read -r k rest; do
				[ "$k" = Cpus_allowed_list: ] && napi=$rest
			done <"/proc/$p/status"
			;;
		esac
	done
	echo "=== INFO pppoe_rps=$m pppoe_carrier_napi=$napi"
	kill "$pppoe"
	wait "$pppoe"
	section pppoe-session cat /tmp/pppoe.out
}
if [ "$VMT_PPPOE" = 1 ] && [ -n "$SQ" ]; then
	pppoe_check
fi
finish
