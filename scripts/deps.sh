#!/bin/sh
# Installs what the tests and the demo need on a Debian machine, and nothing
# that is already there. Usage: scripts/deps.sh [test|demo|staticcheck]
set -eu

# staticcheck (make vet): from the Go module proxy with go install, at a
# version that reads go 1.23 modules and builds with the installed Go
# (0.8.x supports Go 1.26), into $(go env GOPATH)/bin.
STATICCHECK_VERSION=v0.8.2
staticcheck() {
	bin="$(go env GOPATH)/bin/staticcheck"
	if "$bin" -version 2>/dev/null | grep -q "(${STATICCHECK_VERSION#v})"; then
		return 0
	fi
	echo "deps: installing staticcheck $STATICCHECK_VERSION (go install)" >&2
	GOFLAGS='' go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
}
if [ "${1:-test}" = staticcheck ]; then
	staticcheck
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
want=""
need() { command -v "$1" >/dev/null 2>&1 || want="$want $2"; }

need ip iproute2
need xz xz-utils
if [ "${1:-test}" = test ]; then
	need ethtool ethtool
	need gcc gcc # cgo, which the race detector needs
	need shellcheck shellcheck
	need musl-gcc musl-tools
	# make size: the mipsle build as the packages feed makes it (cgo,
	# linked by gcc against musl; scripts/size-feed.sh).
	need mipsel-linux-gnu-gcc gcc-mipsel-linux-gnu
	need iperf3 iperf3
	need iptables-legacy-restore iptables
	# The static build: the same package the VM guests get for their
	# architecture (make test-vm); it provides the busybox command too.
	need busybox busybox-static
	# make test-cross: user-mode emulators for the router architectures.
	# The tests re-execute themselves through the emulator
	# (internal/testenv), so binfmt_misc registration is not needed.
	for q in qemu-mipsel qemu-mips qemu-arm qemu-aarch64; do need "$q" qemu-user; done
	need chromium chromium
	need node nodejs
	need npm npm
	# make test-vm: QEMU guests, their initramfs.
	need qemu-system-x86_64 qemu-system-x86
	need qemu-system-aarch64 qemu-system-arm
	need qemu-system-mipsel qemu-system-mips
	need cpio cpio
	# make bed-biglittle: the arm64 guest's device tree with
	# capacity-dmips-mhz (QEMU's dumped, edited and compiled again).
	need dtc device-tree-compiler
	# make test-openwrt's reboot pair: the router's root disk (mkfs.ext4 -d).
	need mkfs.ext4 e2fsprogs
fi

if [ -n "$want" ]; then
	echo "deps: installing$want" >&2
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $want >/dev/null
fi

# make test-vm fetches arm64 and mipsel kernels and busybox, and make size
# Debian's musl for mipsel, with `apt-get download`, which needs those
# architectures in apt's lists.
if [ "${1:-test}" = test ]; then
	added=
	for arch in arm64 mipsel; do
		if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
			echo "deps: adding the $arch architecture to apt (for make test-vm)" >&2
			$SUDO dpkg --add-architecture "$arch"
			added=1
		fi
	done
	[ -z "$added" ] || $SUDO apt-get update -qq
fi

if [ "${1:-test}" = test ] && [ ! -d luci-app-packet-steering/test/node_modules/playwright-core ]; then
	echo "deps: installing playwright-core (npm)" >&2
	(cd luci-app-packet-steering/test && npm install --no-audit --no-fund --silent)
fi

if [ "${1:-test}" = test ]; then
	staticcheck
fi
