#!/bin/bash
# procd-check.sh: the package's init script, triggers, hotplug script,
# logging, takeover and hand-back under the real OpenWrt user space: procd
# as PID 1 of a PID namespace, its ubusd, logd/logread, rpcd (with its rc
# object and sessions) and uhttpd with its ubus JSON-RPC handler, all built
# from source, in a throwaway root directory with busybox.
#
# Manual (not part of `make test`): it needs sources that CI cannot fetch.
#
#   MIRRORS=/work/.mirror OPENWRT_SRC=/path/to/openwrt scripts/procd-check.sh
#
# MIRRORS holds bare git directories <owner>+<name>/repo of openwrt/libubox,
# openwrt/ubus, openwrt/uci, openwrt/udebug, openwrt/ubox (logd, logread,
# validate_data), openwrt/procd, openwrt/rpcd and openwrt/uhttpd (optional:
# without it the LuCI session check is left out). OPENWRT_SRC is a checkout
# of openwrt/openwrt (only these files are read: etc/rc.common,
# lib/functions.sh, lib/functions/service.sh and sbin/hotplug-call of
# base-files; procd's procd.sh, hotplug.json and reload_config; uci's
# lib/config/uci.sh; ubox's log.init; rpcd's init script and config; netifd's
# init.d/packet_steering). Needs root, cmake, gcc, libjson-c-dev, busybox
# (static), flock, nsenter/unshare (util-linux), iproute2, openssl, curl, jq.
#
# WORK (default /tmp/procd-check) keeps the builds between runs (delete
# WORK/stage to rebuild); the root directory WORK/root is made afresh.
# PROCD_CHECK_HOLD=install (or boot2) stops at that point and prints how to
# enter the namespaces; PROCD_DEBUG=N runs procd with -d N (its messages go
# to WORK/procd-console.txt until it switches to syslog).
#
# What is real and what is not: procd, ubusd, logd, logread, validate_data,
# rpcd, uhttpd, uci, jshn and OpenWrt's shell files are the real ones;
# procd runs as PID 1 (started directly, not through /sbin/init and
# preinit); netifd is not run (no interfaces), its packet_steering init
# script is the real one and runs a stand-in of packet-steering.uc (ucode
# with its uci and fs modules is not built) that logs and rewrites one
# knob; the package's files are copied as its Makefile's install section
# lists them and its control scripts are made as package-pack.mk makes
# them for opkg and apk (the package managers themselves are not run). The
# shell is busybox ash; Debian's static busybox prefers its applets to
# PATH, so its `logread` applet would shadow logd's: the checks call
# /sbin/logread.
#
# Nothing outside the namespaces is changed: the root is a directory under
# WORK; /proc, /sys and /tmp are mounted in a new mount namespace before
# procd starts and procd mounts its /dev there; /proc/irq and /proc/sys are
# read-only in there; the network devices (veth pairs with 4 queues,
# 198.18.0.0/15 addresses) exist only in the new network namespace;
# udevtrigger is a stand-in that makes a few character devices instead of
# replaying the host's uevents (and no /dev/kmsg, so nothing reaches the
# host's kernel log). Killing the namespace's PID 1 ends everything; an
# EXIT trap does that.
#
# Output: one "ok"/"FAIL" line per check, the system log of each boot in
# WORK/logread-*.txt, and exit status 1 when a check failed.
# shellcheck disable=SC2016 # single-quoted $ is for the shell inside the root
set -u
set -o pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
MIRRORS="${MIRRORS:-/work/.mirror}"
OPENWRT_SRC="${OPENWRT_SRC:?set OPENWRT_SRC to a checkout of openwrt/openwrt}"
WORK="$(realpath -m "${WORK:-/tmp/procd-check}")"
stage="$WORK/stage"
root="$WORK/root"
nspid=
pass=0
fail=0

say() { printf '%s\n' "$*" >&2; }
die() {
	say "procd-check: $*"
	exit 2
}
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
check() { # check NAME CMD...: ok when CMD succeeds
	local name="$1"
	shift
	local out
	if out="$("$@" 2>&1)"; then ok "$name"; else nok "$name" "$out"; fi
}

[ "$(id -u)" = 0 ] || die "run as root"
for t in cmake gcc busybox flock nsenter unshare ip curl jq git; do
	command -v "$t" >/dev/null || die "missing $t"
done
for f in package/base-files/files/etc/rc.common package/system/procd/files/procd.sh; do
	[ -f "$OPENWRT_SRC/$f" ] || die "$OPENWRT_SRC/$f missing"
done

# --- 1. build the stock user space ------------------------------------------

# src NAME OWNER+REPO: unpack the mirror's HEAD into WORK/src/NAME.
src() {
	local dir="$WORK/src/$1"
	rm -rf "$dir" && mkdir -p "$dir"
	git --git-dir="$MIRRORS/$2/repo" archive HEAD | tar -x -C "$dir" || return 1
	git --git-dir="$MIRRORS/$2/repo" rev-parse --short HEAD >"$dir/.commit"
	# Newer compilers warn where these were written for older ones.
	find "$dir" -name CMakeLists.txt -exec sed -i -E 's/ -Werror([ )"])/\1/g' {} +
}
# cm NAME [CMAKE ARGS]: configure with prefix /usr against the stage.
cm() {
	local name="$1"
	shift
	(cd "$WORK/src/$name" && cmake -S . -B _b -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib \
		-DCMAKE_PREFIX_PATH="$stage/usr" -DCMAKE_C_FLAGS="-I$stage/usr/include" \
		-DCMAKE_EXE_LINKER_FLAGS="-L$stage/usr/lib -Wl,-rpath-link,$stage/usr/lib" \
		-DCMAKE_SHARED_LINKER_FLAGS="-L$stage/usr/lib" -DCMAKE_MODULE_LINKER_FLAGS="-L$stage/usr/lib" \
		"$@" >"$WORK/src/$name.cmake.log" 2>&1) || {
		tail -20 "$WORK/src/$name.cmake.log" >&2
		return 1
	}
}
mk() { # mk NAME [TARGETS]: build
	local name="$1"
	shift
	local t=()
	for x in "$@"; do t+=(--target "$x"); done
	(cd "$WORK/src/$name" && cmake --build _b -j2 "${t[@]}" >"$WORK/src/$name.build.log" 2>&1) || {
		tail -30 "$WORK/src/$name.build.log" >&2
		return 1
	}
}
inst() { (cd "$WORK/src/$1" && DESTDIR="$stage" cmake --install _b >/dev/null); }

build_stock() {
	mkdir -p "$stage/usr/lib" "$stage/usr/include" "$stage/usr/sbin" "$stage/usr/bin"
	if [ ! -e "$stage/.libubox" ]; then
		src libubox openwrt+libubox && cm libubox -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF &&
			mk libubox && inst libubox && touch "$stage/.libubox" || return 1
	fi
	if [ ! -e "$stage/.ubus" ]; then
		src ubus openwrt+ubus && cm ubus -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF &&
			mk ubus && inst ubus && touch "$stage/.ubus" || return 1
	fi
	if [ ! -e "$stage/.uci" ]; then
		src uci openwrt+uci && cm uci -DBUILD_LUA=OFF -DBUILD_TESTS=OFF &&
			mk uci && inst uci && touch "$stage/.uci" || return 1
	fi
	if [ ! -e "$stage/.udebug" ]; then
		# Only the library (procd and logd link it); its ucode module is not needed.
		src udebug openwrt+udebug && cm udebug -Ducode_include_dir="$stage/usr/include" && mk udebug udebug &&
			cp -a "$WORK"/src/udebug/_b/libudebug.so* "$stage/usr/lib/" &&
			cp "$WORK"/src/udebug/udebug.h "$WORK"/src/udebug/udebug-pcap.h "$stage/usr/include/" &&
			touch "$stage/.udebug" || return 1
	fi
	if [ ! -e "$stage/.ubox" ]; then
		src ubox openwrt+ubox && cm ubox && mk ubox logd logread validate validate_data &&
			cp "$WORK"/src/ubox/_b/logd "$WORK"/src/ubox/_b/logread "$WORK"/src/ubox/_b/validate_data "$stage/usr/sbin/" &&
			cp -a "$WORK"/src/ubox/_b/libvalidate.so* "$stage/usr/lib/" &&
			touch "$stage/.ubox" || return 1
	fi
	if [ ! -e "$stage/.procd" ]; then
		# procd uses strlcpy, which musl has and glibc before 2.38 has not.
		cat >"$WORK/src/compat-strlcpy.h" <<-'EOF'
			#include <string.h>
			static inline size_t compat_strlcpy(char *d, const char *s, size_t n)
			{
				size_t l = strlen(s);
				if (n) {
					size_t c = l >= n ? n - 1 : l;
					memcpy(d, s, c);
					d[c] = 0;
				}
				return l;
			}
			#define strlcpy compat_strlcpy
		EOF
		src procd openwrt+procd &&
			cm procd -DCMAKE_C_FLAGS="-I$stage/usr/include -include $WORK/src/compat-strlcpy.h" && mk procd procd &&
			cp "$WORK"/src/procd/_b/procd "$stage/usr/sbin/" && touch "$stage/.procd" || return 1
	fi
	if [ ! -e "$stage/.rpcd" ]; then
		src rpcd openwrt+rpcd && cm rpcd -DIWINFO_SUPPORT=OFF -DUCODE_SUPPORT=OFF -DRPCSYS_SUPPORT=OFF &&
			mk rpcd && inst rpcd &&
			install -D -m 0644 "$WORK/src/rpcd/unauthenticated.json" "$stage/usr/share/rpcd/acl.d/unauthenticated.json" &&
			touch "$stage/.rpcd" || return 1
	fi
	if [ ! -e "$stage/.uhttpd" ] && [ -d "$MIRRORS/openwrt+uhttpd/repo" ]; then
		src uhttpd openwrt+uhttpd && cm uhttpd -DTLS_SUPPORT=OFF -DLUA_SUPPORT=OFF -DUCODE_SUPPORT=OFF -DUBUS_SUPPORT=ON &&
			mk uhttpd && inst uhttpd && touch "$stage/.uhttpd" || return 1
	fi
	for n in libubox ubus uci udebug ubox procd rpcd uhttpd; do
		[ -f "$WORK/src/$n/.commit" ] && printf '%s %s\n' "$n" "$(cat "$WORK/src/$n/.commit")"
	done >"$stage/.commits"
	return 0
}

say "building the stock user space into $stage (cached)"
build_stock || die "build failed (logs in $WORK/src)"

say "building the router binary"
(cd "$repo" && CGO_ENABLED=0 go build -tags router -trimpath -o "$WORK/packet-steering" ./cmd/packet-steering) ||
	die "go build failed"

# --- 2. the root directory ---------------------------------------------------

ow() { # ow PATH-IN-OPENWRT DEST [MODE]
	install -D -m "${3:-0644}" "$OPENWRT_SRC/$1" "$root$2" || die "$OPENWRT_SRC/$1"
}

make_root() {
	rm -rf "$root"
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib,etc/config,etc/init.d,etc/rc.d,proc,sys,dev,tmp,root,www}
	ln -s tmp "$root/var"
	cp -a "$stage/usr/." "$root/usr/"
	rm -rf "$root/usr/include"
	# Where OpenWrt has them.
	local b
	for b in procd ubusd logd logread validate_data rpcd; do
		[ -e "$root/usr/sbin/$b" ] && ln -sf "../usr/sbin/$b" "$root/sbin/$b"
	done
	ln -sf ../usr/bin/uci "$root/sbin/uci"
	ln -sf ../usr/bin/ubus "$root/bin/ubus"
	[ -e "$root/usr/bin/uhttpd" ] && ln -sf ../bin/uhttpd "$root/usr/sbin/uhttpd"
	# busybox for everything else, but never over a real binary.
	cp "$(command -v busybox)" "$root/bin/busybox"
	local a
	for a in $(busybox --list-full); do
		case "$a" in */init | */logread | */syslogd | */klogd | linuxrc) continue ;; esac
		[ -e "$root/$a" ] || [ -L "$root/$a" ] || ln -s /bin/busybox "$root/$a"
	done
	# flock (util-linux): procd.sh and the hotplug script lock with it; this busybox has none.
	cp "$(command -v flock)" "$root/usr/bin/flock"
	# Shared libraries of every binary, at the host's paths.
	local f lib
	for f in "$root"/usr/sbin/* "$root"/usr/bin/* "$root"/usr/lib/*.so* "$root"/usr/lib/rpcd/*.so; do
		[ -f "$f" ] || continue
		LD_LIBRARY_PATH="$stage/usr/lib" ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}'
	done | sort -u | while read -r lib; do
		case "$lib" in "$stage"/*) continue ;; esac
		[ -e "$root$lib" ] || install -D "$lib" "$root$lib"
	done
	echo /usr/lib >"$root/etc/ld.so.conf"
	ldconfig -r "$root" 2>/dev/null

	# OpenWrt's shell side, from the checkout.
	ow package/base-files/files/etc/rc.common /etc/rc.common 0755
	ow package/base-files/files/lib/functions.sh /lib/functions.sh
	ow package/base-files/files/lib/functions/service.sh /lib/functions/service.sh
	ow package/base-files/files/sbin/hotplug-call /sbin/hotplug-call 0755
	# base-files' Makefile puts the target's PATH in place of %PATH%.
	sed -i 's,%PATH%,/usr/sbin:/usr/bin:/sbin:/bin,g' "$root/sbin/hotplug-call"
	ow package/system/procd/files/procd.sh /lib/functions/procd.sh
	ow package/system/procd/files/hotplug.json /etc/hotplug.json
	ow package/system/procd/files/reload_config /sbin/reload_config 0755
	if [ -f "$OPENWRT_SRC/package/system/uci/files/lib/config/uci.sh" ]; then
		ow package/system/uci/files/lib/config/uci.sh /lib/config/uci.sh
	else
		ow package/base-files/files/lib/config/uci.sh /lib/config/uci.sh
	fi
	ow package/system/ubox/files/log.init /etc/init.d/log 0755
	ow package/system/rpcd/files/rpcd.init /etc/init.d/rpcd 0755
	ow package/system/rpcd/files/rpcd.config /etc/config/rpcd 0600
	ow package/network/config/netifd/files/etc/init.d/packet_steering /etc/init.d/packet_steering 0755
	# jshn from libubox (built above): /usr/share/libubox/jshn.sh is installed.

	# What this check provides itself (not OpenWrt's files):
	# - procd runs rcS itself for the sysinit line.
	printf '::sysinit:/etc/init.d/rcS S boot\n::shutdown:/etc/init.d/rcS K shutdown\n' >"$root/etc/inittab"
	printf 'root:x:0:0:root:/root:/bin/ash\n' >"$root/etc/passwd"
	printf 'root:x:0:\n' >"$root/etc/group"
	printf 'root:%s:0:0:99999:7:::\n' "$(openssl passwd -1 -salt pscheck admin)" >"$root/etc/shadow"
	chmod 600 "$root/etc/shadow"
	printf "DISTRIB_ID='OpenWrt'\nDISTRIB_RELEASE='SNAPSHOT'\nDISTRIB_TARGET='x86/64'\n" >"$root/etc/openwrt_release"
	printf "config system\n\toption hostname 'OpenWrt'\n\toption log_size '256'\n" >"$root/etc/config/system"
	printf "config globals 'globals'\n\toption packet_steering '1'\n\toption steering_flows '0'\n\nconfig interface 'loopback'\n\toption device 'lo'\n\toption proto 'static'\n" >"$root/etc/config/network"
	printf "config defaults\n\toption flow_offloading '0'\n" >"$root/etc/config/firewall"
	# - udevtrigger would replay the uevents of every device of the host;
	#   instead this stand-in makes the character devices that coldplug
	#   would have made through hotplug.json (not /dev/kmsg or /dev/console:
	#   they would reach the host's kernel log and console).
	cat >"$root/sbin/udevtrigger" <<'EOF'
#!/bin/sh
for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0 ptmx:5:2; do
	name="${n%%:*}" mm="${n#*:}"
	[ -e "/dev/$name" ] || mknod -m 0666 "/dev/$name" c "${mm%:*}" "${mm#*:}"
done
exit 0
EOF
	chmod 755 "$root/sbin/udevtrigger"
	# - netifd is not run; its packet_steering service (above, the real one)
	#   runs this stand-in of packet-steering.uc (ucode with its uci/fs
	#   modules is not built here): it logs and, as a stock script with its
	#   own opinion would, rewrites one knob: psp0 tx-1 XPS to 0.
	mkdir -p "$root/usr/libexec/network"
	cat >"$root/usr/libexec/network/packet-steering.uc" <<'EOF'
#!/bin/sh
logger -t stock-steering -p daemon.notice "packet-steering.uc stand-in ran: $*"
[ -w /sys/class/net/psp0/queues/tx-1/xps_cpus ] && echo 0 >/sys/class/net/psp0/queues/tx-1/xps_cpus
exit 0
EOF
	chmod 755 "$root/usr/libexec/network/packet-steering.uc"
	# Enabled at "factory": log and rpcd (S12) and netifd's packet_steering (S25).
	ln -s ../init.d/log "$root/etc/rc.d/S12log"
	ln -s ../init.d/rpcd "$root/etc/rc.d/S12rpcd"
	ln -s ../init.d/packet_steering "$root/etc/rc.d/S25packet_steering"
	mkdir -p "$root/usr/lib/opkg/info" "$root/lib/apk/packages" "$root/etc/uci-defaults"
}

# --- 3. the namespace ---------------------------------------------------------

boot() {
	local up
	up="$(mktemp)"
	# PID 1 of the new PID namespace is this sh, which execs chroot, which
	# execs procd: procd runs as PID 1 with the root directory as /.
	unshare --pid --fork --mount --net --uts --ipc --propagation private -- /bin/sh -c '
		r="$1"
		mount -t proc proc "$r/proc" || exit 1
		for d in irq sys; do mount --bind "$r/proc/$d" "$r/proc/$d" && mount -o remount,bind,ro "$r/proc/$d" || exit 1; done
		mount -t sysfs sysfs "$r/sys" || exit 1
		mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$r/tmp" || exit 1
		mkdir -p "$r/tmp/run" "$r/tmp/lock" "$r/tmp/state" "$r/tmp/.uci" "$r/tmp/log"
		hostname OpenWrt
		ip link set lo up
		echo ready >"$2"
		exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$r" /sbin/procd -S ${PROCD_DEBUG:+-d $PROCD_DEBUG}
	' sh "$root" "$up" >"$WORK/procd-console.txt" 2>&1 &
	local upid=$!
	local i=0
	nspid=
	while [ $i -lt 100 ]; do
		nspid="$(cat /proc/$upid/task/*/children 2>/dev/null | awk '{print $1; exit}')"
		[ -n "$nspid" ] && [ -s "$up" ] && break
		sleep 0.1
		i=$((i + 1))
	done
	rm -f "$up"
	[ -n "$nspid" ] || die "the namespace did not start (see $WORK/procd-console.txt)"
	say "namespace PID 1 is host pid $nspid"
}

shutdown_ns() {
	[ -n "$nspid" ] || return 0
	kill -KILL "$nspid" 2>/dev/null
	local i=0
	while [ -e "/proc/$nspid" ] && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	nspid=
}
trap 'shutdown_ns' EXIT INT TERM

# ns CMD...: run CMD inside the namespaces, with the root directory as /.
ns() {
	nsenter -t "$nspid" -m -u -i -n -p -r -w -- /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"
}
nsh() { ns /bin/sh -c "$1"; }
# netns CMD...: a host tool in the namespace's network only (ip, curl).
netns() { nsenter -t "$nspid" -n -- "$@"; }

wait_until() { # wait_until SECONDS CMD...
	local n=$(($1 * 10))
	shift
	while [ $n -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

# holds EXPR: the bash expression EXPR, evaluated anew on each call (for
# wait_until, whose arguments are expanded once).
holds() { eval "$1"; }
uci_is() { test "$(ns uci -q get "$1")" = "$2"; }
log_more() { test "$(log_count "$1")" -gt "$2"; } # log_more PATTERN N: more than N lines match
pid_changed() { local p; p="$(daemon_pid)"; test -n "$p" -a "$p" != "$1"; }
logs() { ns /sbin/logread 2>/dev/null; }
log_has() { logs | grep -Eq -- "$1"; }
# log_count PATTERN: matching lines of the log.
log_count() { logs | grep -Ec -- "$1"; }

svc_json() { ns ubus call service list "{\"name\":\"$1\"}" 2>/dev/null; }
svc_running() { svc_json "$1" | jq -e --arg n "$1" '.[$n].instances | to_entries | any(.value.running)' >/dev/null; }
svc_registered() { svc_json "$1" | jq -e --arg n "$1" 'has($n)' >/dev/null; }
svc_absent() { ! svc_registered "$1"; }
daemon_pid() { svc_json packet-steering | jq -r '.["packet-steering"].instances.instance1.pid // empty'; }
knob() { nsh "cat /sys/class/net/$1"; }
is_enabled() { [ -L "$root/etc/rc.d/S$1" ]; }
not_enabled() { ! is_enabled "$1"; }
object_up() { ns ubus list packet_steering >/dev/null 2>&1; }
object_gone() { ! object_up; }

# veth NAME PEER: a veth pair with 4 rx and 4 tx queues each, up, threaded NAPI.
veth() {
	netns ip link add "$1" numtxqueues 4 numrxqueues 4 type veth peer name "$2" numtxqueues 4 numrxqueues 4 &&
		netns ip link set "$1" up && netns ip link set "$2" up || return 1
	nsh "echo 1 >/sys/class/net/$1/threaded; echo 1 >/sys/class/net/$2/threaded" 2>/dev/null || true
}

boot_checks() { # boot_checks TAG
	check "$1 procd registered ubus' service object" wait_until 20 ns ubus list service
	check "$1 logd serves the log" wait_until 20 ns /sbin/logread
	check "$1 rpcd's rc object is up" wait_until 20 ns ubus list rc
}

# --- 4. the package -------------------------------------------------------------

mkfile="$repo/openwrt/packet-steering/Makefile"
# pkg_files: "MODE SRC DEST-DIR" for each file Package/packet-steering/install copies.
pkg_files() {
	sed -n '/^define Package\/packet-steering\/install/,/^endef/p' "$mkfile" |
		sed -n 's/.*\$(INSTALL_\(BIN\|DATA\|CONF\)) \$(PS_SOURCE_DIR)\/\([^ ]*\) \$(1)\(\/[^ ]*\)$/\1 \2 \3/p'
}
# pkg_script NAME: the body of define Package/packet-steering/NAME, as make writes it.
pkg_script() {
	sed -n "/^define Package\/packet-steering\/$1\$/,/^endef/p" "$mkfile" | sed '1d;$d' | sed 's/\$\$/$/g'
}

# install_files PM: copy the package's files as PM (opkg or apk) would and
# write its database entry and control scripts the way package-pack.mk makes them.
install_files() {
	local pm="$1" list mode s d m
	list="$(mktemp)"
	install -D -m 0755 "$WORK/packet-steering" "$root/usr/sbin/packet-steering"
	echo /usr/sbin/packet-steering >>"$list"
	pkg_files | while read -r mode s d; do
		case "$mode" in BIN) m=0755 ;; CONF) m=0600 ;; *) m=0644 ;; esac
		# conffiles are kept when present (an upgrade keeps the user's config)
		if [ "$mode" = CONF ] && [ -e "$root$d/$(basename "$s")" ]; then :; else
			install -D -m "$m" "$repo/$s" "$root$d/$(basename "$s")"
		fi
		echo "${d%/}/$(basename "$s")" >>"$list"
	done
	mkdir -p "$root/usr/libexec/rpcd"
	ln -sf /usr/sbin/packet-steering "$root/usr/libexec/rpcd/packet_steering"
	echo /usr/libexec/rpcd/packet_steering >>"$list"
	local hdr='[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0
. ${IPKG_INSTROOT}/lib/functions.sh'
	case "$pm" in
	opkg)
		local info="$root/usr/lib/opkg/info/packet-steering"
		sort -u "$list" >"$info.list"
		printf '#!/bin/sh\n[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0\n%s\ndefault_postinst $0 $@\n' "$hdr" >"$info.postinst"
		printf '#!/bin/sh\n%s\ndefault_prerm $0 $@\n' "$hdr" >"$info.prerm"
		pkg_script postinst >"$info.postinst-pkg"
		pkg_script prerm >"$info.prerm-pkg"
		chmod 0755 "$info".postinst* "$info".prerm*
		;;
	apk)
		local info="$root/lib/apk/packages/packet-steering"
		sort -u "$list" >"$info.list"
		local sc="$root/lib/apk/scripts"
		mkdir -p "$sc"
		{
			printf '#!/bin/sh\n[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0\n%s\n' "$hdr"
			printf 'export root="${IPKG_INSTROOT}"\nexport pkgname="packet-steering"\nadd_group_and_user\ndefault_postinst\n'
			pkg_script postinst | sed '/^\s*#!/d'
		} >"$sc/post-install"
		{ printf '#!/bin/sh\nexport PKG_UPGRADE=1\n'; sed '/^\s*#!/d' "$sc/post-install"; } >"$sc/post-upgrade"
		{
			printf '#!/bin/sh\n%s\n' "$hdr"
			printf 'export root="${IPKG_INSTROOT}"\nexport pkgname="packet-steering"\ndefault_prerm\n'
			pkg_script prerm | sed '/^\s*#!/d'
		} >"$sc/pre-deinstall"
		chmod 0755 "$sc"/*
		;;
	esac
	rm -f "$list"
}

# remove_files PM: delete the package's files (conffiles stay, as both do).
remove_files() {
	local list
	case "$1" in opkg) list="$root/usr/lib/opkg/info/packet-steering.list" ;; apk) list="$root/lib/apk/packages/packet-steering.list" ;; esac
	while read -r f; do
		[ "$f" = /etc/config/packet_steering ] && continue
		rm -f "$root$f"
	done <"$list"
	rm -f "$root"/usr/lib/opkg/info/packet-steering.* "$root"/lib/apk/packages/packet-steering.* "$root"/lib/apk/scripts/*
}

# --- 5. the checks ----------------------------------------------------------------

mkdir -p "$WORK"
make_root
boot
boot_checks "[boot 1, stock]"
veth psp0 psp1 || nok "veth psp0/psp1 with 4 queues" "ip link add failed"
netns ip addr add 198.18.12.1/30 dev psp0
netns ip addr add 198.18.12.2/30 dev psp1
check "[boot 1, stock] netifd's packet_steering service runs" wait_until 10 svc_registered packet_steering
check "[boot 1, stock] its packet-steering.uc ran at boot" wait_until 10 log_has 'stock-steering: packet-steering.uc stand-in ran'
ncpu="$(nproc)"
allmask="$(printf '%x' $(((1 << ncpu) - 1)))"

# The devices the package is to manage (veths are skipped by the stock
# rule unless named in a `config device` section).
cat >>"$root/etc/config/packet_steering" <<'EOF'
config globals 'globals'
	option mode 'auto'
	option flows '0'
	option daemon 'auto'

config device
	option name 'psp0'

config device
	option name 'psp1'

config device
	option name 'psp2'
EOF
ns reload_config # note the configs as they are now

# opkg install.
install_files opkg
t0=$(date +%s%N)
out="$(ns /usr/lib/opkg/info/packet-steering.postinst configure 2>&1)"
check "[opkg install] postinst exits 0" test $? = 0
[ -n "$out" ] && say "postinst said: $out"
check "[opkg install] procd runs the packet-steering instance" wait_until 10 svc_running packet-steering
check "[opkg install] the daemon registered packet_steering" wait_until 10 object_up
t1=$(date +%s%N)
say "install to object registered: $(((t1 - t0) / 1000000)) ms"
check "[opkg install] stock service disabled (no S25packet_steering)" not_enabled 25packet_steering
check "[opkg install] stock service stopped (gone from procd)" wait_until 10 svc_absent packet_steering
check "[opkg install] packet-steering enabled (S25packet-steering)" is_enabled 25packet-steering
check "[opkg install] takeover noted the stock service as enabled" grep -qx 'packet_steering enabled' "$root/etc/packet-steering/takeover"
status="$(ns ubus call packet_steering status 2>&1)"
check "[opkg install] ubus call packet_steering status answers JSON" jq -e 'type == "object"' <<<"$status"
echo "$status" >"$WORK/status-opkg.json"
check "[opkg install] status: served by the daemon" jq -e '.service.served_by == "daemon"' <<<"$status"
# auto on a 4-queue device and this machine's CPUs: the rss-per-cpu rule,
# RPS off and XPS tx-i from CPU i mod n; psp0 tx-1's XPS is the knob
# watched below (the kernel's default is 0).
xps="$(knob psp0/queues/tx-1/xps_cpus)"
check "[opkg install] psp0 tx-1 XPS set by the start apply ($xps, not 0)" test "$((16#${xps//,/}))" -ne 0
check "[opkg install] logread: start apply at info" log_has 'daemon\.info packet-steering\[[0-9]+\]: applied reason=start'
check "[opkg install] logread: takeover at notice" log_has 'daemon\.notice packet-steering: took steering over from netifd'
check "[opkg install] logread: no daemon record at err priority" test "$(log_count 'daemon\.err packet-steering')" = 0
check "[opkg install] logread: no slog-style lines" test "$(log_count 'packet-steering.*level=')" = 0
check "[opkg install] logread -e packet-steering filters" test "$(ns /sbin/logread -e packet-steering | grep -vc packet-steering)" = 0
xps_is() { test "$((16#$(knob "$1/queues/tx-1/xps_cpus" | tr -d ,)))" = "$((16#${2//,/}))"; }
perturb() { nsh "echo 0 >/sys/class/net/$1/queues/tx-1/xps_cpus"; }

# PROCD_CHECK_HOLD=install stops here, with the package installed, for a
# look around: nsenter -t PID -m -u -i -n -p -r -w /bin/sh (boot2: after the
# second boot's checks)
if [ "${PROCD_CHECK_HOLD:-}" = install ]; then
	say "holding: nsenter -t $nspid -m -u -i -n -p -r -w /bin/sh (Ctrl-C ends)"
	while sleep 3600; do :; done
fi

# reload and SIGHUP
perturb psp0
check "[reload] /etc/init.d/packet-steering reload exits 0" ns /etc/init.d/packet-steering reload
check "[reload] restores psp0 tx-1 XPS" wait_until 5 xps_is psp0 "$xps"
check "[reload] logread: applied reason=reload at info" log_has 'daemon\.info packet-steering\[[0-9]+\]: applied reason=reload'
pid="$(daemon_pid)"
perturb psp0
ns kill -HUP "$pid"
check "[SIGHUP] restores psp0 tx-1 XPS" wait_until 5 xps_is psp0 "$xps"
check "[SIGHUP] logread: applied reason=sighup" wait_until 3 log_has 'applied reason=sighup'
check "[SIGHUP] same daemon process" test "$(daemon_pid)" = "$pid"

# procd triggers: config changes (reload_config sends config.change as LuCI's apply does).
rps_is() { test "$((16#$(knob "$1/queues/rx-0/rps_cpus" | tr -d ,)))" = "$((16#$2))"; }
ns uci set packet_steering.globals.mode=all && ns uci commit packet_steering && ns reload_config
check "[trigger packet_steering] mode all applied (psp0 rx-0 RPS on all CPUs)" wait_until 10 rps_is psp0 "$allmask"
ns uci set packet_steering.globals.mode=auto && ns uci commit packet_steering && ns reload_config
check "[trigger packet_steering] back to auto (RPS off)" wait_until 10 rps_is psp0 0
ns uci set network.globals.packet_steering=2 && ns uci commit network && ns reload_config
check "[trigger network] network page's 'all CPUs' becomes mode all (RPS on all CPUs)" wait_until 10 rps_is psp0 "$allmask"
ns uci set network.globals.packet_steering=0 && ns uci commit network && ns reload_config
check "[trigger network] 'disabled' becomes mode off" wait_until 10 uci_is packet_steering.globals.mode off
check "[trigger network] mode off applied (RPS 0)" wait_until 10 rps_is psp0 0
check "[trigger network] logread: applied mode=off" wait_until 5 log_has 'daemon\.info packet-steering\[[0-9]+\]: applied reason=reload mode=off'
ns uci set network.globals.packet_steering=1 && ns uci commit network && ns reload_config
check "[trigger network] 'enabled' becomes auto again" wait_until 10 uci_is packet_steering.globals.mode auto
wait_until 10 xps_is psp0 "$xps"
n="$(log_count 'applied reason=reload')"
perturb psp0
ns ubus call service event '{"type":"interface.update","data":{"interface":"lan"}}'
check "[trigger interface.*] an interface event reloads (psp0 tx-1 XPS restored)" wait_until 10 xps_is psp0 "$xps"
check "[trigger interface.*] logread: applied reason=reload" wait_until 5 log_more 'applied reason=reload' "$n"
n="$(log_count 'packet-steering\[[0-9]+\]: applied')"
ns ubus call service event '{"type":"interface.update","data":{"interface":"lan"}}'
sleep 3
check "[trigger interface.*] an event with nothing to do logs nothing" test "$(log_count 'packet-steering\[[0-9]+\]: applied')" = "$n"
# rpcd's uci object (what LuCI uses): commit sends config.change itself.
ns ubus call uci set '{"config":"packet_steering","section":"globals","values":{"flows":"64"}}' >/dev/null
ns ubus call uci commit '{"config":"packet_steering"}' >/dev/null
check "[trigger via rpcd uci commit] flows 64 applied" wait_until 10 holds '[ "$(knob psp0/queues/rx-0/rps_flow_cnt)" = 64 ]'
ns uci set packet_steering.globals.flows=0 && ns uci commit packet_steering && ns reload_config
wait_until 10 holds '[ "$(knob psp0/queues/rx-0/rps_flow_cnt)" = 0 ]'

# hotplug: a new netdev (the kernel's uevent through procd's hotplug.json and hotplug-call)
veth psp2 psp3
check "[hotplug] a new veth psp2 gets its XPS through procd's hotplug" wait_until 10 xps_is psp2 "$xps"
check "[hotplug] logread: applied reason=hotplug" wait_until 5 log_has 'applied reason=hotplug'
perturb psp0
nsh 'ACTION=add DEVPATH=/devices/virtual/net/psp0 SUBSYSTEM=net INTERFACE=psp0 /sbin/hotplug-call net'
check "[hotplug-call net ACTION=add] applies psp0" wait_until 5 xps_is psp0 "$xps"

# a failing write: logged at err
mount_ro_file() { # a read-only file over one knob, inside the namespace
	# (util-linux mount in the namespace's mounts; busybox's cannot remount a file)
	local k="$root/sys/class/net/psp1/queues/tx-1/xps_cpus"
	nsh "echo 0 >/tmp/ro-knob"
	nsenter -t "$nspid" -m -- sh -c 'mount --bind "$1" "$2" && mount -o remount,bind,ro "$2"' sh "$root/tmp/ro-knob" "$k"
}
if mount_ro_file; then
	ns ubus call packet_steering apply '{"reason":"check-failure"}' >/dev/null 2>&1
	check "[failure] logread: the failed write at err" wait_until 5 log_has 'daemon\.err packet-steering\[[0-9]+\]: write failed'
	check "[failure] logread: the apply with failed=1 at err" log_has 'daemon\.err packet-steering\[[0-9]+\]: applied reason=check-failure .*failed=1'
	nsenter -t "$nspid" -m -- umount "$root/sys/class/net/psp1/queues/tx-1/xps_cpus"
else
	nok "[failure] could not make a knob read-only"
fi

# the stock service started again (as netifd's upgrade does): the daemon takes over
n_uc="$(log_count 'stock-steering: packet-steering.uc stand-in ran')"
ns /etc/init.d/packet_steering start
check "[stock start] the stock script ran (netifd upgrade)" wait_until 5 log_more 'stock-steering: packet-steering.uc stand-in ran' "$n_uc"
check "[stock start] the daemon noticed (service event)" wait_until 10 log_has "daemon\.notice packet-steering\[[0-9]+\]: netifd's packet_steering service started; taking over again"
check "[stock start] stock service stopped again" wait_until 10 svc_absent packet_steering
check "[stock start] stock service still disabled" not_enabled 25packet_steering
check "[stock start] psp0 tx-1 XPS ours again" wait_until 10 xps_is psp0 "$xps"

# ubusd restarted (procd respawns it): the daemon registers again and still
# watches procd's services; rpcd stays off ubus (it does not register its
# objects again), so the takeover goes through procd itself.
ubusd_pid="$(svc_json ubus | jq -r '.ubus.instances.instance1.pid')"
ns kill -KILL "$ubusd_pid"
sleep 1
check "[ubusd restart] the daemon registered again" wait_until 15 object_up
n_to="$(log_count 'taking over again')"
ns /etc/init.d/packet_steering start
check "[ubusd restart] the daemon noticed the stock service" wait_until 10 log_more 'taking over again' "$n_to"
check "[ubusd restart] stock service stopped (through procd: rpcd is off ubus)" wait_until 10 svc_absent packet_steering
check "[ubusd restart] logread: the fallback at warning" log_has "daemon\.warn packet-steering\[[0-9]+\]: takeover through rpcd failed; stopping the stock service through procd"
check "[ubusd restart] psp0 tx-1 XPS ours again" wait_until 10 xps_is psp0 "$xps"
ns /etc/init.d/rpcd restart >/dev/null 2>&1
wait_until 10 ns ubus list rc

# stop within procd's term_timeout
pid="$(daemon_pid)"
t0=$(date +%s%N)
ns /etc/init.d/packet-steering stop
daemon_gone() { ! ns test -e "/proc/$1"; }
wait_until 10 daemon_gone "$pid"
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
check "[stop] daemon gone in ${ms} ms (procd kills after 5000)" test "$ms" -lt 5000
check "[stop] logread: stopping" log_has 'daemon\.info packet-steering\[[0-9]+\]: stopping'
check "[stop] object gone" object_gone
ns /etc/init.d/packet-steering start
check "[start] daemon back" wait_until 10 object_up

# killed (OOM killer): procd respawns the daemon, which registers again
pid="$(daemon_pid)"
ns kill -KILL "$pid"
check "[respawn] procd respawned the killed daemon" wait_until 15 pid_changed "$pid"
check "[respawn] object registered again" wait_until 10 object_up

# LuCI: rpcd sessions and uhttpd's ubus handler, read-only and admin users
if [ -x "$root/usr/bin/uhttpd" ]; then
	install -D -m 0644 "$repo/luci-app-packet-steering/root/usr/share/rpcd/acl.d/luci-app-packet-steering.json" \
		"$root/usr/share/rpcd/acl.d/luci-app-packet-steering.json"
	cat >>"$root/etc/config/rpcd" <<EOF
config login
	option username 'viewer'
	option password '$(openssl passwd -1 -salt pscheck viewer)'
	list read '*'

config login
	option username 'admin'
	option password '$(openssl passwd -1 -salt pscheck admin)'
	list read '*'
	list write '*'
EOF
	ns /etc/init.d/rpcd restart
	wait_until 10 ns ubus list session
	nsh 'uhttpd -f -p 127.0.0.1:8080 -h /www -u /ubus >/tmp/uhttpd.log 2>&1 &'
	wait_until 10 netns curl -s -o /dev/null http://127.0.0.1:8080/ubus
	rpc() { # rpc SESSION OBJECT METHOD ARGS
		netns curl -s http://127.0.0.1:8080/ubus -H 'Content-Type: application/json' \
			-d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"call\",\"params\":[\"$1\",\"$2\",\"$3\",$4]}"
	}
	login() { rpc 00000000000000000000000000000000 session login "{\"username\":\"$1\",\"password\":\"$2\"}" | jq -r '.result[1].ubus_rpc_session // empty'; }
	anon="$(rpc 00000000000000000000000000000000 packet_steering status '{}')"
	check "[luci] anonymous status: Access denied (-32002)" jq -e '.error.code == -32002' <<<"$anon"
	vs="$(login viewer viewer)"
	check "[luci] viewer logs in" test -n "$vs"
	r="$(rpc "$vs" packet_steering status '{}')"
	check "[luci] viewer: status answers" jq -e '.result[0] == 0 and (.result[1].mode | type == "string")' <<<"$r"
	r="$(rpc "$vs" packet_steering get_queues '{}')"
	check "[luci] viewer: get_queues answers" jq -e '.result[0] == 0' <<<"$r"
	for m in set_mode apply; do
		r="$(rpc "$vs" packet_steering "$m" '{"mode":"off"}')"
		check "[luci] viewer: $m denied (-32002)" jq -e '.error.code == -32002' <<<"$r"
	done
	r="$(rpc "$vs" session access "{\"scope\":\"ubus\",\"object\":\"packet_steering\",\"function\":\"set_mode\"}")"
	check "[luci] viewer: session access says no write" jq -e '.result[1].access == false' <<<"$r"
	as="$(login admin admin)"
	r="$(rpc "$as" packet_steering apply '{"dry_run":true}')"
	check "[luci] admin: apply (dry run) allowed" jq -e '.result[0] == 0' <<<"$r"
	check "[luci] mode unchanged by the viewer" test "$(ns uci -q get packet_steering.globals.mode)" = auto
else
	nok "[luci] uhttpd not built (no openwrt+uhttpd mirror)"
fi

# rpcd's exec plugin serves the object instead of the daemon (daemon '0'),
# and back: the owner switch of the init script under the real rpcd.
served_by() { test "$(ns ubus call packet_steering status 2>/dev/null | jq -r .service.served_by)" = "$1"; }
ns uci set packet_steering.globals.daemon=0 && ns uci commit packet_steering && ns reload_config
check "[plugin] daemon '0': rpcd's plugin serves the object" wait_until 20 served_by rpcd
check "[plugin] no daemon instance left" wait_until 10 holds '! svc_running packet-steering'
perturb psp0
n="$(log_count 'applied reason=reload')"
ns /etc/init.d/packet-steering reload
check "[plugin] reload applies once (psp0 tx-1 XPS restored)" wait_until 5 xps_is psp0 "$xps"
check "[plugin] logread: the one-shot's apply at info" wait_until 5 log_more 'daemon\.info packet-steering\[[0-9]+\]: applied reason=reload' "$n"
perturb psp0
r="$(ns ubus call packet_steering apply '{"reason":"plugin-call"}' 2>&1)"
check "[plugin] ubus call apply through rpcd restores psp0" wait_until 5 xps_is psp0 "$xps"
check "[plugin] logread: the plugin's apply at info" wait_until 5 log_has 'daemon\.info packet-steering\[[0-9]+\]: applied reason=plugin-call'
ns uci set packet_steering.globals.daemon=auto && ns uci commit packet_steering && ns reload_config
check "[plugin] daemon 'auto' (2 CPUs): the daemon serves again" wait_until 20 served_by daemon
check "[plugin] the daemon instance runs" svc_running packet-steering

# upgrade, opkg: a new binary, then the postinst with PKG_UPGRADE=1
pid="$(daemon_pid)"
printf 'upgrade' >>"$WORK/packet-steering" # a different file, same program
install_files opkg
ns env PKG_UPGRADE=1 /usr/lib/opkg/info/packet-steering.postinst configure >/dev/null 2>&1
check "[opkg upgrade] daemon restarted on the new binary" wait_until 10 pid_changed "$pid"
check "[opkg upgrade] the running binary is the installed one" test "$(ns readlink "/proc/$(daemon_pid)/exe")" = /usr/sbin/packet-steering
check "[opkg upgrade] object up" wait_until 10 object_up
check "[opkg upgrade] stock service still off" not_enabled 25packet_steering

# removal, opkg: prerm (default_prerm then ours), files removed
xps_before="$(knob psp0/queues/tx-1/xps_cpus)"
n_uc="$(log_count 'stock-steering: packet-steering.uc stand-in ran')"
ns /usr/lib/opkg/info/packet-steering.prerm remove >/dev/null 2>&1
check "[opkg remove] prerm exits 0" test $? = 0
remove_files opkg
check "[opkg remove] packet-steering gone from procd" wait_until 10 svc_absent packet-steering
check "[opkg remove] object gone" wait_until 10 object_gone
check "[opkg remove] stock service enabled again" is_enabled 25packet_steering
check "[opkg remove] stock service running again" wait_until 10 svc_registered packet_steering
check "[opkg remove] stock script ran" wait_until 10 log_more 'stock-steering: packet-steering.uc stand-in ran' "$n_uc"
check "[opkg remove] XPS back to the kernel's 0 (was $xps_before)" wait_until 5 xps_is psp0 0
check "[opkg remove] logread: handed back" log_has 'handed steering back to netifd'
check "[opkg remove] takeover note removed" test ! -e "$root/etc/packet-steering/takeover"

# apk: install, reboot with the package installed, upgrade, removal
install_files apk
ns /lib/apk/scripts/post-install >/dev/null 2>&1
check "[apk install] post-install exits 0" test $? = 0
check "[apk install] daemon runs" wait_until 10 object_up
check "[apk install] stock service disabled and stopped" wait_until 10 svc_absent packet_steering
ns /sbin/logread >"$WORK/logread-boot1.txt"

shutdown_ns
boot
boot_checks "[boot 2, installed]"
veth psp0 psp1
check "[boot 2] the daemon started at boot" wait_until 20 object_up
check "[boot 2] stock service not started" svc_absent packet_steering
check "[boot 2] logread: the daemon serves" wait_until 10 log_has 'daemon\.info packet-steering\[[0-9]+\]: serving object=packet_steering'
check "[boot 2] psp0 (created after boot) steered through hotplug" wait_until 10 xps_is psp0 "$xps"
# (the daemon's start apply or hotplug, whichever came first after the devices)
check "[boot 2] logread: applied reason=start or hotplug" wait_until 5 log_has 'daemon\.info packet-steering\[[0-9]+\]: applied reason=(start|hotplug) .*changed=[1-9]'
if [ "${PROCD_CHECK_HOLD:-}" = boot2 ]; then
	say "holding: nsenter -t $nspid -m -u -i -n -p -r -w /bin/sh (Ctrl-C ends)"
	while sleep 3600; do :; done
fi
pid="$(daemon_pid)"
printf 'x' >>"$WORK/packet-steering"
install_files apk
ns /lib/apk/scripts/post-upgrade >/dev/null 2>&1
check "[apk upgrade] daemon restarted on the new binary" wait_until 10 pid_changed "$pid"
check "[apk upgrade] stock service still off" not_enabled 25packet_steering
ns /lib/apk/scripts/pre-deinstall >/dev/null 2>&1
check "[apk del] pre-deinstall exits 0" test $? = 0
remove_files apk
check "[apk del] packet-steering gone" wait_until 10 svc_absent packet-steering
check "[apk del] stock service enabled and running" wait_until 10 svc_registered packet_steering
check "[apk del] stock service enabled" is_enabled 25packet_steering
ns /sbin/logread >"$WORK/logread-boot2.txt"
shutdown_ns

echo
echo "stock sources: $(tr '\n' ' ' <"$stage/.commits")"
echo "logs: $WORK/logread-boot1.txt $WORK/logread-boot2.txt"
echo "procd-check: $pass passed, $fail failed"
[ "$fail" = 0 ]
