# The LuCI page in a browser, through the router's own uhttpd, LuCI and
# rpcd (sourced by check.sh; vmtest/openwrt_luci_test.go is the host side,
# luci-app-packet-steering/test/openwrt.test.mjs the browser). Here: the
# logins the browser uses (root with a password, a read-only rpcd login),
# the synchronisation with the host, and the router's own view of what the
# browser did.
#
# shellcheck shell=ash
# shellcheck disable=SC3043 # local: busybox ash has it
# shellcheck disable=SC2317 # the check functions are called through run

# shellcheck source=/dev/null # written by the test: PSL_* settings
. /root/pscheck/luci.conf

# The browser's checks (reported by the host) and the router's own.
LUCI_BROWSER="luci-login luci-queues luci-save-apply luci-readonly"
EXPECT="$EXPECT luci-setup $LUCI_BROWSER luci-guest-state"

# luci_selected: whether any LuCI check runs (PACKET_STEERING_OPENWRT_CHECKS).
luci_selected() {
	[ -z "${PSC_ONLY:-}" ] && return 0
	case " $PSC_ONLY " in *" luci-"*) return 0 ;; esac
	return 1
}

# setpw USER PASSWORD: the image's own passwd (busybox), as a user does.
setpw() { printf '%s\n%s\n' "$2" "$2" | passwd "$1" >/dev/null 2>&1; }

fetch() { uclient-fetch -q -T 5 -O "$2" "$1" 2>/dev/null; }

c_luci_setup() {
	setpw root "$PSL_ROOT_PW" || { echo "passwd root failed"; return 1; }
	grep -q '^root:\$' /etc/shadow || { echo "root has no password hash: $(grep ^root: /etc/shadow | cut -c1-12)"; return 1; }
	# A system user for the read-only login ($p$viewer: rpcd checks the
	# password against /etc/shadow), and its rpcd login: read of the app's
	# ACL group only.
	grep -q '^viewer:' /etc/passwd || echo 'viewer:x:1000:1000:viewer:/var:/bin/false' >>/etc/passwd
	grep -q '^viewer:' /etc/shadow || echo 'viewer:*:0:0:99999:7:::' >>/etc/shadow
	setpw viewer "$PSL_VIEWER_PW" || { echo "passwd viewer failed"; return 1; }
	uci -q delete rpcd.viewer
	uci set rpcd.viewer=login
	uci set rpcd.viewer.username=viewer
	# shellcheck disable=SC2016 # rpcd's own syntax: the password of /etc/shadow's viewer
	uci set rpcd.viewer.password='$p$viewer'
	# LuCI itself needs unauthenticated (session access, luci getFeatures)
	# and luci-base: without them it logs the session out ("Login session
	# is expired") before any page draws.
	for g in unauthenticated luci-base luci-app-packet-steering; do
		uci add_list rpcd.viewer.read="$g"
	done
	uci commit rpcd
	/etc/init.d/rpcd restart
	waitfor 20 ubus list session || { echo "rpcd's session object not back"; return 1; }
	waitfor 20 ubus list packet_steering || { echo "packet_steering not on ubus after the rpcd restart"; return 1; }
	# The login works through the image's own rpcd (the session plugin).
	ubus call session login "{\"username\":\"viewer\",\"password\":\"$PSL_VIEWER_PW\"}" | grep -q ubus_rpc_session ||
		{ echo "viewer cannot log in through rpcd"; return 1; }
	pidof uhttpd >/dev/null || { echo "uhttpd is not running"; return 1; }
	# uhttpd serves the image's start page (LuCI's login itself answers
	# 403, which uclient-fetch counts as a failure: the browser checks it).
	waitfor 20 fetch http://127.0.0.1/ /tmp/luci.index || { echo "uhttpd does not serve /"; return 1; }
	grep -q 'cgi-bin/luci' /tmp/luci.index || { echo "no LuCI on uhttpd: $(head -c 200 /tmp/luci.index)"; return 1; }
}

c_luci_guest_state() {
	local q f p want got k napi=0
	# What the browser's Save & Apply set, in force and persisted; the
	# read-only user's forced set_mode (mode off) changed nothing.
	mode_is "$PSL_MODE" || { echo "mode $(stf '@.mode'), the page set $PSL_MODE"; return 1; }
	[ "$(uci -q get packet_steering.globals.mode)" = "$PSL_MODE" ] ||
		{ echo "packet_steering.globals.mode=$(uci -q get packet_steering.globals.mode)"; return 1; }
	waitfor 10 insync || { echo "not in sync: $(brief)"; return 1; }
	[ "$(stf '@.last_apply.failed')" = 0 ] || { echo "failed writes: $(stf '@.last_apply')"; return 1; }
	# The kernel's knobs: every rx queue's rps_cpus and NAPI thread as
	# planned, and the knobs not what they were before the page was used.
	ubus call packet_steering get_queues '{"device":"eth0"}' >/tmp/luci.queues || return 1
	for q in 0 1 2 3; do
		f=/sys/class/net/eth0/queues/rx-$q/rps_cpus
		want=$(jsonfilter -i /tmp/luci.queues -e "@.devices[0].rx[$q].want_rps_cpus")
		[ "$(norm "$(cat $f)")" = "$(norm "$want")" ] || { echo "$f is $(cat $f), planned $want"; return 1; }
		p=$(jsonfilter -i /tmp/luci.queues -e "@.devices[0].rx[$q].napi.pid")
		want=$(jsonfilter -i /tmp/luci.queues -e "@.devices[0].rx[$q].napi.want_cpus")
		[ -n "$p" ] || { echo "rx-$q: no NAPI thread in get_queues"; return 1; }
		[ -n "$want" ] || continue
		got=$(grep Cpus_allowed_list "/proc/$p/status" | cut -f2)
		[ "$got" = "$want" ] || { echo "rx-$q NAPI thread $p on CPUs $got, planned $want"; return 1; }
		napi=$((napi + 1))
	done
	[ "$napi" -gt 0 ] || { echo "no rx NAPI thread has planned CPUs in mode $PSL_MODE"; return 1; }
	k=$(luci_knobs)
	note "eth0's knobs before the browser run: $(tr '\n' ' ' </tmp/knobs.luci-before)"
	note "after the page's Save & Apply ($PSL_MODE): $(echo "$k" | tr '\n' ' ')"
	[ "$k" != "$(cat /tmp/knobs.luci-before)" ] || { echo "the knobs are as before the page's Save & Apply"; return 1; }
}

# luci_knobs: eth0's rx rps_cpus and its NAPI threads' CPUs (the threads
# get_queues names; cheaper than knobs' walk over /proc under TCG).
luci_knobs() {
	local q p
	for q in /sys/class/net/eth0/queues/rx-*; do echo "${q##*/}/rps_cpus=$(cat "$q/rps_cpus")"; done
	for p in $(ubus call packet_steering get_queues '{"device":"eth0"}' | jsonfilter -e '@.devices[0].rx[*].napi.pid'); do
		echo "napi$p=$(grep Cpus_allowed_list "/proc/$p/status" | cut -f2)"
	done
}

# browser_run PHASE CHECK...: the host's browser run of PHASE (openwrt.mjs's
# PS_PHASE: luci, graph): say "BROWSER-READY PHASE", wait (the router
# as it is) until the host serves the results on http://PSL_HOST/PHASE,
# then one PASS/FAIL line per CHECK and the host's TIME lines.
browser_run() {
	local phase="$1" i=0 l n res="/tmp/browser.$1"
	shift
	rm -f "$res"
	say "BROWSER-READY $phase"
	while ! fetch "http://$PSL_HOST/$phase" "$res"; do
		i=$((i + 2))
		[ "$i" -ge "$PSL_WAIT" ] && break
		sleep 2
	done
	for n in "$@"; do
		l=$(grep -m1 "^[A-Z]* $n\(:\| \|\$\)" "$res" 2>/dev/null)
		case "$l" in
		"PASS $n") say "PASS $n" ;;
		"FAIL $n"*) say "$l" ;;
		*) say "FAIL $n: no result from the host's browser run within ${PSL_WAIT}s (or not reported)" ;;
		esac
	done
	grep '^TIME ' "$res" 2>/dev/null | while read -r l; do say "$l"; done
}

# luci_checks: the logins, then the host's browser run (the guest waits
# here, the daemon running, until the host reports), then the router's
# view; mode auto again afterwards for the checks that follow.
luci_checks() {
	luci_selected || return 0
	run luci-setup c_luci_setup
	luci_knobs >/tmp/knobs.luci-before
	# shellcheck disable=SC2086 # the list of checks
	browser_run luci $LUCI_BROWSER
	run luci-guest-state c_luci_guest_state
	ubus call packet_steering set_mode '{"mode":"auto"}' >/dev/null
	waitfor 15 insync || note "not in sync after the LuCI checks: $(brief)"
}
