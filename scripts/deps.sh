#!/bin/sh
# Installs what the tests and the demo need on a Debian machine, and nothing
# that is already there. Usage: scripts/deps.sh [test|demo]
set -eu

want=""
need() { command -v "$1" >/dev/null 2>&1 || want="$want $2"; }

need ip iproute2
need xz xz-utils
if [ "${1:-test}" = test ]; then
	need ethtool ethtool
	need gcc gcc # cgo, which the race detector needs
	need shellcheck shellcheck
	need musl-gcc musl-tools
	need iperf3 iperf3
	need iptables-legacy-restore iptables
	need busybox busybox
	need chromium chromium
	need node nodejs
	need npm npm
fi

if [ -n "$want" ]; then
	echo "deps: installing$want" >&2
	if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $want >/dev/null
fi

if [ "${1:-test}" = test ] && [ ! -d luci-app-packet-steering/test/node_modules/playwright-core ]; then
	echo "deps: installing playwright-core (npm)" >&2
	(cd luci-app-packet-steering/test && npm install --no-audit --no-fund --silent)
fi
