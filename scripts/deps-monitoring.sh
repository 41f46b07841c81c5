#!/bin/sh
# Installs what make test-monitoring needs on a Debian machine, and nothing
# that is already there (scripts/deps.sh style): Lua 5.1 with luasocket and
# lua-cjson for OpenWrt's prometheus-node-exporter-lua, promtool and the
# Prometheus server, collectd. ucode is not in Debian: the ucode exporter
# runs in a chroot of ../shared/openwrt's 23.05 rootfs.
set -eu

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
want=""
need() { command -v "$1" >/dev/null 2>&1 || want="$want $2"; }
needlua() { command -v lua5.1 >/dev/null 2>&1 && lua5.1 -e "require '$1'" 2>/dev/null || want="$want $2"; }

need lua5.1 lua5.1
needlua socket lua-socket
needlua cjson lua-cjson
need promtool prometheus
need prometheus prometheus
need collectd collectd-core
need unshare util-linux
need xz xz-utils
need node nodejs

if [ -n "$want" ]; then
	echo "deps-monitoring: installing$want" >&2
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $want >/dev/null
fi
