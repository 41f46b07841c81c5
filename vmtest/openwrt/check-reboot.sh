#!/bin/sh
# The reboot pair on a real OpenWrt router (vmtest/openwrt_reboot_test.go):
# the router boots twice from the same ext4 root disk, and this script,
# started from /etc/rc.local, runs in both boots. The phase is on the disk
# (/root/pscheck/reboot/phase), as everything else the router changes.
#
# Boot 1: install the package with opkg, set a non-default mode with
# `ubus call packet_steering set_mode` and a UCI option with uci set/commit
# + reload_config, note the knobs, then the router's own `reboot` (QEMU
# runs with -no-reboot, so it exits; the test boots it again).
# Boot 2: the settings kept, the daemon started by procd at boot and
# applied at boot (status last_apply after this boot, in sync), the knobs
# as before the reboot, netifd's stock service still taken over (23.05).
#
# Lines as check.sh's: "PSCHECK EXPECT ...", "PSCHECK PASS|FAIL name",
# "PSCHECK TIME name Ns", "PSCHECK DONE".
#
# shellcheck shell=ash
# shellcheck disable=SC3043 # local: busybox ash has it
# shellcheck disable=SC2016 # sh -c '...' strings expand in that shell
# shellcheck disable=SC2317 # the check functions are called through run

# shellcheck source=/dev/null # written by the test: PSC_* settings
. /root/pscheck/conf

D=/root/pscheck/reboot
mkdir -p "$D"
# The settings boot 1 makes: a mode other than the default (auto) through
# ubus, flows (steering_flows) through uci.
MODE=all
FLOWS=256

say() { echo "PSCHECK $*"; }
note() { echo "pscheck: $*" >/dev/console; }
now() { cut -d' ' -f1 /proc/uptime; }
T_START=$(now)

run() {
	local n="$1" t0 r
	shift
	t0=$(now)
	if r=$("$@" 2>&1); then
		say "PASS $n"
	else
		echo "$r" | tail -n 60 | sed "s/^/pscheck| $n: /"
		say "FAIL $n: $(echo "$r" | tail -n 1 | cut -c1-400)"
	fi
	say "TIME $n $(awk "BEGIN{printf \"%.1f\", $(now) - $t0}")s"
}
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
stf() { st | jsonfilter -e "$1"; }
brief() { st | jsonfilter -e '@.mode' -e '@.in_sync' -e '@.last_apply' -e '@.configured' | tr '\n' ' '; }
insync() { [ "$(stf '@.in_sync')" = true ]; }
# same A B: the two files hold the same lines; else what differs ("-" only
# in A, "+" only in B). busybox on OpenWrt has no diff.
same() {
	cmp -s "$1" "$2" && return 0
	grep -vxF -f "$2" "$1" | sed 's/^/- /'
	grep -vxF -f "$1" "$2" | sed 's/^/+ /'
	return 1
}
lan_up() { ubus call network.interface.lan status | grep -q '"up": true'; }

# knobs: eth0's steering knobs by name, so that two boots compare: the
# queues' files, the IRQs by their name in /proc/interrupts (virtio0-input.0),
# the NAPI threads by their name (napi/eth0-N), the global flow table.
knobs() {
	local q f p c
	for q in /sys/class/net/eth0/queues/*; do
		for f in rps_cpus rps_flow_cnt xps_cpus; do
			[ -f "$q/$f" ] && echo "${q##*/}/$f=$(cat "$q/$f")"
		done
	done
	awk '$NF ~ /^virtio[0-9]+-(input|output)\.[0-9]+$/ { sub(":", "", $1); print $1, $NF }' /proc/interrupts |
		while read -r p c; do echo "irq $c=$(cat "/proc/irq/$p/smp_affinity")"; done | sort
	for p in /proc/[0-9]*; do
		c=$(cat "$p/comm" 2>/dev/null)
		case "$c" in napi/eth0-*) echo "thread $c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$p/status")" ;; esac
	done | sort
	echo "rps_sock_flow_entries=$(cat /proc/sys/net/core/rps_sock_flow_entries)"
	echo "threaded=$(cat /sys/class/net/eth0/threaded)"
}
# settings: what the router keeps of them, one line each.
settings() {
	echo "packet_steering.globals.mode=$(uci -q get packet_steering.globals.mode)"
	echo "packet_steering.globals.flows=$(uci -q get packet_steering.globals.flows)"
	echo "network.globals.packet_steering=$(uci -q get network.@globals[0].packet_steering)"
	echo "status.mode=$(stf '@.mode')"
	echo "status.configured.flows=$(stf '@.configured.flows')"
}
c_services() {
	local p
	for p in procd ubusd netifd rpcd logd; do
		pidof "$p" >/dev/null || { echo "$p is not running"; return 1; }
	done
	grep -q '^/dev/root / ext4 rw\|^/dev/vda / ext4 rw' /proc/mounts || { grep ' / ' /proc/mounts; echo "/ is not the ext4 disk, read-write"; return 1; }
	waitfor 60 lan_up || { echo "lan never came up"; return 1; }
	[ -d /sys/class/net/eth0/queues/rx-3 ] || { echo "eth0 has no 4 rx queues"; return 1; }
	[ "$(cat /sys/class/net/eth0/threaded)" = 1 ] || { echo "threaded NAPI is off (S11pscheck-napi)"; return 1; }
}
c_takeover() {
	if /etc/init.d/packet_steering enabled; then echo "netifd's packet_steering is enabled"; return 1; fi
	if ls /etc/rc.d/S*packet_steering >/dev/null 2>&1; then echo "boot link: $(ls /etc/rc.d/S*packet_steering)"; return 1; fi
	grep -qx 'packet_steering enabled' /etc/packet-steering/takeover ||
		{ echo "takeover record: $(cat /etc/packet-steering/takeover 2>&1)"; return 1; }
	if ubus call service list '{"name":"packet_steering"}' | grep -q '"packet_steering"'; then
		echo "netifd's packet_steering registered with procd"
		return 1
	fi
}

if [ ! -e "$D/phase" ]; then
	# --- boot 1 ------------------------------------------------------------
	E="services-1 install-1 set_mode-1 uci-flows-1 knobs-noted-1"
	[ -n "$PSC_STOCK" ] && E="$E takeover-1"
	say "EXPECT $E"
	note "reboot pair, boot 1: image $PSC_IMAGE, $(grep -c ^processor /proc/cpuinfo) CPUs, kernel $(uname -r), uptime $T_START s"
	run services-1 c_services
	knobs >"$D/knobs.stock"
	c_install() {
		opkg install "$PSC_PKG" || return 1
		/etc/init.d/packet-steering enabled || { echo "service not enabled"; return 1; }
		waitfor 30 ubus list packet_steering || { echo "no packet_steering object"; return 1; }
		pidof packet-steering >/dev/null || { echo "no daemon process"; return 1; }
	}
	run install-1 c_install
	[ -n "$PSC_STOCK" ] && run takeover-1 c_takeover
	c_set_mode() {
		ubus call packet_steering set_mode "{\"mode\":\"$MODE\"}" >/dev/null || return 1
		[ "$(stf '@.mode')" = "$MODE" ] || { echo "mode $(stf '@.mode')"; return 1; }
		[ "$(uci -q get packet_steering.globals.mode)" = "$MODE" ] || { echo "not persisted"; return 1; }
		waitfor 15 insync || { echo "not in sync: $(brief)"; return 1; }
	}
	run set_mode-1 c_set_mode
	c_flows() {
		uci set packet_steering.globals.flows="$FLOWS"
		uci commit packet_steering
		reload_config
		waitfor 30 sh -c "[ \"\$(ubus call packet_steering status | jsonfilter -e @.configured.flows)\" = $FLOWS ]" ||
			{ echo "flows: $(stf '@.configured')"; return 1; }
		waitfor 15 insync || { echo "not in sync: $(brief)"; return 1; }
		# procd runs the reloads reload_config triggered one after another
		# (network's too: set_mode wrote it): the option must still be there
		# once they are done.
		sleep 5
		[ "$(uci -q get packet_steering.globals.flows)" = "$FLOWS" ] ||
			{ logread -e packet-steering | tail -n 5; echo "packet_steering.globals.flows $(uci -q get packet_steering.globals.flows) after the reloads, set $FLOWS"; return 1; }
		[ "$(stf '@.configured.flows')" = "$FLOWS" ] || { echo "configured flows $(stf '@.configured.flows') after the reloads"; return 1; }
		[ "$(stf '@.mode')" = "$MODE" ] || { echo "mode $(stf '@.mode') after the reload"; return 1; }
	}
	run uci-flows-1 c_flows
	c_noted() {
		knobs >"$D/knobs.before"
		settings >"$D/settings.before"
		cat "$D/settings.before"
		# The settings must have moved the knobs, or keeping them proves nothing.
		if cmp -s "$D/knobs.stock" "$D/knobs.before"; then echo "the settings changed no knob"; return 1; fi
		[ "$(cat /proc/sys/net/core/rps_sock_flow_entries)" != 0 ] || { echo "flows $FLOWS: rps_sock_flow_entries 0"; return 1; }
	}
	run knobs-noted-1 c_noted
	note "knobs before the reboot:"
	sed 's/^/pscheck knob: /' "$D/knobs.before"
	date +%s >"$D/reboot.epoch"
	echo rebooted >"$D/phase"
	say "TIME all-checks $(awk "BEGIN{printf \"%.1f\", $(now) - $T_START}")s (uptime $(now)s)"
	say DONE
	note "reboot"
	sync
	reboot
	exit 0
fi

# --- boot 2 ------------------------------------------------------------------
E="services-2 settings-kept started-at-boot applied-at-boot in-sync knobs-kept"
[ -n "$PSC_STOCK" ] && E="$E takeover-kept"
say "EXPECT $E"
note "reboot pair, boot 2: uptime $T_START s when rc.local started this"
run services-2 c_services
waitfor 30 ubus list packet_steering
c_settings() {
	settings >"$D/settings.after"
	same "$D/settings.before" "$D/settings.after" || { echo "settings not kept"; return 1; }
	grep -qx "status.mode=$MODE" "$D/settings.after" || { cat "$D/settings.after"; echo "mode not $MODE"; return 1; }
	grep -qx "status.configured.flows=$FLOWS" "$D/settings.after" || { cat "$D/settings.after"; echo "flows not $FLOWS"; return 1; }
}
run settings-kept c_settings
# The daemon is procd's instance of packet-steering, started during the
# boot (before rc.local started this script), not by anything later.
c_started() {
	local p inst pp hz start
	p=$(pidof packet-steering) || { echo "no daemon"; return 1; }
	[ "$(echo "$p" | wc -w)" = 1 ] || { echo "daemons: $p"; return 1; }
	inst=$(ubus call service list '{"name":"packet-steering"}' | jsonfilter -e '@["packet-steering"].instances.*.pid')
	# procd's instance is ujail (procd_add_jail), whose child is the daemon.
	pp=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status")
	case "$inst" in "$p" | "$pp") ;; *)
		echo "procd's instance pid '$inst', daemon $p (parent $pp)"
		return 1
		;;
	esac
	[ "$(ubus call service list '{"name":"packet-steering"}' | jsonfilter -e '@["packet-steering"].instances.*.running')" = true ] ||
		{ echo "procd's instance not running"; return 1; }
	# Field 22 of /proc/PID/stat: the start time in clock ticks (100 Hz
	# for user space on Linux) after boot.
	hz=100
	start=$(awk -v hz=$hz '{ printf "%.1f", $22 / hz }' "/proc/$p/stat")
	note "daemon $p started at uptime $start s (this script at $T_START s)"
	awk "BEGIN{exit !($start < $T_START)}" || { echo "the daemon started at $start s, after rc.local ($T_START s)"; return 1; }
}
run started-at-boot c_started
# The apply at boot: the daemon's start apply is in this boot's log, and
# status' last apply is after this boot began (and after boot 1's reboot).
epoch_of() { date -u -D '%Y-%m-%dT%H:%M:%S' -d "$(echo "$1" | cut -c1-19)" +%s; }
c_applied() {
	local l t te boot prev
	l=$(logread -e packet-steering)
	echo "$l" | grep -q 'packet-steering\[[0-9]*\]: applied reason=start' ||
		{ echo "$l" | tail -n 5; echo "no 'applied reason=start' in this boot's log"; return 1; }
	echo "$l" | grep 'applied reason=' | head -n 3
	t=$(stf '@.last_apply.time')
	[ -n "$t" ] || { echo "no last_apply: $(brief)"; return 1; }
	te=$(epoch_of "$t") || { echo "last_apply.time $t does not parse"; return 1; }
	boot=$(($(date +%s) - $(cut -d. -f1 /proc/uptime) - 2))
	prev=$(cat "$D/reboot.epoch")
	note "last apply at $t ($te), this boot began at $boot, boot 1 rebooted at $prev"
	if [ "$te" -lt "$boot" ] || [ "$te" -lt "$prev" ]; then echo "last_apply.time $t is before this boot"; return 1; fi
	[ "$(stf '@.last_apply.failed')" = 0 ] || { echo "failed writes: $(stf '@.last_apply')"; return 1; }
}
run applied-at-boot c_applied
c_insync() {
	waitfor 30 insync || { echo "not in sync: $(brief)"; return 1; }
	[ "$(stf '@.service.served_by')" != rpcd ] || { echo "served by rpcd"; return 1; }
}
run in-sync c_insync
c_knobs() {
	knobs >"$D/knobs.after"
	same "$D/knobs.before" "$D/knobs.after" || { echo "knobs not as before the reboot"; return 1; }
}
run knobs-kept c_knobs
[ -n "$PSC_STOCK" ] && run takeover-kept c_takeover
say "TIME all-checks $(awk "BEGIN{printf \"%.1f\", $(now) - $T_START}")s (uptime $(now)s)"
say DONE
sync
poweroff
