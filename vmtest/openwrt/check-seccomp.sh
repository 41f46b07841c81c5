# shellcheck shell=ash
# The daemon's seccomp filter on the router (sourced by check.sh before
# remove, after every other check ran with the filter on; uses its run,
# say, note, waitfor, st, insync, daemon_pid).
#
# The package runs the daemon as ujail's OCI bundle
# /usr/share/packet-steering/jail (config.json: args, uid 0, two
# capabilities, no new privileges, linux.seccomp with an allow list and
# defaultAction SCMP_ACT_TRACE, which without a tracer makes a call outside
# the list fail with ENOSYS).
#
# seccomp: the daemon procd runs is in filter mode under ujail.
# seccomp-enforced: a call outside the list fails (ENOSYS) and kills
#   nothing: the one-shot apply under a copy of the bundle without openat
#   reports "function not implemented" and exits 1; with the shipped list
#   it applies (exit 0).
# seccomp-complete: the shipped list with defaultAction SCMP_ACT_LOG (the
#   kernel logs every call outside the list, audit type=1326, and lets it
#   through): a daemon run from it serves the four methods, an interface
#   event, a hotplug add and its log lines, then the one-shot apply,
#   release, status and queues; no call may be logged. A control (openat
#   left out) must be logged, or the kernel does not report and nothing was
#   measured.

PSJ=/usr/share/packet-steering/jail

sc_expect=
for c in seccomp seccomp-enforced seccomp-complete; do
	if [ -n "${PSC_ONLY:-}" ]; then
		case " $PSC_ONLY " in *" $c "*) ;; *) continue ;; esac
	fi
	sc_expect="$sc_expect $c"
done
[ -n "$sc_expect" ] && say "EXPECT$sc_expect"

# sc_bundle DIR ARGS-JSON [DEFAULT [DROP]]: a copy of the shipped bundle in
# DIR with process.args ARGS-JSON, the default action DEFAULT and the
# syscall DROP left out of the allow list.
sc_bundle() {
	mkdir -p "$1"
	# shellcheck disable=SC2016
	tr -d '\n' <"$PSJ/config.json" | sed \
		-e 's|"args":[[:space:]]*\[[^]]*\]|"args": '"$2"'|' \
		-e "s|\"SCMP_ACT_TRACE\"|\"${3:-SCMP_ACT_TRACE}\"|" \
		-e "s|\"${4:-no-such-call}\",||" >"$1/config.json"
}
# sc_audit: the seccomp audit lines of the kernel log since the last clear.
# ujail's own calls between the filter and its execve (exe /sbin/ujail:
# musl's ioctl and writev of its "exec-ing" line, which fail under the
# shipped default and lose that line) are not the daemon's.
sc_audit() { dmesg | grep 'type=1326' | grep -v 'exe="/sbin/ujail"'; }

c_seccomp() {
	local p s pp
	p=$(daemon_pid) || { echo "no daemon"; return 1; }
	s=/proc/$p/status
	[ "$(sed -n 's/^Seccomp:[[:space:]]*//p' "$s")" = 2 ] || { grep '^Seccomp\|^NoNewPrivs' "$s"; echo "Seccomp is not 2 (filter)"; return 1; }
	pp=$(sed -n 's/^PPid:[[:space:]]*//p' "$s")
	if [ "$(cat "/proc/$pp/comm")" != packet-steering ] || ! grep -q '^/sbin/ujail' "/proc/$pp/cmdline"; then
		echo "parent $pp is $(tr '\0' ' ' <"/proc/$pp/cmdline")"
		return 1
	fi
	tr '\0' ' ' <"/proc/$pp/cmdline" | grep -q -- "-J $PSJ" || { echo "ujail without the bundle"; return 1; }
	note "seccomp: daemon $p Seccomp $(sed -n 's/^Seccomp:[[:space:]]*//p' "$s"), filters $(sed -n 's/^Seccomp_filters:[[:space:]]*//p' "$s"), under $(tr '\0' ' ' <"/proc/$pp/cmdline")"
}
run seccomp c_seccomp

c_seccomp_enforced() {
	local out rc
	sc_bundle /tmp/psj-noopen '["/usr/sbin/packet-steering", "apply", "--reason", "seccomp", "--json"]' SCMP_ACT_TRACE openat
	grep -q '"openat"' /tmp/psj-noopen/config.json && { echo "openat still listed"; return 1; }
	out=$(ujail -n psc-noopen -i -J /tmp/psj-noopen 2>&1)
	rc=$?
	note "seccomp without openat: exit $rc: $(echo "$out" | grep -v '^jail:' | head -c 300 | tr '\n' ' ')"
	[ "$rc" = 1 ] || { echo "exit $rc, want 1 (an error, not a kill)"; return 1; }
	echo "$out" | grep -q 'function not implemented' || { echo "no ENOSYS error: $out"; return 1; }
	sc_bundle /tmp/psj-apply '["/usr/sbin/packet-steering", "apply", "--reason", "seccomp", "--json"]'
	out=$(ujail -n psc-apply -i -J /tmp/psj-apply 2>&1) || { echo "apply under the shipped filter failed: $out"; return 1; }
	echo "$out" | grep -q '"failed"' || { echo "no apply result: $out"; return 1; }
	waitfor 10 insync || { echo "not in sync: $(st)"; return 1; }
}
run seccomp-enforced c_seccomp_enforced

c_seccomp_complete() {
	local out n
	dmesg -c >/dev/null
	# The control: openat left out, so the kernel must log it.
	sc_bundle /tmp/psj-ctl '["/usr/sbin/packet-steering", "status"]' SCMP_ACT_LOG openat
	ujail -n psc-ctl -i -J /tmp/psj-ctl >/dev/null 2>&1
	n=$(dmesg | grep -c 'type=1326')
	note "seccomp control (openat not listed, SCMP_ACT_LOG): $n audit lines: $(dmesg | grep -m1 'type=1326' | cut -c1-240)"
	[ "$n" -gt 0 ] || { echo "the kernel logs no SCMP_ACT_LOG (audit type=1326): nothing measured"; return 1; }
	dmesg -c >/dev/null

	# The daemon from the shipped list, logging instead of failing.
	/etc/init.d/packet-steering stop
	waitfor 10 sh -c '! ubus list packet_steering' || { echo "daemon did not stop"; return 1; }
	sc_bundle /tmp/psj-log '["/usr/sbin/packet-steering", "daemon"]' SCMP_ACT_LOG
	ujail -n psc-log -i -J /tmp/psj-log </dev/null >/tmp/psj-log.out 2>&1 &
	waitfor 30 ubus list packet_steering || { echo "no object from the logging daemon: $(cat /tmp/psj-log.out)"; return 1; }
	ubus call packet_steering status >/dev/null || return 1
	ubus call packet_steering get_queues '{"device":"eth0"}' >/dev/null || return 1
	ubus call packet_steering apply '{"reason":"seccomp"}' >/dev/null || return 1
	ubus call packet_steering set_mode '{"mode":"auto"}' >/dev/null || return 1
	ubus call packet_steering set_mode '{"mode":"turbo"}' >/dev/null 2>&1
	ifup lan
	ip link add pss0 type veth peer name pss1 && ip link set pss0 up
	sleep 4
	ip link del pss0
	sleep 2
	insync || { echo "logging daemon not in sync: $(st)"; }
	kill "$(pidof psc-log)" 2>/dev/null
	waitfor 10 sh -c '! ubus list packet_steering'
	# The one-shot commands.
	for a in '"apply", "--reason", "seccomp", "--syslog"' '"release"' '"apply", "--device", "eth0"' '"status"' '"queues"'; do
		sc_bundle /tmp/psj-one "[\"/usr/sbin/packet-steering\", $a]" SCMP_ACT_LOG
		ujail -n psc-one -i -J /tmp/psj-one >/dev/null 2>&1 || { echo "one-shot [$a] failed"; }
	done
	out=$(sc_audit)
	/etc/init.d/packet-steering start
	waitfor 30 ubus list packet_steering || { echo "daemon not back"; return 1; }
	waitfor 20 insync || { echo "not in sync after the restart: $(st)"; return 1; }
	if [ -n "$out" ]; then
		echo "$out" | head -n 20 | while read -r l; do note "seccomp: outside the list: $l"; done
		echo "calls outside the list: $(echo "$out" | sed -n 's/.*syscall=\([0-9]*\).*/\1/p' | sort -un | tr '\n' ' ')"
		return 1
	fi
	note "seccomp: no call outside the list (daemon: 4 methods, bad argument, ifup, hotplug add/del, log; one-shot apply, release, apply --device, status, queues)"
}
run seccomp-complete c_seccomp_complete
