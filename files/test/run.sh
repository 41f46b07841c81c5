#!/bin/sh
# shellcheck disable=SC2016 # single-quoted $ is for the shell under test
# Shell tests for the router files (make test-shell).
#
# 1. shellcheck -s sh on every script under files/ and openwrt/*/files/.
# 2. Each script run in a sandbox: a fake root (IPKG_INSTROOT) holding a copy
#    of the shared library and a stand-in for netifd's stock packet_steering
#    service, and recording stand-ins first on PATH for ubus, uci, logger,
#    timeout and packet-steering; init scripts run under a stand-in rc.common
#    whose procd_* helpers record their arguments. Every case checks what the
#    script would have called for one event.
#
# The scripts run under /bin/sh, and also under `busybox ash` (OpenWrt's
# shell) when busybox is installed. Exits non-zero when any case fails.
set -u

repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo" || exit 1

pass=0
fail=0
ok() {
	pass=$((pass + 1))
	echo "ok   $1"
}
nok() {
	fail=$((fail + 1))
	echo "FAIL $1"
	[ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/     | /'
	return 0
}

tmp="$(mktemp -d "${TMPDIR:-/tmp}/ps-shell-test.XXXXXX")" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# --- 1. shellcheck -----------------------------------------------------------

scripts=""
for f in $(find files openwrt/*/files -type f 2>/dev/null | sort); do
	case "$(head -c 64 "$f")" in
	'#!/bin/sh'* | '# shellcheck shell='*) scripts="$scripts $f" ;;
	esac
done
if ! command -v shellcheck >/dev/null 2>&1; then
	nok "shellcheck installed" "shellcheck not found (Debian package shellcheck)"
else
	for f in $scripts; do
		if out="$(shellcheck -s sh -x "$f" 2>&1)"; then
			ok "shellcheck $f"
		else
			nok "shellcheck $f" "$out"
		fi
	done
fi

for f in files/etc/init.d/packet-steering files/etc/hotplug.d/net/20-packet-steering \
	files/etc/uci-defaults/90-packet-steering; do
	if [ -x "$f" ]; then ok "executable $f"; else nok "executable $f"; fi
done

# The package Makefile installs every runtime file, and lists the config as
# a conffile (no OpenWrt build runs here; this keeps the two in step).
mk=openwrt/packet-steering/Makefile
for f in $(find files -type f ! -path 'files/test/*' | sort); do
	if grep -q "/$f " "$mk"; then ok "$mk installs $f"; else nok "$mk installs $f"; fi
done
if sed -n '/conffiles/,/endef/p' "$mk" | grep -qx /etc/config/packet_steering; then
	ok "$mk lists /etc/config/packet_steering as a conffile"
else
	nok "$mk lists /etc/config/packet_steering as a conffile"
fi

# --- 2. sandbox --------------------------------------------------------------

# Stand-ins. Each appends one line per call to $CALLS.
bin="$tmp/bin"
mkdir -p "$bin"

cat >"$bin/ubus" <<'EOF'
#!/bin/sh
echo "ubus $*" >>"$CALLS"
up="${FAKE_UBUS_UP:-0}"
[ "$1" = -t ] && shift 2
case "$1" in
list) [ "$up" = 1 ] && [ "$2" = packet_steering ] && { echo packet_steering; exit 0; }
	echo "Command failed: Not found" >&2; exit 4 ;;
call) [ "$up" = 1 ] || { echo "Command failed: Not found" >&2; exit 4; }
	exit "${FAKE_UBUS_CALL_RC:-0}" ;;
esac
exit 1
EOF

cat >"$bin/uci" <<'EOF'
#!/bin/sh
# A uci with its state in $UCI_DB, one "key=value" per line.
echo "uci $*" >>"$CALLS"
[ "$1" = -q ] && shift
touch "$UCI_DB"
case "$1" in
get) awk -v k="$2" 'index($0, k "=") == 1 { print substr($0, length(k) + 2); f = 1; exit } END { exit !f }' "$UCI_DB" ;;
set) key="${2%%=*}"; val="${2#*=}"
	awk -v k="$key" 'index($0, k "=") != 1' "$UCI_DB" >"$UCI_DB.new"
	echo "$key=$val" >>"$UCI_DB.new"; mv "$UCI_DB.new" "$UCI_DB" ;;
commit) ;;
*) exit 1 ;;
esac
EOF

cat >"$bin/logger" <<'EOF'
#!/bin/sh
echo "logger $*" >>"$CALLS"
EOF

cat >"$bin/packet-steering" <<'EOF'
#!/bin/sh
echo "packet-steering $*" >>"$CALLS"
# owner: who serves the ubus object, as the test sets it.
[ "$1" = owner ] && { echo "${FAKE_PS_OWNER:-daemon}"; exit 0; }
[ -n "${FAKE_PS_SLEEP:-}" ] && sleep "$FAKE_PS_SLEEP"
echo "packet-steering done" >>"$CALLS"
exit "${FAKE_PS_RC:-0}"
EOF

cat >"$bin/timeout" <<'EOF'
#!/bin/sh
echo "timeout $*" >>"$CALLS"
shift
exec "$@"
EOF
chmod +x "$bin"/*

# Shell functions for the stand-ins that busybox ash would otherwise take
# from its own applets (logger, timeout: a busybox built as a standalone
# shell prefers applets to PATH); functions come first in every shell.
cat >"$tmp/standins.sh" <<EOF
logger() { "$bin/logger" "\$@"; }
timeout() { "$bin/timeout" "\$@"; }
EOF

# rc.common stand-in: sh rc.common SCRIPT ACTION, as the #! line runs it.
cat >"$tmp/rc.common" <<'EOF'
. "$STANDINS"
initscript="$1"
action="$2"
shift 2
procd_open_instance() { echo "procd_open_instance $*" >>"$CALLS"; }
procd_set_param() { echo "procd_set_param $*" >>"$CALLS"; }
procd_close_instance() { echo "procd_close_instance $*" >>"$CALLS"; }
procd_add_jail() { echo "procd_add_jail $*" >>"$CALLS"; }
procd_add_reload_trigger() { echo "procd_add_reload_trigger $*" >>"$CALLS"; }
procd_add_raw_trigger() { echo "procd_add_raw_trigger $*" >>"$CALLS"; }
procd_open_trigger() { echo "procd_open_trigger $*" >>"$CALLS"; }
procd_close_trigger() { echo "procd_close_trigger $*" >>"$CALLS"; }
procd_add_config_trigger() { echo "procd_add_config_trigger $*" >>"$CALLS"; }
. "$initscript"
# rc.common's restart: stop, then start.
restart() {
	echo "restart" >>"$CALLS"
	stop_service
	start_service && service_triggers
}
case "$action" in
start) start_service "$@" && service_triggers ;;
reload) reload_service "$@" ;;
stop) stop_service "$@" ;;
*) exit 1 ;;
esac
EOF

# Stand-in for netifd's stock service; enabled = its S25 link exists.
stock_stub='#!/bin/sh
echo "stock $1" >>"$CALLS"
link="${IPKG_INSTROOT}/etc/rc.d/S25packet_steering"
case "$1" in
enabled) [ -e "$link" ] ;;
enable) ln -sf ../init.d/packet_steering "$link" ;;
disable) rm -f "$link" ;;
esac'

# Stand-ins for /etc/init.d/smp_affinity (S93) and, in the package-script
# cases, for packet-steering's own init script (S25): same shape.
smp_stub="$(printf '%s\n' "$stock_stub" | sed 's/stock /smp /; s/S25packet_steering/S93smp_affinity/; s#init.d/packet_steering#init.d/smp_affinity#')"
own_stub="$(printf '%s\n' "$stock_stub" | sed 's/stock /own /; s/S25packet_steering/S25packet-steering/; s#init.d/packet_steering#init.d/packet-steering#')"

# Stand-in for rockchip's hotplug script 40-net-smp-affinity (openwrt/openwrt
# target/linux/rockchip/armv8/base-files, @c795a91; docs/platforms.md has
# what it writes per board), written for these tests: on ACTION=add it
# writes, for the board board_name names, one mask per device to
# proc/irq/N/smp_affinity, N being the first proc/interrupts row that ends
# in the device's name, looking again every second for up to 2 s (the
# script: every 2 s for up to 10 s). Paths are below IPKG_INSTROOT; each
# write is noted in $CALLS.
rockchip_hook_standin='#!/bin/sh
[ "$ACTION" = add ] || exit 0
pin() { # MASK DEVICE-REGEX
	n=0
	while :; do
		irq=$(grep -E -m 1 "$2\$" "${IPKG_INSTROOT}/proc/interrupts" | sed "s/:.*//; s/ //g")
		[ -n "$irq" ] || [ "$n" -ge 2 ] && break
		n=$((n + 1))
		sleep 1
	done
	[ -n "$irq" ] || { echo "rockchip-hook found no irq for $2" >>"$CALLS"; return; }
	mkdir -p "${IPKG_INSTROOT}/proc/irq/$irq"
	echo "$1" >"${IPKG_INSTROOT}/proc/irq/$irq/smp_affinity"
	echo "rockchip-hook wrote $irq $1" >>"$CALLS"
}
case "$(board_name)" in
friendlyarm,nanopi-r2s) pin 2 eth0; pin 4 "xhci-hcd:usb[0-9]+" ;;
friendlyarm,nanopi-r4s) pin 10 eth0; pin 20 eth1 ;;
friendlyarm,nanopi-r5s) pin 2 eth0; pin 4 eth1; pin 8 eth2 ;;
friendlyarm,nanopi-r6s) pin 10 eth0; pin 20 eth1; pin 40 eth2 ;;
esac'

# with_rockchip_hook BOARD: the stand-in hook, /lib/functions.sh with
# board_name, and proc/interrupts of BOARD (r2s, r4s, r6s: as the
# fixtures in platform/fixture/boards_presets.go) with every IRQ at the
# kernel's default mask.
with_rockchip_hook() {
	mkdir -p "$root/etc/hotplug.d/net" "$root/lib" "$root/tmp/sysinfo" "$root/proc/irq"
	printf '%s\n' "$rockchip_hook_standin" >"$root/etc/hotplug.d/net/40-net-smp-affinity"
	printf '%s\n' 'board_name() { cat "${IPKG_INSTROOT}/tmp/sysinfo/board_name"; }' >"$root/lib/functions.sh"
	echo "friendlyarm,nanopi-$1" >"$root/tmp/sysinfo/board_name"
	case "$1" in
	r2s) printf '%s\n' " 24:  0 1417932 0 0  GICv2  56 Level     eth0" \
		" 25:  334 0 0 4422194  GICv2  99 Level     xhci-hcd:usb1" \
		" 26:  0 0 0 0  GICv2  48 Level     ehci_hcd:usb3" >"$root/proc/interrupts" ;;
	r4s) printf '%s\n' " 24:  0 0 0 0 9 0  GICv3  44 Level     eth0" \
		" 88:  0 0 0 0 0 9  ITS-MSI 524288 Edge      eth1" >"$root/proc/interrupts" ;;
	r6s) printf '%s\n' " 80:  0 0 0 0 0 0 0 0  GICv3 259 Level     eth2" \
		"130:  0 0 0 0 0 0 0 0  ITS-MSI 1 Edge      eth0-0" \
		"134:  0 0 0 0 0 0 0 0  ITS-MSI 2 Edge      eth1-0" >"$root/proc/interrupts" ;;
	esac
	sed 's/:.*//; s/ //g' "$root/proc/interrupts" | while read -r n; do
		mkdir -p "$root/proc/irq/$n"
		echo ff >"$root/proc/irq/$n/smp_affinity"
	done
}
# irq_mask N: what proc/irq/N/smp_affinity holds in the sandbox.
irq_mask() { cat "$root/proc/irq/$1/smp_affinity" 2>/dev/null; }
# line_of PATTERN: the line number of the first call matching it.
line_of() { grep -En -m 1 -- "$1" "$sb/calls" | cut -d: -f1; }

nsb=0
# new_sandbox: a fresh root with our service enabled and the stock one
# enabled (arguments: "stock-off" leaves it disabled, "no-stock" absent,
# "ours-off" leaves our service disabled, "smp" adds an enabled
# smp_affinity script, "smp-off" a disabled one, "own-stub" replaces our
# init script by a recording stand-in, "target=T" writes
# /etc/openwrt_release for target T).
new_sandbox() {
	nsb=$((nsb + 1))
	sb="$tmp/sb.$nsb"
	root="$sb/root"
	mkdir -p "$root/etc/rc.d" "$root/etc/init.d" "$root/etc/config" "$root/var/lock" \
		"$root/usr/share/packet-steering"
	cp files/usr/share/packet-steering/stock.sh files/usr/share/packet-steering/owner.sh \
		"$root/usr/share/packet-steering/"
	# rpcd's init script: a restart makes rpcd list the exec plugins again.
	printf '%s\n' '#!/bin/sh' 'echo "rpcd $1" >>"$CALLS"' >"$root/etc/init.d/rpcd"
	chmod +x "$root/etc/init.d/rpcd"
	: >"$sb/calls"
	: >"$sb/uci.db"
	case " $* " in *" no-stock "*) ;; *)
		printf '%s\n' "$stock_stub" >"$root/etc/init.d/packet_steering"
		chmod +x "$root/etc/init.d/packet_steering"
		case " $* " in *" stock-off "*) ;; *)
			ln -s ../init.d/packet_steering "$root/etc/rc.d/S25packet_steering" ;;
		esac ;;
	esac
	cp files/etc/init.d/packet-steering "$root/etc/init.d/"
	case " $* " in *" own-stub "*)
		printf '%s\n' "$own_stub" >"$root/etc/init.d/packet-steering"
		chmod +x "$root/etc/init.d/packet-steering" ;;
	esac
	case " $* " in *" smp "* | *" smp-off "*)
		printf '%s\n' "$smp_stub" >"$root/etc/init.d/smp_affinity"
		chmod +x "$root/etc/init.d/smp_affinity"
		case " $* " in *" smp "*) ln -s ../init.d/smp_affinity "$root/etc/rc.d/S93smp_affinity" ;; esac ;;
	esac
	for a in "$@"; do
		case "$a" in target=*) printf "DISTRIB_ID='OpenWrt'\nDISTRIB_TARGET='%s'\n" "${a#target=}" >"$root/etc/openwrt_release" ;; esac
	done
	case " $* " in *" ours-off "*) ;; *)
		ln -s ../init.d/packet-steering "$root/etc/rc.d/S25packet-steering" ;;
	esac
}

# run SHELL CMD...: run in the sandbox with the stand-ins first on PATH.
run() {
	sh_="$1"
	shift
	# shellcheck disable=SC2086 # $sh_ may be two words: busybox ash
	env PATH="$bin:$PATH" IPKG_INSTROOT="$root" CALLS="$sb/calls" UCI_DB="$sb/uci.db" STANDINS="$tmp/standins.sh" \
		$sh_ "$@"
}

# expect NAME PATTERN: the calls include a line matching the grep -E PATTERN.
expect() {
	if grep -Eq -- "$2" "$sb/calls"; then ok "$1"; else nok "$1" "no call matching /$2/; calls were:
$(cat "$sb/calls")"; fi
}
expect_not() {
	if grep -Eq -- "$2" "$sb/calls"; then nok "$1" "unexpected call matching /$2/; calls were:
$(cat "$sb/calls")"; else ok "$1"; fi
}
expect_none() {
	if [ -s "$sb/calls" ]; then nok "$1" "expected no calls; calls were:
$(cat "$sb/calls")"; else ok "$1"; fi
}
expect_db() {
	if grep -qxF -- "$2" "$sb/uci.db"; then ok "$1"; else nok "$1" "uci state lacks '$2'; it is:
$(cat "$sb/uci.db")"; fi
}
# expect_record NAME LINE: the takeover note holds LINE; expect_no_record
# NAME SERVICE: it has no line for SERVICE.
expect_record() {
	if grep -qxF -- "$2" "$root/etc/packet-steering/takeover" 2>/dev/null; then ok "$1"; else nok "$1" "takeover note lacks '$2': $(cat "$root/etc/packet-steering/takeover" 2>&1)"; fi
}
expect_no_record() {
	if grep -q -- "^$2 " "$root/etc/packet-steering/takeover" 2>/dev/null; then nok "$1" "$(cat "$root/etc/packet-steering/takeover")"; else ok "$1"; fi
}
# wait_for PATTERN [SECONDS]: until a call matches (background work).
wait_for() {
	i=0
	while [ "$i" -lt "$((${2:-5} * 10))" ]; do
		grep -Eq -- "$1" "$sb/calls" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
count() { grep -Ec -- "$1" "$sb/calls"; }

hotplug=files/etc/hotplug.d/net/20-packet-steering
init=files/etc/init.d/packet-steering
defaults=files/etc/uci-defaults/90-packet-steering

shells="sh"
command -v busybox >/dev/null 2>&1 && shells="$shells busybox_ash"

for shell in $shells; do
	case "$shell" in
	busybox_ash) SH="busybox ash" ;;
	*) SH="$shell" ;;
	esac
	t="[$shell]"

	# --- hotplug.d/net ---------------------------------------------------
	# hotplug-call sources each script in a subshell: ( . "$script" ).
	new_sandbox
	FAKE_UBUS_UP=1 ACTION=add DEVICENAME=eth0 run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
	expect "$t hotplug add, daemon up: ubus call with device and reason" \
		'^ubus -t 2 call packet_steering apply \{"device":"eth0","reason":"hotplug"\}$'
	expect_not "$t hotplug add, daemon up: no one-shot" '^packet-steering'

	new_sandbox
	FAKE_UBUS_UP=1 ACTION=add INTERFACE=lan1.10 run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
	expect "$t hotplug add: INTERFACE when DEVICENAME is unset" \
		'"device":"lan1\.10"'

	new_sandbox
	FAKE_UBUS_UP=0 ACTION=add DEVICENAME=wan run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
	expect_not "$t hotplug add, daemon down: no ubus call" '^ubus .*call'
	if wait_for '^packet-steering done'; then ok "$t hotplug add, daemon down: one-shot ran"; else nok "$t hotplug add, daemon down: one-shot ran" "$(cat "$sb/calls")"; fi
	expect "$t hotplug add, daemon down: one-shot bounded by timeout" \
		'^timeout [0-9]+ packet-steering apply --reason hotplug --syslog$'

	new_sandbox
	FAKE_UBUS_UP=1 FAKE_UBUS_CALL_RC=7 ACTION=add DEVICENAME=eth1 run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
	wait_for '^packet-steering done' >/dev/null
	expect "$t hotplug add, ubus call fails: one-shot instead" '^packet-steering apply --reason hotplug --syslog$'

	new_sandbox
	FAKE_UBUS_UP=1 ACTION=remove DEVICENAME=eth0 run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
	sleep 0.2
	expect_none "$t hotplug remove: nothing"

	# shellcheck disable=SC1003 # 'eth0\' is a name ending in a backslash
	for bad in 'eth0"x' 'a b' 'x;reboot' '$(id)' 'eth0\' 'averyveryverylong0' '' 'é0' 'x}'; do
		new_sandbox
		FAKE_UBUS_UP=1 ACTION=add DEVICENAME="$bad" INTERFACE='' run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
		FAKE_UBUS_UP=0 ACTION=add DEVICENAME="$bad" INTERFACE='' run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
		sleep 0.1
		expect_none "$t hotplug bad device name '$bad': nothing"
	done

	new_sandbox ours-off
	FAKE_UBUS_UP=0 ACTION=add DEVICENAME=eth0 run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
	sleep 0.3
	expect_none "$t hotplug with packet-steering disabled: nothing"

	new_sandbox
	start=$(date +%s)
	FAKE_UBUS_UP=0 FAKE_PS_SLEEP=3 ACTION=add DEVICENAME=eth0 run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
	took=$(($(date +%s) - start))
	if [ "$took" -le 1 ]; then ok "$t hotplug never blocks (returned in ${took}s while the one-shot takes 3s)"; else nok "$t hotplug never blocks" "took ${took}s"; fi
	wait_for '^packet-steering done' 6 >/dev/null

	# Coalescing: 6 events while one-shots take 1s each: the first runs,
	# one more waits, the rest add nothing; the last event is covered.
	new_sandbox
	for d in eth0 eth1 eth2 eth3 eth4 eth5; do
		FAKE_UBUS_UP=0 FAKE_PS_SLEEP=1 ACTION=add DEVICENAME=$d run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
	done
	sleep 3
	n=$(count '^packet-steering apply')
	if [ "$n" -ge 1 ] && [ "$n" -le 2 ]; then ok "$t hotplug one-shots coalesced (6 events -> $n runs)"; else nok "$t hotplug one-shots coalesced" "6 events -> $n runs"; fi
	if [ "$(count '^packet-steering done')" = "$n" ]; then ok "$t hotplug coalesced one-shots all finished"; else nok "$t hotplug coalesced one-shots all finished" "$(cat "$sb/calls")"; fi

	# OpenWrt 22.03: netifd's hotplug script 20-smp-packet-steering runs
	# after ours (name order) and, with network.globals.packet_steering=1,
	# rewrites the RPS/XPS masks of every device (found on the 22.03.4
	# image: after a veth appeared, eth0 was out of sync). The apply waits
	# until hotplug-call (the shell sourcing the scripts) has finished,
	# and covers every device.
	new_sandbox
	mkdir -p "$root/etc/hotplug.d/net"
	printf '#!/bin/sh\n' >"$root/etc/hotplug.d/net/20-smp-packet-steering"
	echo 'network.@globals[0].packet_steering=1' >"$sb/uci.db"
	start=$(date +%s)
	FAKE_UBUS_UP=1 ACTION=add DEVICENAME=psv0 run "$SH" -c '. "$STANDINS"; ( . "$1" ); sleep 1; echo "stock hotplug ran" >>"$CALLS"' sh "$hotplug"
	full='^ubus -t 10 call packet_steering apply \{"reason":"hotplug"\}$'
	if wait_for "$full" 5; then
		ran=$(grep -n '^stock hotplug ran' "$sb/calls" | cut -d: -f1)
		applied=$(grep -En "$full" "$sb/calls" | cut -d: -f1)
		if [ -n "$ran" ] && [ "$applied" -gt "$ran" ]; then ok "$t hotplug on 22.03 (old stock hotplug script): full apply after it ran"; else nok "$t hotplug on 22.03: full apply after the stock script" "$(cat "$sb/calls")"; fi
	else
		nok "$t hotplug on 22.03 (old stock hotplug script): full apply" "$(cat "$sb/calls")"
	fi
	expect_not "$t hotplug on 22.03: no per-device apply before the stock script" '"device":"psv0"'
	# The same with the network page's steering off: the stock script does
	# nothing, the per-device apply as everywhere else.
	new_sandbox
	mkdir -p "$root/etc/hotplug.d/net"
	printf '#!/bin/sh\n' >"$root/etc/hotplug.d/net/20-smp-packet-steering"
	echo 'network.@globals[0].packet_steering=0' >"$sb/uci.db"
	FAKE_UBUS_UP=1 ACTION=add DEVICENAME=psv0 run "$SH" -c '. "$STANDINS"; ( . "$1" )' sh "$hotplug"
	expect "$t hotplug on 22.03, stock steering off: per-device apply" \
		'^ubus -t 2 call packet_steering apply \{"device":"psv0","reason":"hotplug"\}$'

	# rockchip: 40-net-smp-affinity runs after ours on every add (name
	# order) and pins its IRQs; the apply waits until hotplug-call has run
	# it and covers every device, so the plan's IRQs stand after it.
	# hotplug-call: /lib/functions.sh, then each script sourced in a subshell.
	hotplug_call='. "$STANDINS"; . "$IPKG_INSTROOT/lib/functions.sh"; ( . "$1" ); ( . "$2" )'
	for board in r4s r2s; do
		new_sandbox target=rockchip/armv8
		with_rockchip_hook "$board"
		FAKE_UBUS_UP=1 ACTION=add DEVICENAME=pppoe-wan run "$SH" -c "$hotplug_call" sh "$hotplug" "$root/etc/hotplug.d/net/40-net-smp-affinity"
		if wait_for "$full" 5; then
			hook_done=$(grep -n '^rockchip-hook wrote' "$sb/calls" | tail -n 1 | cut -d: -f1)
			applied=$(line_of "$full")
			if [ -n "$hook_done" ] && [ "$applied" -gt "$hook_done" ]; then ok "$t hotplug on rockchip $board: full apply after the hook's last write"; else nok "$t hotplug on rockchip $board: full apply after the hook's last write" "$(cat "$sb/calls")"; fi
		else
			nok "$t hotplug on rockchip $board: full apply" "$(cat "$sb/calls")"
		fi
		expect_not "$t hotplug on rockchip $board: no per-device apply before the hook" '"device":"pppoe-wan"'
	done
	if [ "$(irq_mask 24)/$(irq_mask 25)" = 2/4 ]; then ok "$t rockchip stand-in: r2s eth0 and its USB NIC's xhci IRQ pinned as the hook does"; else nok "$t rockchip stand-in: r2s masks" "$(irq_mask 24)/$(irq_mask 25)"; fi
	# A hook that waits for IRQs it does not find (r8125's eth0-0.. on
	# the R6S: only eth2 matches): the apply still comes after it.
	new_sandbox target=rockchip/armv8
	with_rockchip_hook r6s
	FAKE_UBUS_UP=0 ACTION=add DEVICENAME=eth0 run "$SH" -c "$hotplug_call" sh "$hotplug" "$root/etc/hotplug.d/net/40-net-smp-affinity"
	if wait_for '^packet-steering done' 10; then
		hook_done=$(grep -n '^rockchip-hook ' "$sb/calls" | tail -n 1 | cut -d: -f1)
		applied=$(line_of '^packet-steering apply --reason hotplug --syslog$')
		if [ -n "$hook_done" ] && [ -n "$applied" ] && [ "$applied" -gt "$hook_done" ]; then ok "$t hotplug on rockchip r6s, daemon down: one-shot after the hook's 4 s of waiting"; else nok "$t hotplug on rockchip r6s, daemon down: one-shot after the hook" "$(cat "$sb/calls")"; fi
	else
		nok "$t hotplug on rockchip r6s, daemon down: one-shot" "$(cat "$sb/calls")"
	fi
	if [ "$(irq_mask 80)/$(irq_mask 130)" = 40/ff ]; then ok "$t rockchip stand-in: r6s only eth2 pinned (eth0-0 does not end in eth0)"; else nok "$t rockchip stand-in: r6s masks" "$(irq_mask 80)/$(irq_mask 130)"; fi

	# --- init.d ------------------------------------------------------------
	new_sandbox
	run "$SH" "$tmp/rc.common" "$init" start
	expect "$t init start: procd command" '^procd_set_param command /usr/sbin/packet-steering daemon$'
	expect "$t init start: respawn" '^procd_set_param respawn$'
	expect "$t init start: stderr to log" '^procd_set_param stderr 1$'
	expect "$t init start: a new binary restarts the instance" '^procd_set_param file /usr/sbin/packet-steering$'
	expect "$t init start: term_timeout 5 (the daemon drains for at most 3 s)" '^procd_set_param term_timeout 5$'
	expect_not "$t init start, no ujail: no jail" '^procd_set_param command /sbin/ujail'
	expect "$t init start, no ujail: a new binary restarts the instance" '^procd_set_param file /usr/sbin/packet-steering$'
	# With procd's ujail: the daemon from the OCI bundle (uid 0 with only
	# CAP_NET_ADMIN and CAP_SYS_NICE, no new privileges, the seccomp
	# filter), no namespaces.
	new_sandbox
	mkdir -p "$root/sbin" "$root/usr/share/packet-steering/jail"
	printf '#!/bin/sh\n' >"$root/sbin/ujail"
	chmod +x "$root/sbin/ujail"
	cp files/usr/share/packet-steering/jail/config.json "$root/usr/share/packet-steering/jail/"
	run "$SH" "$tmp/rc.common" "$init" start
	expect "$t init start, ujail: the daemon from the OCI bundle" \
		'^procd_set_param command /sbin/ujail -n packet-steering -i -J /usr/share/packet-steering/jail$'
	expect "$t init start, ujail: a new binary or bundle restarts the instance" \
		'^procd_set_param file /usr/sbin/packet-steering /usr/share/packet-steering/jail/config\.json$'
	expect_not "$t init start, ujail: no procd jail or seccomp preload" '^procd_add_jail\|^procd_set_param \(seccomp\|capabilities\|user\)'
	bundle=$(tr -d ' \t\n' <files/usr/share/packet-steering/jail/config.json)
	for want in '"args":["/usr/sbin/packet-steering","daemon"]' '"user":{"uid":0,"gid":0}' '"noNewPrivileges":true' \
		'"root":{"path":"/"}' '"defaultAction":"SCMP_ACT_TRACE"' '"action":"SCMP_ACT_ALLOW"'; do
		case "$bundle" in *"$want"*) ok "$t jail bundle: $want" ;; *) nok "$t jail bundle: $want" "$bundle" ;; esac
	done
	for set in bounding effective ambient permitted inheritable; do
		case "$bundle" in *"\"$set\":[\"CAP_NET_ADMIN\",\"CAP_SYS_NICE\"]"*) ok "$t jail bundle: $set is CAP_NET_ADMIN, CAP_SYS_NICE" ;;
		*) nok "$t jail bundle: $set is CAP_NET_ADMIN, CAP_SYS_NICE" "$bundle" ;; esac
	done
	# No namespaces (they would make /sys read-only or hide the NAPI
	# threads) and nothing mounted.
	case "$bundle" in *'"namespaces"'*) nok "$t jail bundle: no namespaces" ;; *) ok "$t jail bundle: no namespaces" ;; esac
	case "$bundle" in *'"mounts":[]'*) ok "$t jail bundle: no mounts" ;; *) nok "$t jail bundle: no mounts" ;; esac
	new_sandbox
	run "$SH" "$tmp/rc.common" "$init" start
	expect "$t init start: reload network on network changes" \
		'^procd_add_config_trigger config\.change network /etc/init\.d/packet-steering reload network$'
	expect "$t init start: reload on firewall, packet_steering changes" \
		'^procd_add_reload_trigger firewall packet_steering$'
	if [ -f "$root/var/run/packet-steering/network-globals" ]; then ok "$t init start: network settings noted"; else nok "$t init start: network settings noted"; fi
	expect "$t init start: reload on interface events" \
		'^procd_add_raw_trigger interface\.\* 1000 /etc/init\.d/packet-steering reload$'
	expect "$t init start: stock service disabled" '^stock disable$'
	expect "$t init start: stock service stopped" '^stock stop$'
	if [ -e "$root/etc/rc.d/S25packet_steering" ]; then nok "$t init start: stock S25 link removed"; else ok "$t init start: stock S25 link removed"; fi
	expect "$t init start: takeover logged" '^logger .*took steering over'

	new_sandbox stock-off
	run "$SH" "$tmp/rc.common" "$init" start
	expect_not "$t init start, stock already disabled: not disabled again" '^stock disable$'
	expect "$t init start, stock disabled (but maybe started by an upgrade): stopped" '^stock stop$'
	expect_not "$t init start, stock already disabled: nothing logged" '^logger'

	new_sandbox no-stock
	if run "$SH" "$tmp/rc.common" "$init" start; then ok "$t init start without a stock service"; else nok "$t init start without a stock service" "$(cat "$sb/calls")"; fi

	new_sandbox
	FAKE_UBUS_UP=1 run "$SH" "$tmp/rc.common" "$init" reload
	expect "$t init reload, daemon up: ubus call apply" \
		'^ubus -t [0-9]+ call packet_steering apply \{"reason":"reload"\}$'
	expect_not "$t init reload, daemon up: no one-shot" '^packet-steering apply'
	expect "$t init reload: stock service kept off" '^stock disable$'

	new_sandbox
	FAKE_UBUS_UP=0 run "$SH" "$tmp/rc.common" "$init" reload
	expect "$t init reload, daemon down: one-shot" '^packet-steering apply --reason reload --syslog$'

	# Reload after a network change: the network page's steering settings,
	# when they changed since last noted, reach packet_steering first.
	netcase() { # NETWORK_STEERING NETWORK_FLOWS MODE FLOWS NOTED
		new_sandbox
		printf '%s\n' "network.@globals[0].packet_steering=$1" "network.@globals[0].steering_flows=$2" \
			"packet_steering.globals=globals" "packet_steering.globals.mode=$3" \
			"packet_steering.globals.flows=$4" >>"$sb/uci.db"
		if [ -n "$5" ]; then
			mkdir -p "$root/var/run/packet-steering"
			echo "$5" >"$root/var/run/packet-steering/network-globals"
		fi
		FAKE_UBUS_UP=1 run "$SH" "$tmp/rc.common" "$init" reload network
	}
	netcase 0 32 auto 0 "1/0"
	expect_db "$t reload network, page changed to 0: mode off" "packet_steering.globals.mode=off"
	expect_db "$t reload network, page changed to 32 flows: flows 32" "packet_steering.globals.flows=32"
	c=$(grep -n '^uci commit packet_steering$' "$sb/calls" | cut -d: -f1)
	a=$(grep -n '^ubus .*call packet_steering apply' "$sb/calls" | cut -d: -f1)
	if [ -n "$c" ] && [ -n "$a" ] && [ "$c" -lt "$a" ]; then ok "$t reload network: committed before the apply"; else nok "$t reload network: committed before the apply" "$(cat "$sb/calls")"; fi
	if [ "$(cat "$root/var/run/packet-steering/network-globals")" = "0/32" ]; then ok "$t reload network: new settings noted"; else nok "$t reload network: new settings noted"; fi

	netcase 2 0 legacy 0 ""
	expect_db "$t reload network, nothing noted yet: page's 2 gives all" "packet_steering.globals.mode=all"

	netcase 1 0 off 0 "1/0"
	expect_not "$t reload network, page unchanged: a mode set with uci is kept" '^uci (set|commit)'
	expect_db "$t reload network, page unchanged: mode off kept" "packet_steering.globals.mode=off"

	netcase 1 0 legacy 0 "0/0"
	expect_db "$t reload network, page changed to 1: legacy kept (enabled)" "packet_steering.globals.mode=legacy"
	expect_not "$t reload network, page changed to 1: nothing to write" '^uci (set|commit)'

	netcase 0 0 auto 0 "1/0"
	FAKE_UBUS_UP=1 run "$SH" "$tmp/rc.common" "$init" reload
	expect_db "$t reload network then plain reload: mode off" "packet_steering.globals.mode=off"

	new_sandbox
	printf '%s\n' "network.@globals[0].packet_steering=0" "packet_steering.globals=globals" \
		"packet_steering.globals.mode=auto" >>"$sb/uci.db"
	FAKE_UBUS_UP=1 run "$SH" "$tmp/rc.common" "$init" reload
	expect_not "$t plain reload (firewall, interface): no sync" '^uci (set|commit)'

	# --- who serves the ubus object (owner.sh) ---------------------------
	owner_file() { cat "$root/var/run/packet-steering/owner" 2>/dev/null; }
	expect_owner() {
		if [ "$(owner_file)" = "$2" ]; then ok "$1"; else nok "$1" "owner record '$(owner_file)', want '$2'"; fi
	}
	record_owner() {
		mkdir -p "$root/var/run/packet-steering" && echo "$1" >"$root/var/run/packet-steering/owner"
	}

	# A single-CPU router at boot: rpcd (started before us) already
	# registered the plugin's object; no daemon, one apply, rpcd left alone.
	new_sandbox
	FAKE_PS_OWNER=rpcd FAKE_UBUS_UP=1 run "$SH" "$tmp/rc.common" "$init" start
	expect_not "$t init start, owner rpcd: no daemon instance" '^procd_open_instance'
	expect "$t init start, owner rpcd: one-shot apply" '^packet-steering apply --reason start --syslog$'
	expect_not "$t init start, owner rpcd at boot, object registered: rpcd not restarted" '^rpcd restart'
	expect "$t init start, owner rpcd: triggers still registered" '^procd_add_reload_trigger firewall packet_steering$'
	expect_owner "$t init start, owner rpcd: recorded" rpcd

	# Just installed: rpcd started before the plugin existed.
	new_sandbox
	FAKE_PS_OWNER=rpcd FAKE_UBUS_UP=0 run "$SH" "$tmp/rc.common" "$init" start
	expect "$t init start, owner rpcd, object missing: rpcd restarted to list the plugin" '^rpcd restart$'

	new_sandbox
	FAKE_PS_OWNER=daemon run "$SH" "$tmp/rc.common" "$init" start
	expect "$t init start, owner daemon: daemon instance" '^procd_set_param command /usr/sbin/packet-steering daemon$'
	expect_not "$t init start, owner daemon: rpcd not restarted" '^rpcd'
	expect_owner "$t init start, owner daemon: recorded" daemon

	# Reload in plugin mode: the one-shot command, not a call through rpcd.
	new_sandbox
	record_owner rpcd
	FAKE_PS_OWNER=rpcd FAKE_UBUS_UP=1 run "$SH" "$tmp/rc.common" "$init" reload
	expect "$t init reload, owner rpcd: one-shot apply" '^packet-steering apply --reason reload --syslog$'
	expect_not "$t init reload, owner rpcd: no ubus call" '^ubus .*call'
	expect_not "$t init reload, owner rpcd: no restart" '^(restart|rpcd)'

	# The option changed to the plugin: the daemon stops, its object goes,
	# rpcd lists again and registers it; one apply; no daemon instance.
	new_sandbox
	record_owner daemon
	FAKE_PS_OWNER=rpcd FAKE_UBUS_UP=0 run "$SH" "$tmp/rc.common" "$init" reload
	expect "$t switch daemon -> rpcd: restart" '^restart$'
	expect "$t switch daemon -> rpcd: rpcd restarted" '^rpcd restart$'
	if [ "$(count '^rpcd restart$')" = 1 ]; then ok "$t switch daemon -> rpcd: rpcd restarted once"; else nok "$t switch daemon -> rpcd: rpcd restarted once" "$(cat "$sb/calls")"; fi
	expect_not "$t switch daemon -> rpcd: no daemon instance" '^procd_open_instance'
	expect "$t switch daemon -> rpcd: one-shot apply" '^packet-steering apply --reason start --syslog$'
	expect_owner "$t switch daemon -> rpcd: recorded" rpcd
	a=$(grep -n '^ubus list packet_steering$' "$sb/calls" | head -n 1 | cut -d: -f1)
	r=$(grep -n '^rpcd restart$' "$sb/calls" | cut -d: -f1)
	if [ -n "$a" ] && [ -n "$r" ] && [ "$a" -lt "$r" ]; then ok "$t switch daemon -> rpcd: object checked gone before rpcd lists"; else nok "$t switch daemon -> rpcd: object checked gone before rpcd lists" "$(cat "$sb/calls")"; fi

	# And back: rpcd lists {} (it is restarted while the record says
	# stopped), the daemon starts and registers.
	new_sandbox
	record_owner rpcd
	FAKE_PS_OWNER=daemon FAKE_UBUS_UP=1 run "$SH" "$tmp/rc.common" "$init" reload
	expect "$t switch rpcd -> daemon: restart" '^restart$'
	if [ "$(count '^rpcd restart$')" = 1 ]; then ok "$t switch rpcd -> daemon: rpcd restarted once"; else nok "$t switch rpcd -> daemon: rpcd restarted once" "$(cat "$sb/calls")"; fi
	expect "$t switch rpcd -> daemon: daemon instance" '^procd_set_param command /usr/sbin/packet-steering daemon$'
	expect "$t switch rpcd -> daemon: the log names the daemon" '^logger .*served by daemon; restarting rpcd'
	expect_not "$t switch rpcd -> daemon: not 'served by nobody'" 'served by nobody'
	expect_not "$t switch rpcd -> daemon: no one-shot" '^packet-steering apply'
	expect_owner "$t switch rpcd -> daemon: recorded" daemon

	# Stopping the service in plugin mode takes the object off ubus too.
	new_sandbox
	record_owner rpcd
	FAKE_PS_OWNER=rpcd run "$SH" "$tmp/rc.common" "$init" stop
	expect "$t stop, owner rpcd: rpcd restarted (lists nothing)" '^rpcd restart$'
	expect_owner "$t stop, owner rpcd: recorded stopped" stopped
	new_sandbox
	record_owner daemon
	FAKE_PS_OWNER=daemon run "$SH" "$tmp/rc.common" "$init" stop
	expect_not "$t stop, owner daemon: rpcd left alone" '^rpcd'

	# Hotplug does not care who serves: `ubus call` reaches the plugin
	# through rpcd as it reaches the daemon.
	new_sandbox
	record_owner rpcd
	FAKE_UBUS_UP=1 ACTION=add DEVICENAME=eth0 run "$SH" -c '( . "$1" )' sh "$hotplug"
	expect "$t hotplug add, object served by rpcd: ubus call" \
		'^ubus -t 2 call packet_steering apply \{"device":"eth0","reason":"hotplug"\}$'

	# --- uci-defaults ----------------------------------------------------
	# The boot sources each script in a subshell from /etc/uci-defaults.
	defaults_case() { # NAME NETWORK_STEERING NETWORK_FLOWS PRESET_MODE WANT_MODE WANT_FLOWS WRITES
		new_sandbox
		[ -n "$2" ] && echo "network.@globals[0].packet_steering=$2" >>"$sb/uci.db"
		[ -n "$3" ] && echo "network.@globals[0].steering_flows=$3" >>"$sb/uci.db"
		[ -n "$4" ] && printf '%s\n' "packet_steering.globals=globals" \
			"packet_steering.globals.mode=$4" >>"$sb/uci.db"
		if run "$SH" -c '. "$1"' sh "$repo/$defaults"; then ok "$t uci-defaults $1: exit 0"; else nok "$t uci-defaults $1: exit 0"; fi
		expect_db "$t uci-defaults $1: mode $5" "packet_steering.globals.mode=$5"
		if [ "$7" = 1 ]; then
			expect_db "$t uci-defaults $1: flows $6" "packet_steering.globals.flows=$6"
			expect "$t uci-defaults $1: committed" '^uci commit packet_steering$'
		else
			expect_not "$t uci-defaults $1: user's config not written" '^uci (set|commit)'
		fi
		expect_not "$t uci-defaults $1: network config untouched" '^uci set network'
		expect "$t uci-defaults $1: stock service disabled" '^stock disable$'
	}
	defaults_case "steering unset" "" "" "" auto 0 1
	defaults_case "steering 0" 0 "" "" off 0 1
	defaults_case "steering 1" 1 "" "" auto 0 1
	defaults_case "steering 2" 2 "" "" all 0 1
	defaults_case "steering 1, flows 128" 1 128 "" auto 128 1
	defaults_case "steering 0, flows 64" 0 64 "" off 64 1
	defaults_case "flows not a number" "" "12a" "" auto 0 1
	defaults_case "shipped auto follows 0" 0 "" auto off 0 1
	defaults_case "user's legacy kept" 0 "" legacy legacy "" 0
	defaults_case "user's custom kept" "" "" custom custom "" 0
	defaults_case "user's all kept" 1 "" all all "" 0
	defaults_case "user's off kept" 2 "" off off "" 0
	new_sandbox
	run "$SH" -c '. "$1"' sh "$repo/$defaults"
	if [ -f "$root/etc/config/packet_steering" ]; then ok "$t uci-defaults: config file created when absent"; else nok "$t uci-defaults: config file created when absent"; fi

	new_sandbox no-stock
	if run "$SH" -c '. "$1"' sh "$repo/$defaults"; then ok "$t uci-defaults without a stock service: exit 0"; else nok "$t uci-defaults without a stock service: exit 0"; fi

	# --- hand back (package prerm) ---------------------------------------
	new_sandbox stock-off
	run "$SH" -c '. "$IPKG_INSTROOT/usr/share/packet-steering/stock.sh" && ps_handback'
	expect "$t handback without a record: stock service enabled" '^stock enable$'
	expect "$t handback without a record: stock service started" '^stock start$'
	if [ -e "$root/etc/rc.d/S25packet_steering" ]; then ok "$t handback: stock S25 link back"; else nok "$t handback: stock S25 link back"; fi
	expect "$t handback: knobs only packet-steering manages reset first" '^packet-steering release$'
	r=$(grep -n '^packet-steering release$' "$sb/calls" | cut -d: -f1)
	s_=$(grep -n '^stock start$' "$sb/calls" | cut -d: -f1)
	if [ -n "$r" ] && [ -n "$s_" ] && [ "$r" -lt "$s_" ]; then ok "$t handback: release before the stock start"; else nok "$t handback: release before the stock start" "$(cat "$sb/calls")"; fi

	# --- other writers, takeover record, exact hand-back -----------------
	for case_ in "qualcommax/ipq807x take" "qualcommax/ipq60xx leave" "qualcommbe/ipq95xx leave" "rockchip/armv8 leave"; do
		tgt=${case_% *}
		new_sandbox smp target="$tgt"
		run "$SH" "$tmp/rc.common" "$init" start
		if [ "${case_#* }" = take ]; then
			expect "$t init start on $tgt: smp_affinity disabled" '^smp disable$'
			expect "$t init start on $tgt: takeover logged" '^logger .*smp_affinity'
			expect_record "$t init start on $tgt: smp_affinity's state noted" "smp_affinity enabled"
		else
			expect_not "$t init start on $tgt: smp_affinity left alone" '^smp (disable|stop)'
			expect_no_record "$t init start on $tgt: no smp_affinity note" "smp_affinity"
		fi
		expect_record "$t init start on $tgt: stock state noted" "packet_steering enabled"
	done

	# Deferred writers are left as they are: rockchip's hotplug script
	# (not removed, not changed) and irqbalance (its service and config).
	new_sandbox target=rockchip/armv8
	mkdir -p "$root/etc/hotplug.d/net"
	printf '#!/bin/sh\n# stand-in\n' >"$root/etc/hotplug.d/net/40-net-smp-affinity"
	cp "$root/etc/hotplug.d/net/40-net-smp-affinity" "$sb/40.orig"
	printf '%s\n' "$stock_stub" | sed 's/stock /irqbalance /; s/S25packet_steering/S90irqbalance/; s#init.d/packet_steering#init.d/irqbalance#' >"$root/etc/init.d/irqbalance"
	chmod +x "$root/etc/init.d/irqbalance"
	ln -s ../init.d/irqbalance "$root/etc/rc.d/S90irqbalance"
	echo "irqbalance.irqbalance.enabled=1" >>"$sb/uci.db"
	run "$SH" "$tmp/rc.common" "$init" start
	FAKE_UBUS_UP=1 run "$SH" "$tmp/rc.common" "$init" reload
	if cmp -s "$sb/40.orig" "$root/etc/hotplug.d/net/40-net-smp-affinity"; then ok "$t rockchip 40-net-smp-affinity left as it is"; else nok "$t rockchip 40-net-smp-affinity left as it is"; fi
	expect_not "$t irqbalance service left alone" '^irqbalance '
	expect_not "$t irqbalance config left alone" '^uci .*irqbalance'
	if [ -e "$root/etc/rc.d/S90irqbalance" ]; then ok "$t irqbalance stays enabled"; else nok "$t irqbalance stays enabled"; fi

	# Removal hands the rockchip hook's IRQs back: `packet-steering
	# release` sets the IRQs the plan pinned to the kernel default (here
	# they are at ff), then the hook is run once, as hotplug-call runs it.
	for case_ in "r4s 24 10 88 20" "r2s 24 2 25 4"; do
		# shellcheck disable=SC2086 # five words
		set -- $case_
		new_sandbox target=rockchip/armv8
		with_rockchip_hook "$1"
		run "$SH" -c '. "$STANDINS"; . "$IPKG_INSTROOT/usr/share/packet-steering/stock.sh" && ps_handback'
		if wait_for '^rockchip-hook wrote '"$4" 5 && [ "$(irq_mask "$2")/$(irq_mask "$4")" = "$3/$5" ]; then
			ok "$t handback on rockchip $1: the hook run again (irq $2 -> $3, irq $4 -> $5)"
		else
			nok "$t handback on rockchip $1: the hook run again" "irq $2: $(irq_mask "$2"), irq $4: $(irq_mask "$4"); $(cat "$sb/calls")"
		fi
		r=$(line_of '^packet-steering release$')
		h=$(line_of '^rockchip-hook wrote')
		if [ -n "$r" ] && [ -n "$h" ] && [ "$r" -lt "$h" ]; then ok "$t handback on rockchip $1: release first, then the hook"; else nok "$t handback on rockchip $1: release first, then the hook" "$(cat "$sb/calls")"; fi
		expect "$t handback on rockchip $1: logged" '^logger .*40-net-smp-affinity'
		if [ -f "$root/etc/hotplug.d/net/40-net-smp-affinity" ]; then ok "$t handback on rockchip $1: hook still there"; else nok "$t handback on rockchip $1: hook still there"; fi
	done
	new_sandbox target=qualcommax/ipq807x
	run "$SH" -c '. "$STANDINS"; . "$IPKG_INSTROOT/usr/share/packet-steering/stock.sh" && ps_handback'
	expect_not "$t handback without the rockchip hook: nothing about it" '40-net-smp-affinity'

	# A target hook (usr/libexec/platform/packet-steering.sh) runs only
	# from netifd's service: taking that over stops the hook too; the hook
	# itself is neither run nor changed, and hand-back leaves it to the
	# stock service again.
	new_sandbox target=econet/en751221
	mkdir -p "$root/usr/libexec/platform"
	printf '#!/bin/sh\necho "hook $*" >>"$CALLS"\n' >"$root/usr/libexec/platform/packet-steering.sh"
	chmod +x "$root/usr/libexec/platform/packet-steering.sh"
	cp "$root/usr/libexec/platform/packet-steering.sh" "$sb/hook.orig"
	run "$SH" "$tmp/rc.common" "$init" start
	FAKE_UBUS_UP=1 run "$SH" "$tmp/rc.common" "$init" reload
	expect "$t target hook: stock service disabled" '^stock disable$'
	expect "$t target hook: stock service stopped" '^stock stop$'
	expect_not "$t target hook: the hook is not run by packet-steering" '^hook'
	if cmp -s "$sb/hook.orig" "$root/usr/libexec/platform/packet-steering.sh"; then ok "$t target hook left as it is"; else nok "$t target hook left as it is"; fi
	run "$SH" -c '. "$IPKG_INSTROOT/usr/share/packet-steering/stock.sh" && ps_handback'
	expect "$t target hook: hand-back enables the stock service that runs it" '^stock enable$'
	if [ -x "$root/usr/libexec/platform/packet-steering.sh" ]; then ok "$t target hook still there after hand-back"; else nok "$t target hook still there after hand-back"; fi

	# The note keeps the state from before the first takeover.
	new_sandbox stock-off smp target=qualcommax/ipq807x
	run "$SH" "$tmp/rc.common" "$init" start
	ln -sf ../init.d/packet_steering "$root/etc/rc.d/S25packet_steering" # an upgrade of netifd
	run "$SH" "$tmp/rc.common" "$init" reload
	expect_record "$t takeover twice: first state kept" "packet_steering disabled"
	if [ "$(grep -c '^packet_steering ' "$root/etc/packet-steering/takeover")" = 1 ]; then ok "$t takeover twice: one note"; else nok "$t takeover twice: one note" "$(cat "$root/etc/packet-steering/takeover")"; fi

	# Hand-back restores exactly the noted states.
	handback_case() { # NAME STOCK_NOTE SMP_NOTE
		new_sandbox stock-off smp-off target=qualcommax/ipq807x
		mkdir -p "$root/etc/packet-steering"
		printf 'packet_steering %s\nsmp_affinity %s\n' "$2" "$3" >"$root/etc/packet-steering/takeover"
		run "$SH" -c '. "$IPKG_INSTROOT/usr/share/packet-steering/stock.sh" && ps_handback'
		if [ "$2" = enabled ]; then
			expect "$t handback $1: stock enabled" '^stock enable$'
			expect "$t handback $1: stock started" '^stock start$'
		else
			expect_not "$t handback $1: stock left disabled and stopped" '^stock (enable|start)$'
		fi
		if [ "$3" = enabled ]; then
			expect "$t handback $1: smp_affinity enabled" '^smp enable$'
			expect "$t handback $1: smp_affinity placement run now" '^smp boot$'
		else
			expect_not "$t handback $1: smp_affinity left disabled" '^smp (enable|boot)$'
		fi
		if [ -e "$root/etc/packet-steering/takeover" ]; then nok "$t handback $1: note removed"; else ok "$t handback $1: note removed"; fi
		# removal left an empty /etc/packet-steering behind (found with opkg in the 23.05 tree)
		if [ -e "$root/etc/packet-steering" ]; then nok "$t handback $1: no /etc/packet-steering left"; else ok "$t handback $1: no /etc/packet-steering left"; fi
	}
	# A file someone else put into /etc/packet-steering keeps the directory.
	new_sandbox stock-off
	mkdir -p "$root/etc/packet-steering"
	echo "packet_steering enabled" >"$root/etc/packet-steering/takeover"
	echo mine >"$root/etc/packet-steering/notes"
	run "$SH" -c '. "$IPKG_INSTROOT/usr/share/packet-steering/stock.sh" && ps_handback'
	if [ -f "$root/etc/packet-steering/notes" ] && [ ! -e "$root/etc/packet-steering/takeover" ]; then ok "$t handback: another file in /etc/packet-steering kept"; else nok "$t handback: another file in /etc/packet-steering kept"; fi
	handback_case "both were enabled" enabled enabled
	handback_case "stock was disabled" disabled enabled
	handback_case "smp_affinity was disabled" enabled disabled

	# --- package scripts: install, upgrade (opkg, apk), removal ----------
	# The postinst and prerm as the Makefile ships them, run as each
	# package manager runs them (include/package-pack.mk): opkg's control
	# scripts call default_postinst/default_prerm, then the package's
	# script (prerm: the package's first); apk's post-upgrade exports
	# PKG_UPGRADE=1 and runs default_postinst then the package's postinst,
	# its pre-deinstall default_prerm then the package's prerm.
	# On a router IPKG_INSTROOT is empty; the sandbox needs it for its
	# root, so the image-build guard line is dropped and the absolute
	# source of stock.sh is pointed into the sandbox (both checked to be
	# there); the rest runs as shipped.
	mkscript() { # NAME -> $tmp/pkg.NAME
		sed -n "/^define Package\/packet-steering\/$1\$/,/^endef\$/p" openwrt/packet-steering/Makefile |
			sed '1d;$d' | sed 's/\$\$/$/g' >"$tmp/pkg.$1.shipped"
		guard='[ -n "${IPKG_INSTROOT}" ] && exit 0'
		if grep -qxF "$guard" "$tmp/pkg.$1.shipped" && grep -q '^\. /usr/share/packet-steering/stock\.sh ' "$tmp/pkg.$1.shipped"; then
			ok "$t package $1: image-build guard and stock.sh source"
		else
			nok "$t package $1: image-build guard and stock.sh source" "$(cat "$tmp/pkg.$1.shipped")"
		fi
		grep -vxF "$guard" "$tmp/pkg.$1.shipped" |
			sed 's#^\. /usr/share/packet-steering/stock\.sh #. "$IPKG_INSTROOT/usr/share/packet-steering/stock.sh" #' >"$tmp/pkg.$1"
	}
	mkscript postinst
	mkscript prerm
	for f in postinst prerm; do
		if [ -s "$tmp/pkg.$f" ] && out="$(shellcheck -s sh -e SC1091 "$tmp/pkg.$f.shipped" 2>&1)"; then ok "$t package $f extracted, shellcheck clean"; else nok "$t package $f extracted, shellcheck clean" "$out"; fi
	done
	# default_postinst / default_prerm stand-ins (lib/functions.sh): on
	# install enable+start, on upgrade start only; prerm: disable (not on
	# upgrade) and stop.
	cat >"$tmp/defaults.sh" <<'EOS'
own="${IPKG_INSTROOT}/etc/init.d/packet-steering"
default_postinst() { [ "${PKG_UPGRADE:-}" = 1 ] || "$own" enable; "$own" start; }
default_prerm() { [ "${PKG_UPGRADE:-}" = 1 ] || "$own" disable; "$own" stop; }
EOS
	pkg_run() { # MANAGER ACTION
		case "$1/$2" in
		opkg/install) script='. "$D"; default_postinst; . "$P"' post=1 ;;
		opkg/upgrade) script='export PKG_UPGRADE=1; . "$D"; default_postinst; . "$P"' post=1 ;;
		opkg/remove) script='. "$P"; . "$D"; default_prerm' post=0 ;;
		apk/install) script='. "$D"; default_postinst; . "$P"' post=1 ;;
		apk/upgrade) script='export PKG_UPGRADE=1; . "$D"; default_postinst; . "$P"' post=1 ;;
		apk/remove) script='. "$D"; default_prerm; . "$P"' post=0 ;;
		esac
		if [ "$post" = 1 ]; then P="$tmp/pkg.postinst"; else P="$tmp/pkg.prerm"; fi
		# The package scripts end in exit 0: run them in a subshell.
		D="$tmp/defaults.sh" P="$P" run "$SH" -c "( $script )"
	}
	for pm in opkg apk; do
		new_sandbox own-stub smp target=qualcommax/ipq807x
		pkg_run "$pm" install
		expect "$t $pm install: stock disabled" '^stock disable$'
		expect "$t $pm install: smp_affinity disabled" '^smp disable$'
		expect_record "$t $pm install: stock state noted" "packet_steering enabled"

		: >"$sb/calls"
		ln -sf ../init.d/packet_steering "$root/etc/rc.d/S25packet_steering" # netifd upgraded meanwhile
		pkg_run "$pm" upgrade
		expect "$t $pm upgrade: daemon restarted on the new binary" '^own restart$'
		expect_not "$t $pm upgrade: nothing handed back" '^(stock (enable|start)|packet-steering release)$'
		expect "$t $pm upgrade: takeover holds" '^stock disable$'
		expect_record "$t $pm upgrade: first state kept" "packet_steering enabled"

		: >"$sb/calls"
		pkg_run "$pm" remove
		expect "$t $pm remove: packet-steering stopped" '^own stop$'
		o=$(grep -n '^own stop$' "$sb/calls" | head -n 1 | cut -d: -f1)
		s_=$(grep -n '^stock start$' "$sb/calls" | cut -d: -f1)
		if [ -n "$o" ] && [ -n "$s_" ] && [ "$o" -lt "$s_" ]; then ok "$t $pm remove: ours stopped before the stock start"; else nok "$t $pm remove: ours stopped before the stock start" "$(cat "$sb/calls")"; fi
		expect "$t $pm remove: knobs reset" '^packet-steering release$'
		expect "$t $pm remove: stock enabled and started" '^stock start$'
		expect "$t $pm remove: smp_affinity back" '^smp enable$'
		if [ -e "$root/etc/rc.d/S25packet_steering" ] && [ -e "$root/etc/rc.d/S93smp_affinity" ]; then ok "$t $pm remove: both links back"; else nok "$t $pm remove: both links back"; fi
		if [ -e "$root/etc/packet-steering" ]; then nok "$t $pm remove: no /etc/packet-steering left" "$(ls -la "$root/etc/packet-steering" 2>&1)"; else ok "$t $pm remove: no /etc/packet-steering left"; fi

		# Installed while the stock service was disabled: removal keeps it so.
		new_sandbox own-stub stock-off
		pkg_run "$pm" install
		: >"$sb/calls"
		pkg_run "$pm" remove
		expect_not "$t $pm remove, stock disabled before install: stays disabled" '^stock (enable|start)$'
		if [ -e "$root/etc/rc.d/S25packet_steering" ]; then nok "$t $pm remove, stock disabled before install: no S25 link"; else ok "$t $pm remove, stock disabled before install: no S25 link"; fi
	done
done

echo "shell tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
