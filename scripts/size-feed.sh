#!/bin/sh
# Part of make size: the router binary as OpenWrt's packages feed builds
# it, measured against the static build make size checks.
#
# What the feed does (openwrt/packages lang/golang/golang-package.mk and
# golang-values.mk): CGO_ENABLED=1 with CC the target's gcc (musl libc),
# -ldflags "-linkmode external -extldflags '<TARGET_LDFLAGS>'", so the
# binary is linked by gcc and dynamically against musl; -trimpath; the
# package's GO_PKG_LDFLAGS (-s -w here) and GO_PKG_GCFLAGS (all=-l on
# mips/mipsle, see openwrt/packet-steering/Makefile); and -buildmode pie
# only when the build config makes the package PIE (CONFIG_PKG_ASLR_PIE_ALL,
# or CONFIG_PKG_ASLR_PIE_REGULAR with PKG_ASLR_PIE_REGULAR:=1, which this
# package does not set: include/hardening.mk of openwrt/openwrt) and Go
# supports PIE on the target (GO_PIE_SUPPORTED_OS_ARCH: amd64, arm, arm64,
# not mips/mipsle). TARGET_LDFLAGS carries -znow -zrelro by default
# (full RELRO, hardening.mk). Then OpenWrt strips the binary
# (strip --strip-all).
#
# Built here:
#   amd64   with Debian's musl-gcc (musl-tools): without PIE (the default
#           config) and with PIE (PKG_ASLR_PIE_ALL).
#   mipsle  softfloat, with Debian's cross gcc (gcc-mipsel-linux-gnu) and
#           Debian's musl for mipsel (musl and musl-dev, mipsel, fetched
#           with apt-get download into out/feed-cache, scripts/debcache.sh)
#           as the sysroot: a real musl, dynamic, cgo build. Differences
#           from OpenWrt's toolchain: Debian's musl is 1.2.3 and hard-float
#           (OpenWrt's mipsel musl is soft-float: the dynamic linker is
#           named /lib/ld-musl-mipsel-sf.so.1, set here too; only
#           runtime/cgo's few C functions are compiled by gcc, with
#           -msoft-float, and they pass no floating point), and gcc 12 of
#           Debian rather than OpenWrt's gcc; the Go code, which is
#           almost all of the file, is the same.
# Each line: size, xz size, and the difference from the static build
# out/packet-steering-<arch> (make size builds it first). Prints why a
# build is not measured when a tool or package is missing, which is a
# failure under PACKET_STEERING_REQUIRE_KERNEL=1 (CI), as for the
# environment skips of the Go tests; otherwise exits non-zero only when a
# build that could run failed.
# Usage: GO=go scripts/size-feed.sh PREFIX [amd64] [mipsle]
# (PREFIX-ARCH is the static build to compare with; default both.)
set -eu
GO=${GO:-go}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
# shellcheck source=scripts/debcache.sh
. "$here/scripts/debcache.sh"
prefix=${1:?usage: size-feed.sh PREFIX [ARCH...]}
shift
[ $# -gt 0 ] || set -- amd64 mipsle
want() {
	for w in "$@"; do [ "$w" = "$arch" ] && return 0; done
	return 1
}
pkg=./cmd/packet-steering
tags=${ROUTER_TAGS:-router}
extld='-Wl,-z,now -Wl,-z,relro'
rc=0

# unmeasured REASON: a build cannot run here.
unmeasured() {
	if [ "${PACKET_STEERING_REQUIRE_KERNEL:-}" = 1 ]; then
		echo "size: FAIL: $1 (PACKET_STEERING_REQUIRE_KERNEL=1)" >&2
		rc=1
	else
		echo "size: $1"
	fi
}

# report FILE STATIC WHAT
report() {
	n=$(stat -c %s "$1")
	s=$(stat -c %s "$2")
	printf '%-33s %8d bytes  xz %8d bytes  (%s; static: %d bytes, difference %+d)\n' \
		"$1" "$n" "$(xz -9e -c "$1" | wc -c)" "$3" "$s" $((n - s))
	# The budget is checked on the static builds (make size); the feed
	# build is held against it here for information only.
	if [ -n "${SIZE_LIMIT:-}" ] && [ "$n" -gt "$SIZE_LIMIT" ]; then
		echo "size: note: $1 is $((n - SIZE_LIMIT)) bytes over the $SIZE_LIMIT-byte budget (not enforced on the feed build)"
	fi
}

# --- amd64: musl-gcc -------------------------------------------------------
arch=amd64
if ! want "$@"; then
	:
elif command -v musl-gcc >/dev/null 2>&1; then
	for pie in no yes; do
		out=$prefix-amd64-feed
		mode=
		what="feed build: cgo, musl, dynamic, no pie (default config)"
		if [ $pie = yes ]; then
			out=$prefix-amd64-feed-pie
			mode="-buildmode=pie"
			what="feed build with PKG_ASLR_PIE_ALL: cgo, musl, dynamic, pie"
		fi
		# shellcheck disable=SC2086 # mode is empty or one word
		if CGO_ENABLED=1 CC=musl-gcc GOOS=linux GOARCH=amd64 "$GO" build -tags "$tags" -trimpath $mode \
			-ldflags "-s -w -buildid= -linkmode external -extldflags '$extld'" -o "$out" "$pkg"; then
			strip --strip-all "$out"
			report "$out" "$prefix-amd64" "$what"
		else
			echo "size: the amd64 feed build failed" >&2
			rc=1
		fi
	done
else
	unmeasured "musl-gcc missing (Debian musl-tools, scripts/deps.sh): amd64 feed build not measured"
fi

# --- mipsle: cross gcc, Debian's mipsel musl as the sysroot ------------------
# mipsel_sysroot: prints a sysroot directory (usr/include, usr/lib) made
# of Debian's musl and musl-dev for mipsel.
mipsel_sysroot() {
	cache=$here/out/feed-cache
	debcache_apt "$cache" "" || return 1
	rt=$(debcache_get "$cache" musl mipsel) || return 1
	dev=$(debcache_get "$cache" musl-dev mipsel) || return 1
	root=$cache/sysroot-mipsel-$(basename "$dev")
	if [ ! -d "$root" ]; then
		rm -rf "$root.tmp"
		mkdir -p "$root.tmp/usr/lib" "$root.tmp/usr/include"
		cp -a "$dev/usr/include/mipsel-linux-musl/." "$root.tmp/usr/include/"
		# musl-dev: headers, crt*.o, static archives; musl: libc.so (also
		# the dynamic linker), under /lib/mipsel-linux-musl.
		cp -a "$dev/usr/lib/mipsel-linux-musl/." "$rt/lib/mipsel-linux-musl/." "$root.tmp/usr/lib/"
		if [ ! -e "$root.tmp/usr/lib/libc.so" ] || [ ! -e "$root.tmp/usr/lib/crt1.o" ]; then
			echo "size: $dev: no libc.so or crt1.o for mipsel" >&2
			return 1
		fi
		# The loader name of OpenWrt's soft-float mipsel musl, for running
		# the binary under qemu-mipsel -L.
		mkdir -p "$root.tmp/lib"
		ln -sf ../usr/lib/libc.so "$root.tmp/lib/ld-musl-mipsel-sf.so.1"
		mv "$root.tmp" "$root"
	fi
	printf '%s\n' "$root"
}

cc=mipsel-linux-gnu-gcc
arch=mipsle
log=$(mktemp)
trap 'rm -f "$log"' EXIT INT TERM
if ! want "$@"; then
	:
elif ! command -v $cc >/dev/null 2>&1; then
	unmeasured "$cc missing (Debian gcc-mipsel-linux-gnu, scripts/deps.sh): mipsle feed build not measured"
elif ! sysroot=$(mipsel_sysroot); then
	unmeasured "Debian's musl for mipsel could not be fetched (apt-get download musl:mipsel musl-dev:mipsel; scripts/deps.sh adds the architecture): mipsle feed build not measured"
else
	out=$prefix-mipsle-feed
	# Debian's gcc links PIE unless told -no-pie (OpenWrt's gcc does not by
	# default, and Go has no PIE on mipsle); Go's own check of the flag
	# fails with this sysroot, so it is given here.
	# TARGET_CFLAGS of OpenWrt's ramips/mt7621 (mipsel_24kc, no FPU),
	# without the options Debian's gcc lacks (-fhonour-copts) or that
	# golang-values.mk removes (-mips32r2) or this package turns off
	# (-mips16, PKG_BUILD_FLAGS:=no-mips16).
	if CGO_ENABLED=1 GOOS=linux GOARCH=mipsle GOMIPS=softfloat \
		CC="$cc --sysroot=$sysroot" \
		CGO_CFLAGS="-Os -pipe -mno-branch-likely -mtune=24kc -fno-caller-saves -msoft-float" \
		"$GO" build -tags "$tags" -trimpath \
		-ldflags "-s -w -buildid= -linkmode external -extldflags '$extld -no-pie -Wl,--dynamic-linker=/lib/ld-musl-mipsel-sf.so.1'" \
		-o "$out" "$pkg" 2>"$log"; then
		# ld warns, for each object, that Debian's crt1.o is hard-float
		# and Go's objects soft-float (see above): said once.
		fp='uses -mhard-float (set by .*crt1.o).* uses -msoft-float'
		if grep -q "$fp" "$log"; then
			echo "size: ld warned that Debian's mipsel musl is hard-float and the Go objects soft-float (expected here: OpenWrt's musl for these targets is soft-float)"
		fi
		grep -v -e "$fp" -e '^# github.com/packet-steering/packet-steering/cmd/packet-steering$' "$log" >&2 || true
		mipsel-linux-gnu-strip --strip-all "$out"
		report "$out" "$prefix-mipsle" "feed build: cgo, musl (Debian's, mipsel), dynamic, no pie"
		# It is a real program: run it under qemu-mipsel with the sysroot.
		if command -v qemu-mipsel >/dev/null 2>&1; then
			v=$(qemu-mipsel -L "$sysroot" "$out" help 2>&1) || true
			case $v in
			"usage: packet-steering"*) echo "size: $out runs under qemu-mipsel -L $sysroot (help)" ;;
			*)
				echo "size: $out does not run under qemu-mipsel -L $sysroot: $v" >&2
				rc=1
				;;
			esac
		fi
	else
		cat "$log" >&2
		echo "size: the mipsle feed build failed" >&2
		rc=1
	fi
fi
exit $rc
