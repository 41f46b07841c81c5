#!/bin/sh
# The checks on a real OpenWrt router (vmtest/openwrt_test.go boots it):
# started from /etc/rc.local once the image's own boot is done, it
# installs the package with the image's opkg and checks what a user meets,
# with the image's own ubus, uci, logread, netifd, procd and rpcd. One line
# per check on the console: "PSCHECK PASS name" or "PSCHECK FAIL name: why";
# "PSCHECK EXPECT ..." first names every check, so a missing one fails the
# host test too; "PSCHECK DONE" last.
#
# shellcheck shell=ash
# shellcheck disable=SC3043 # local: busybox ash has it
# shellcheck disable=SC2016 # sh -c '...' strings expand in that shell
# shellcheck disable=SC2317 # the check functions are called through run

# shellcheck source=/dev/null # written by the test: PSC_* settings
. /root/pscheck/conf

say() { echo "PSCHECK $*"; }
note() { echo "pscheck: $*" >/dev/console; }
now() { cut -d' ' -f1 /proc/uptime; }
T_START=$(now)

# run NAME FUNCTION [ARGS]: one check; the function's output is the reason
# when it fails.
run() {
	local n="$1" t0 r
	shift
	if [ -n "${PSC_ONLY:-}" ]; then
		case " services install boot-apply $PSC_ONLY " in *" $n "*) ;; *) return 0 ;; esac
	fi
	t0=$(now)
	if r=$("$@" 2>&1); then
		say "PASS $n"
	else
		# All of the output on the console, the last line (the reason the
		# check gives) on the FAIL line.
		echo "$r" | tail -n 80 | sed "s/^/pscheck| $n: /"
		say "FAIL $n: $(echo "$r" | tail -n 1 | cut -c1-400)"
	fi
	say "TIME $n $(awk "BEGIN{printf \"%.1f\", $(now) - $t0}")s"
}

# expected CHECK...: the checks of the list that run() runs, all of them or,
# with PACKET_STEERING_OPENWRT_CHECKS (PSC_ONLY), only those named (and the
# install), for the EXPECT line.
expected() {
	local c only=
	[ -n "${PSC_ONLY:-}" ] || { echo "$*"; return; }
	for c in "$@"; do
		case " services install boot-apply $PSC_ONLY " in *" $c "*) only="$only $c" ;; esac
	done
	echo "$only"
}

# waitfor SECONDS COMMAND...: until COMMAND succeeds.
waitfor() {
	local t="$1" i=0
	shift
	while ! "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -ge "$t" ] && return 1
		sleep 1
	done
}

st() { ubus call packet_steering status; }
# brief: the status without the per-CPU counters, on one line.
brief() { st | jsonfilter -e '@.mode' -e '@.in_sync' -e '@.last_apply' -e '@.configured' | tr '\n' ' '; }
# stf EXPR: one value of the status reply.
stf() { st | jsonfilter -e "$1"; }
insync() { [ "$(stf '@.in_sync')" = true ]; }
mode_is() { [ "$(stf '@.mode')" = "$1" ]; }
# daemon_pid prints the daemon's pid (argv[1] "daemon"), failing when none
# runs: rpcd's plugin runs and the one-shot commands (hotplug, init) are
# the same binary, so pidof alone also finds them while they last.
daemon_pid() {
	local p out=""
	for p in $(pidof packet-steering); do
		[ "$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n 2p)" = daemon ] && out="$out${out:+ }$p"
	done
	[ -n "$out" ] && echo "$out"
}
no_daemon() { ! daemon_pid >/dev/null; }
md5() { md5sum "$@" | cut -d' ' -f1 | tr '\n' ' '; }
# knobs: the steering knobs of eth0, one line each.
knobs() {
	local q f i
	for q in /sys/class/net/eth0/queues/*; do
		for f in rps_cpus rps_flow_cnt xps_cpus; do
			[ -f "$q/$f" ] && echo "${q##*/}/$f=$(cat "$q/$f")"
		done
	done
	for i in $(irqs); do echo "irq$i=$(cat /proc/irq/"$i"/smp_affinity)"; done
	for p in $(napi_pids); do echo "napi$p=$(grep Cpus_allowed_list /proc/"$p"/status | cut -f2)"; done
	echo "sock=$(cat /proc/sys/net/core/rps_sock_flow_entries)"
}
# badcall METHOD JSON: the call is refused as an invalid argument.
badcall() {
	local out rc
	out=$(ubus call packet_steering "$1" "$2" 2>&1)
	rc=$?
	# The stock CLI exits with the status (2), or, when stderr is not a
	# terminal (since ubus 584f56a, 2022), with its negation (254) after
	# "Command failed: ubus call ... (Invalid argument)".
	case "$rc" in 2 | 254) ;; *)
		echo "ubus call packet_steering $1 $2: exit $rc, want 2 or 254"
		return 1
		;;
	esac
	echo "$out" | grep -q '(Invalid argument)\|Command failed: Invalid argument' ||
		{ echo "$1 $2: $(echo "$out" | grep -i failed)"; return 1; }
}
irqs() { sed -n 's/^ *\([0-9]*\):.*virtio[0-9]*-\(input\|output\).*/\1/p' /proc/interrupts; }
napi_pids() {
	local p
	for p in /proc/[0-9]*; do
		case "$(cat "$p/comm" 2>/dev/null)" in napi/eth0-*) echo "${p#/proc/}" ;; esac
	done
}

EXPECT="services install least-privilege boot-apply methods-list status get_queues apply set_mode persist bad-argument
luci-toggle-off luci-toggle-all luci-toggle-auto luci-toggle-flows luci-toggle-after-set_mode
ifdown-ifup hotplug-add napi-after-flap knob-put-back logread daemon-mode-rpcd daemon-mode-daemon
caps-measure overlay-full ubusd-restart rpcd-restart netifd-restart kill-during-apply nonroot-refused
upgrade remove"
[ -n "$PSC_STOCK" ] && EXPECT="$EXPECT takeover handback"
# shellcheck source=vmtest/openwrt/check-luci.sh # the LuCI page in a browser
[ "$PSC_CPUS" = 1 ] || . /root/pscheck/check-luci.sh
# --- a 1-CPU router: rpcd serves the object (globals.daemon auto) --------------

if [ "$PSC_CPUS" = 1 ]; then
	say "EXPECT $(expected services-1cpu install-1cpu served-by-rpcd set_mode-1cpu remove-1cpu)"
	note "image $PSC_IMAGE, $(grep -c ^processor /proc/cpuinfo) CPU, kernel $(uname -r)"
	c_services_1() {
		for p in procd ubusd netifd rpcd uhttpd logd; do
			pidof "$p" >/dev/null || { echo "$p is not running"; return 1; }
		done
		[ "$(grep -c ^processor /proc/cpuinfo)" = 1 ] || { echo "not 1 CPU"; return 1; }
	}
	run services-1cpu c_services_1
	c_install_1() {
		# shellcheck disable=SC2046 # the package files
		opkg install $(ls /root/pscheck/pkg/*.ipk) || return 1
		waitfor 40 ubus call packet_steering status >/dev/null || { echo "no packet_steering object"; return 1; }
	}
	run install-1cpu c_install_1
	c_rpcd_1() {
		[ "$(stf '@.service.served_by')" = rpcd ] || { echo "served by $(stf '@.service.served_by')"; return 1; }
		[ "$(stf '@.policy')" = single-cpu ] || { echo "policy $(stf '@.policy')"; return 1; }
		[ "$(stf '@.platform.cpus')" = 1 ] || { echo "cpus $(stf '@.platform.cpus')"; return 1; }
		if daemon_pid; then echo "a daemon runs on a 1-CPU router"; return 1; fi
		insync || { echo "not in sync: $(brief)"; return 1; }
	}
	run served-by-rpcd c_rpcd_1
	c_set_mode_1() {
		ubus call packet_steering set_mode '{"mode":"off"}' >/dev/null || return 1
		mode_is off || { echo "mode $(stf '@.mode')"; return 1; }
		[ "$(uci -q get packet_steering.globals.mode)" = off ] || { echo "not persisted"; return 1; }
		badcall set_mode '{"mode":"turbo"}' || return 1
		if daemon_pid; then echo "a daemon runs"; return 1; fi
	}
	run set_mode-1cpu c_set_mode_1
	c_remove_1() {
		# shellcheck disable=SC2046 # the installed package names
		opkg remove $(opkg list-installed | sed -n 's/^\(luci-app-packet-steering\|packet-steering\) - .*/\1/p') || return 1
		sleep 3
		if ubus list packet_steering 2>/dev/null; then echo "object still on ubus"; return 1; fi
	}
	run remove-1cpu c_remove_1
	say "TIME all-checks $(awk "BEGIN{printf \"%.1f\", $(now) - $T_START}")s (uptime $(now)s)"
	say DONE
	exit 0
fi

# shellcheck disable=SC2086 # the list, word by word
say "EXPECT $(expected $EXPECT)"
note "image $PSC_IMAGE, $(grep -c ^processor /proc/cpuinfo) CPUs, kernel $(uname -r)"

# --- the image as booted ----------------------------------------------------

c_services() {
	local p
	for p in procd ubusd netifd rpcd uhttpd logd; do
		pidof "$p" >/dev/null || { echo "$p is not running"; return 1; }
	done
	ubus call system board >/dev/null || { echo "ubus call system board failed"; return 1; }
	waitfor 60 sh -c 'ubus call network.interface.lan status | grep -q "\"up\": true"' ||
		{ echo "lan never came up"; ubus call network.interface.lan status; return 1; }
	[ -d /sys/class/net/eth0/queues/rx-3 ] || { echo "eth0 has no 4 rx queues"; ls /sys/class/net/eth0/queues; return 1; }
	[ "$(irqs | wc -l)" -ge 8 ] || { echo "no per-queue IRQs"; grep virtio /proc/interrupts; return 1; }
	[ "$(cat /sys/class/net/eth0/threaded)" = 1 ] || { echo "threaded NAPI is off"; return 1; }
	[ "$(napi_pids | wc -l)" -ge 4 ] || { echo "no NAPI threads"; return 1; }
}
# Threaded NAPI as on a router whose driver turns it on.
echo 1 >/sys/class/net/eth0/threaded
run services c_services
knobs >/tmp/knobs.before

# --- install ----------------------------------------------------------------

c_install() {
	local f
	f=$(ls /root/pscheck/pkg/*.ipk)
	# shellcheck disable=SC2086
	opkg install $f || return 1
	[ -x /usr/sbin/packet-steering ] || { echo "no /usr/sbin/packet-steering"; return 1; }
	/etc/init.d/packet-steering enabled || { echo "service not enabled"; return 1; }
	waitfor 30 ubus list packet_steering || { echo "no packet_steering object"; return 1; }
	daemon_pid >/dev/null || { echo "no daemon process"; return 1; }
}
run install c_install

# The daemon as procd runs it: uid 0 with only CAP_NET_ADMIN (12) and
# CAP_SYS_NICE (23), no new privileges (ujail -C, no namespaces).
c_least_privilege() {
	local p s want=0000000000801000
	p=$(daemon_pid) || { echo "no daemon"; return 1; }
	s=/proc/$p/status
	for f in CapEff CapPrm CapBnd; do
		[ "$(sed -n "s/^$f:[[:space:]]*//p" "$s")" = "$want" ] || { grep '^Cap\|^NoNewPrivs\|^Uid' "$s"; echo "$f is not $want"; return 1; }
	done
	[ "$(sed -n 's/^NoNewPrivs:[[:space:]]*//p' "$s")" = 1 ] || { echo "NoNewPrivs not set"; return 1; }
	[ "$(sed -n 's/^Uid:[[:space:]]*\([0-9]*\).*/\1/p' "$s")" = 0 ] || { grep ^Uid "$s"; return 1; }
	# Same mount, PID and network namespaces as init: /sys writable, the
	# NAPI threads visible.
	for ns in mnt pid net; do
		[ "$(readlink "/proc/$p/ns/$ns")" = "$(readlink "/proc/1/ns/$ns")" ] || { echo "own $ns namespace"; return 1; }
	done
	insync || { echo "not in sync: $(brief)"; return 1; }
	[ "$(stf '@.last_apply.failed')" = 0 ] || { echo "failed writes: $(stf '@.last_apply')"; return 1; }
}
run least-privilege c_least_privilege

c_takeover() {
	if /etc/init.d/packet_steering enabled; then
		echo "netifd's packet_steering is still enabled"
		return 1
	fi
	grep -qx 'packet_steering enabled' /etc/packet-steering/takeover ||
		{ echo "takeover record: $(cat /etc/packet-steering/takeover)"; return 1; }
	# A stopped procd service is not in procd's list.
	if ubus call service list '{"name":"packet_steering"}' | grep -q '"packet_steering"'; then
		echo "netifd's packet_steering still registered with procd"
		return 1
	fi
}
[ -n "$PSC_STOCK" ] && run takeover c_takeover

# What the boot does (rcS runs /etc/rc.d/S25packet-steering boot): the
# knobs handed back, the service stopped, then started by its boot link.
c_boot_apply() {
	/etc/init.d/packet-steering stop
	packet-steering release >/dev/null
	[ -e /etc/rc.d/S25packet-steering ] || { echo "no /etc/rc.d/S25packet-steering"; return 1; }
	/etc/rc.d/S25packet-steering boot
	waitfor 30 ubus list packet_steering || return 1
	waitfor 20 insync || { echo "not in sync after boot: $(st)"; return 1; }
	[ "$(stf '@.last_apply.reason')" = start ] || { echo "last apply: $(stf '@.last_apply')"; return 1; }
	[ "$(stf '@.last_apply.changed')" -gt 0 ] || { echo "the boot apply changed nothing: $(stf '@.last_apply')"; return 1; }
}
run boot-apply c_boot_apply
knobs >/tmp/knobs.applied

# --- the four methods ---------------------------------------------------------

c_list() {
	local l
	l=$(ubus -v list packet_steering)
	for m in status get_queues apply set_mode; do
		echo "$l" | grep -q "\"$m\"" || { echo "no $m in: $l"; return 1; }
	done
}
run methods-list c_list
c_status() {
	local s
	s=$(st) || return 1
	[ "$(echo "$s" | jsonfilter -e '@.mode')" = auto ] || { echo "$s"; return 1; }
	[ "$(echo "$s" | jsonfilter -e '@.platform.cpus')" = "$PSC_CPUS" ] || { echo "cpus: $s"; return 1; }
	# Soon after boot an interface or hotplug event can still be on its
	# way to its apply (a run of this image alone saw in_sync false after
	# the start apply): in sync within 10 s.
	waitfor 10 insync || { st; return 1; }
}
run status c_status
c_get_queues() {
	local q
	q=$(ubus call packet_steering get_queues '{"device":"eth0"}') || return 1
	[ "$(echo "$q" | jsonfilter -e '@.devices[0].name')" = eth0 ] || { echo "$q"; return 1; }
	[ "$(echo "$q" | jsonfilter -e '@.devices[0].rx[*].queue' | wc -l)" = 4 ] || { echo "rx queues: $q"; return 1; }
}
run get_queues c_get_queues
c_apply() {
	local r
	r=$(ubus call packet_steering apply '{"reason":"pscheck"}') || return 1
	echo "$r" | jsonfilter -e '@.duration_us' >/dev/null || { echo "$r"; return 1; }
	[ "$(stf '@.last_apply.reason')" = pscheck ] || { echo "last apply: $(stf '@.last_apply')"; return 1; }
}
run apply c_apply
c_set_mode() {
	local r
	r=$(ubus call packet_steering set_mode '{"mode":"all"}') || return 1
	[ "$(echo "$r" | jsonfilter -e '@.mode')" = all ] || { echo "$r"; return 1; }
	mode_is all || { echo "status: $(st)"; return 1; }
	insync || { echo "not in sync: $(brief)"; return 1; }
}
run set_mode c_set_mode
c_persist() {
	[ "$(uci -q get packet_steering.globals.mode)" = all ] ||
		{ echo "packet_steering.globals.mode=$(uci -q get packet_steering.globals.mode)"; return 1; }
	[ "$(uci -q get network.@globals[0].packet_steering)" = 2 ] ||
		{ echo "network packet_steering=$(uci -q get network.@globals[0].packet_steering)"; return 1; }
}
run persist c_persist
last_time() { stf '@.last_apply.time'; }
applied_since() { [ "$(last_time)" != "$1" ]; }
# settle: until no apply has happened for 3 s (at most 30 s): the reloads
# procd still has queued from the checks before (interface events run one
# second late, more on a loaded machine) must not land after the apply a
# check waits for and hide it.
settle() {
	local a b i=0
	a=$(last_time)
	while [ "$i" -lt 10 ]; do
		sleep 3
		b=$(last_time)
		[ "$a" = "$b" ] && return 0
		a=$b
		i=$((i + 1))
	done
}
c_bad_argument() {
	local before after rc k out
	# set_mode's network write above may still have a reload (and a
	# re-created NAPI thread) coming: the knobs are compared once it ran.
	settle
	before=$(md5 /etc/config/packet_steering /etc/config/network)
	k=$(knobs)
	badcall set_mode '{"mode":"turbo"}' || return 1
	badcall apply '{"dryrun":true}' || return 1
	badcall set_mode '{"mode":"off","flows":-1}' || return 1
	badcall get_queues '{"device":"nope0"}' || return 1
	after=$(md5 /etc/config/packet_steering /etc/config/network)
	[ "$before" = "$after" ] || { echo "config files changed"; return 1; }
	out=$(knobs)
	if [ "$k" != "$out" ]; then
		echo "$k" >/tmp/knobs.a
		echo "$out" >/tmp/knobs.b
		echo "knobs changed: before $(grep -vxF -f /tmp/knobs.b /tmp/knobs.a | tr '\n' ' ')after $(grep -vxF -f /tmp/knobs.a /tmp/knobs.b | tr '\n' ' ')"
		echo "last apply: $(stf '@.last_apply')"
		return 1
	fi
	mode_is all || { echo "mode changed: $(st)"; return 1; }
}
run bad-argument c_bad_argument

# --- LuCI's network page: network.globals.packet_steering ------------------

# toggle VALUE [FLOWS]: what LuCI's Save & Apply does with the setting.
toggle() {
	uci set network.@globals[0].packet_steering="$1"
	if [ -n "${2:-}" ]; then uci set network.@globals[0].steering_flows="$2"; fi
	uci commit network
	reload_config
}
wait_mode() {
	waitfor 30 mode_is "$1" || { echo "mode $(stf '@.mode'), want $1: $(st)"; return 1; }
	waitfor 15 insync || { echo "not in sync: $(brief)"; return 1; }
	[ "$(uci -q get packet_steering.globals.mode)" = "$1" ] || { echo "packet_steering.globals.mode=$(uci -q get packet_steering.globals.mode)"; return 1; }
}
c_toggle() { toggle "$1" && wait_mode "$2"; }
run luci-toggle-off c_toggle 0 off
run luci-toggle-all c_toggle 2 all
run luci-toggle-auto c_toggle 1 auto
c_toggle_flows() {
	toggle 1 128 || return 1
	waitfor 30 sh -c '[ "$(ubus call packet_steering status | jsonfilter -e @.configured.flows)" = 128 ]' ||
		{ echo "flows: $(stf '@.configured')"; return 1; }
	[ "$(uci -q get packet_steering.globals.flows)" = 128 ] || { echo "packet_steering.globals.flows=$(uci -q get packet_steering.globals.flows)"; return 1; }
	mode_is auto || { echo "mode: $(stf '@.mode')"; return 1; }
	waitfor 15 insync || { echo "not in sync: $(brief)"; return 1; }
}
run luci-toggle-flows c_toggle_flows
c_toggle_after() {
	ubus call packet_steering set_mode '{"mode":"off"}' >/dev/null || return 1
	mode_is off || { echo "set_mode off: $(st)"; return 1; }
	toggle 1 0 && wait_mode auto
}
run luci-toggle-after-set_mode c_toggle_after

# --- netifd's events ------------------------------------------------------------

c_ifdown_ifup() {
	local t
	t=$(last_time)
	ifdown lan
	sleep 3
	ifup lan
	waitfor 30 sh -c 'ubus call network.interface.lan status | grep -q "\"up\": true"' || { echo "lan not up again"; return 1; }
	waitfor 20 applied_since "$t" || { echo "no apply after the interface events: $(stf '@.last_apply')"; return 1; }
	waitfor 15 insync || { echo "not in sync: $(brief)"; return 1; }
}
run ifdown-ifup c_ifdown_ifup
c_hotplug_add() {
	settle
	ip link add psv0 type veth peer name psv1 || return 1
	waitfor 20 sh -c 'logread | grep -q "reason=hotplug\|device=psv"; [ "$(ubus call packet_steering status | jsonfilter -e @.last_apply.reason)" = hotplug ]' ||
		{ echo "no hotplug apply: $(stf '@.last_apply')"; ip link del psv0; return 1; }
	# Eventually in sync: on 22.03 netifd's hotplug script rewrites every
	# device's masks after each add (psv0 and psv1), and the apply follows it.
	waitfor 30 insync || {
		knobs
		logread | grep -i 'packet-steering\|hotplug' | tail -n 15
		# shellcheck disable=SC2009 # every process with its arguments
		ps w | grep -v ' \[.*\]$'
		echo "not in sync after the hotplug of psv0: $(brief)"
		ip link del psv0
		return 1
	}
	ip link del psv0
}
run hotplug-add c_hotplug_add
c_napi_flap() {
	local t
	t=$(last_time)
	ip link set eth0 down
	sleep 2
	ip link set eth0 up
	waitfor 30 sh -c 'ubus call network.interface.lan status | grep -q "\"up\": true"' || { echo "lan not up again"; return 1; }
	[ "$(cat /sys/class/net/eth0/threaded)" = 1 ] || { echo "threaded NAPI off after the flap"; return 1; }
	[ "$(napi_pids | wc -l)" -ge 4 ] || { echo "NAPI threads gone"; return 1; }
	waitfor 20 insync || { knobs; echo "not in sync after the flap: $(brief)"; return 1; }
}
run napi-after-flap c_napi_flap
# norm MASK: a CPU mask without commas and leading zeros ("" is 0).
norm() { echo "$1" | tr -d ',' | sed 's/^0*//'; }
c_knob_back() {
	local f=/sys/class/net/eth0/queues/rx-0/rps_cpus want
	want=$(ubus call packet_steering get_queues '{"device":"eth0"}' | jsonfilter -e '@.devices[0].rx[0].want_rps_cpus')
	[ "$(norm "$(cat $f)")" = "$(norm "$want")" ] || { echo "$f is $(cat $f) before the test, planned $want"; return 1; }
	if [ -z "$(norm "$want")" ]; then echo 3 >$f; else echo 0 >$f; fi
	[ "$(norm "$(cat $f)")" != "$(norm "$want")" ] || { echo "could not change $f"; return 1; }
	waitfor 10 sh -c '[ "$(ubus call packet_steering status | jsonfilter -e @.in_sync)" = false ]' ||
		{ echo "status did not see $f change"; return 1; }
	ifup lan
	waitfor 30 sh -c "[ \"\$(cat $f | tr -d , | sed 's/^0*//')\" = '$(norm "$want")' ]" || { echo "$f is $(cat $f), want $want"; return 1; }
	waitfor 10 insync || { echo "not in sync: $(brief)"; return 1; }
}
run knob-put-back c_knob_back

c_logread() {
	local l
	l=$(logread -e packet-steering)
	echo "$l" | grep -q 'daemon\.info packet-steering\[[0-9]*\]: applied' || { echo "no daemon.info applied line: $(echo "$l" | tail -n 3)"; return 1; }
	if [ -n "$PSC_STOCK" ]; then
		echo "$l" | grep -q 'daemon\.notice packet-steering.*took steering over' || { echo "no daemon.notice takeover line"; return 1; }
	fi
}
run logread c_logread
# The LuCI page in the host's browser (check-luci.sh): the daemon running, mode auto.
luci_checks

# --- who serves the object: globals.daemon ------------------------------------

served_by() { [ "$(stf '@.service.served_by')" = "$1" ]; }
c_mode_rpcd() {
	uci set packet_steering.globals.daemon=0
	uci commit packet_steering
	reload_config
	waitfor 40 served_by rpcd || { echo "served by $(stf '@.service.served_by')"; return 1; }
	waitfor 10 no_daemon || { echo "a daemon still runs: $(daemon_pid)"; return 1; }
	ubus call packet_steering set_mode '{"mode":"all"}' >/dev/null || { echo "set_mode through rpcd failed"; return 1; }
	mode_is all || { echo "mode: $(st)"; return 1; }
	[ "$(uci -q get packet_steering.globals.mode)" = all ] || { echo "not persisted through rpcd"; return 1; }
	ubus call packet_steering get_queues >/dev/null || return 1
	ubus call packet_steering apply >/dev/null || return 1
	insync || { echo "not in sync: $(brief)"; return 1; }
}
run daemon-mode-rpcd c_mode_rpcd
c_mode_daemon() {
	uci set packet_steering.globals.daemon=1
	uci commit packet_steering
	reload_config
	waitfor 40 served_by daemon || { echo "served by $(stf '@.service.served_by')"; return 1; }
	daemon_pid >/dev/null || { echo "no daemon"; return 1; }
	ubus call packet_steering set_mode '{"mode":"auto"}' >/dev/null || return 1
	waitfor 10 insync || { echo "not in sync: $(brief)"; return 1; }
}
run daemon-mode-daemon c_mode_daemon

# --- least privilege: what the apply needs -----------------------------------

# capsjson CAP...: an OCI capabilities file for ujail -C with exactly these.
capsjson() {
	local l="" c
	for c in "$@"; do l="$l${l:+, }\"$c\""; done
	printf '{"bounding":[%s],"effective":[%s],"permitted":[%s],"inheritable":[%s],"ambient":[%s]}\n' "$l" "$l" "$l" "$l" "$l"
}
# The one-shot apply from released knobs, as root with only the named
# capabilities (ujail -C, no namespaces: what procd runs for an instance
# with a jail and a capabilities file): how many writes fail.
c_caps_measure() {
	local set out
	for set in CAP_CHOWN CAP_NET_ADMIN CAP_SYS_NICE "CAP_NET_ADMIN CAP_SYS_NICE" "CAP_NET_ADMIN CAP_DAC_OVERRIDE"; do
		# shellcheck disable=SC2086
		capsjson $set >/tmp/pscaps.json
		packet-steering release >/dev/null 2>&1
		rm -f /tmp/pscaps.out
		ujail -C /tmp/pscaps.json -- /bin/sh -c 'exec /usr/sbin/packet-steering apply --reason caps --json >/tmp/pscaps.out 2>/tmp/pscaps.err'
		out=$(cat /tmp/pscaps.out 2>/dev/null)
		note "caps [$set]: changed $(echo "$out" | jsonfilter -e '@.changed[*]' | wc -l) failed $(echo "$out" | jsonfilter -e '@.failed[*]' | wc -l) ($(head -c 300 /tmp/pscaps.err | tr '\n' ' '))"
		echo "$out" | jsonfilter -e '@.failed[*]' | head -n 3 | while read -r l; do note "  failed: $l"; done
	done
	ubus call packet_steering apply '{"reason":"caps-done"}' >/dev/null
	waitfor 10 insync
}
run caps-measure c_caps_measure

# --- faults -------------------------------------------------------------------

c_overlay_full() {
	local before rc out
	mkdir -p /tmp/cfgsave && cp -a /etc/config/. /tmp/cfgsave/ || return 1
	mount -t tmpfs -o size=256k pscheck-config /etc/config || return 1
	cp -a /tmp/cfgsave/. /etc/config/
	dd if=/dev/zero of=/etc/config/.fill bs=1k 2>/dev/null
	before=$(md5 /etc/config/packet_steering /etc/config/network)
	out=$(ubus call packet_steering set_mode '{"mode":"off"}' 2>&1)
	rc=$?
	local after
	after=$(md5 /etc/config/packet_steering /etc/config/network)
	local m
	m=$(stf '@.mode')
	rm -f /etc/config/.fill
	ls -la /etc/config
	cp -a /etc/config/. /tmp/cfgsave/
	umount /etc/config || umount -l /etc/config
	[ "$rc" != 0 ] || { echo "set_mode with the config full: exit 0 ($out)"; return 1; }
	echo "$out" | grep -qi 'space\|error' || { echo "no clear error: $out"; return 1; }
	note "overlay full: exit $rc: $out"
	[ "$before" = "$after" ] || { echo "config files changed"; return 1; }
	[ "$m" = auto ] || { echo "mode became $m"; return 1; }
	uci -q get packet_steering.globals.mode >/dev/null || { echo "packet_steering config broken"; return 1; }
}
run overlay-full c_overlay_full

object_back() { waitfor 40 sh -c 'ubus call packet_steering status >/dev/null' || { echo "object not back"; return 1; }; }
c_ubusd_restart() {
	local p
	p=$(pidof ubusd)
	kill "$p"
	waitfor 20 sh -c "pidof ubusd && [ \"\$(pidof ubusd)\" != $p ]" || { echo "ubusd not respawned"; return 1; }
	object_back || return 1
	waitfor 10 insync || { echo "not in sync: $(brief)"; return 1; }
}
run ubusd-restart c_ubusd_restart
# logd does not register its log object again with a new ubusd (logger and
# logread then fail with "Failed to find log object"): restarted here so
# that the checks after this one can read the log.
/etc/init.d/log restart
waitfor 10 ubus list log || note "logd's object did not come back"
# uhttpd's /ubus (uhttpd-mod-ubus) answers "Object not found" for the
# session object after the new ubusd (seen on 22.03.4 by the Statistics
# page's browser run, mon-graph-page): restarted for the browser checks after this.
/etc/init.d/uhttpd restart
c_rpcd_restart() {
	/etc/init.d/rpcd restart
	sleep 3
	object_back || return 1
	served_by daemon || { echo "served by $(stf '@.service.served_by')"; return 1; }
}
run rpcd-restart c_rpcd_restart
c_netifd_restart() {
	/etc/init.d/network restart
	waitfor 40 sh -c 'ubus call network.interface.lan status | grep -q "\"up\": true"' || { echo "lan not up again"; return 1; }
	object_back || return 1
	waitfor 30 insync || { echo "not in sync: $(brief)"; return 1; }
}
run netifd-restart c_netifd_restart
c_kill_apply() {
	local p before
	p=$(daemon_pid)
	before=$(md5 /etc/config/packet_steering /etc/config/network)
	(ubus call packet_steering set_mode '{"mode":"all","persist":false}' >/dev/null 2>&1 &)
	kill -9 "$p"
	waitfor 30 sh -c "pidof packet-steering && [ \"\$(pidof packet-steering)\" != $p ]" || { echo "not respawned"; return 1; }
	object_back || return 1
	waitfor 20 insync || { echo "not in sync after the respawn: $(st)"; return 1; }
	[ "$before" = "$(md5 /etc/config/packet_steering /etc/config/network)" ] || { echo "config changed"; return 1; }
	mode_is auto || { echo "mode $(stf '@.mode') after the respawn (configured auto)"; return 1; }
}
run kill-during-apply c_kill_apply

# A non-root ubus client: the image's nobody user.
c_nonroot() {
	local out rc
	out=$(start-stop-daemon -S -c nobody -x /bin/ubus -- call packet_steering set_mode '{"mode":"off"}' 2>&1)
	rc=$?
	[ "$rc" != 0 ] || { echo "nobody called set_mode: $out"; return 1; }
	out=$(start-stop-daemon -S -c nobody -x /bin/ubus -- call packet_steering apply 2>&1)
	rc=$?
	[ "$rc" != 0 ] || { echo "nobody called apply: $out"; return 1; }
	mode_is auto || { echo "mode changed: $(stf '@.mode')"; return 1; }
}
run nonroot-refused c_nonroot

# --- upgrade and removal ----------------------------------------------------

c_upgrade() {
	local old p exe
	old=$(daemon_pid)
	opkg install "$PSC_NEXT" || return 1
	opkg list-installed | grep -q "^packet-steering - $(basename "$PSC_NEXT" | cut -d_ -f2)\$" ||
		{ echo "installed: $(opkg list-installed | grep packet-steering)"; return 1; }
	object_back || return 1
	# The daemon runs the file the new package installed (opkg replaced the
	# old one: a daemon left on it would show it as deleted), restarted.
	p=$(daemon_pid)
	[ "$(echo "$p" | wc -w)" = 1 ] || { echo "daemons: $p"; return 1; }
	[ "$p" != "$old" ] || { echo "the daemon ($p) was not restarted"; return 1; }
	exe=$(readlink "/proc/$p/exe")
	[ "$exe" = /usr/sbin/packet-steering ] || { echo "the daemon runs $exe"; return 1; }
	[ "$(md5 "/proc/$p/exe")" = "$(md5 /usr/sbin/packet-steering)" ] || { echo "the daemon is not the installed binary"; return 1; }
	[ "$(uci -q get packet_steering.globals.mode)" = auto ] || { echo "config not kept"; return 1; }
	waitfor 10 insync || { echo "not in sync: $(brief)"; return 1; }
}
run upgrade c_upgrade

c_remove() {
	local i p irqdef pkgs
	note "knobs before the removal:"
	knobs
	pkgs=$(opkg list-installed | sed -n 's/^\(luci-app-packet-steering\|packet-steering\) - .*/\1/p')
	# shellcheck disable=SC2086
	opkg remove $pkgs || return 1
	sleep 3
	if daemon_pid; then echo "daemon still runs"; return 1; fi
	if ubus list packet_steering 2>/dev/null; then echo "object still on ubus"; return 1; fi
	[ ! -e /etc/init.d/packet-steering ] || { echo "init script left"; return 1; }
	irqdef=$(cat /proc/irq/default_smp_affinity)
	for i in $(irqs); do
		[ "$(cat /proc/irq/"$i"/smp_affinity)" = "$irqdef" ] || { echo "irq $i: $(cat /proc/irq/"$i"/smp_affinity), want $irqdef"; return 1; }
	done
	for p in $(napi_pids); do
		[ "$(grep Cpus_allowed_list /proc/"$p"/status | cut -f2)" = "0-$((PSC_CPUS - 1))" ] || { echo "napi thread $p: $(grep Cpus_allowed_list /proc/"$p"/status)"; return 1; }
	done
	[ "$(cat /proc/sys/net/core/rps_sock_flow_entries)" = 0 ] || { echo "rps_sock_flow_entries $(cat /proc/sys/net/core/rps_sock_flow_entries)"; logread | tail -n 25 >/dev/console; return 1; }
	if [ -z "$PSC_STOCK" ]; then
		for i in /sys/class/net/eth0/queues/tx-*/xps_cpus; do
			case "$(cat "$i")" in 0 | 00 | 00000000) ;; *) echo "$i: $(cat "$i")"; return 1 ;; esac
		done
	fi
}
# shellcheck source=/dev/null # the monitoring packages (check-monitoring.sh)
[ -f /root/pscheck/mon/check-monitoring.sh ] && . /root/pscheck/mon/check-monitoring.sh
# shellcheck source=/dev/null # the seccomp filter (check-seccomp.sh)
[ -f /root/pscheck/check-seccomp.sh ] && . /root/pscheck/check-seccomp.sh
run remove c_remove

c_handback() {
	/etc/init.d/packet_steering enabled || { echo "netifd's packet_steering not enabled again"; return 1; }
	# Enabled and started: its rule (packet_steering=1: every CPU) is in place.
	waitfor 10 sh -c 'grep -q "^0*f$" /sys/class/net/eth0/queues/rx-0/rps_cpus' ||
		{ echo "stock rule not applied: rx-0 rps_cpus $(cat /sys/class/net/eth0/queues/rx-0/rps_cpus)"; return 1; }
}
[ -n "$PSC_STOCK" ] && run handback c_handback

note "knobs before the install:"
cat /tmp/knobs.before
note "knobs as applied at boot:"
cat /tmp/knobs.applied
say "TIME all-checks $(awk "BEGIN{printf \"%.1f\", $(now) - $T_START}")s (uptime $(now)s)"
say DONE
