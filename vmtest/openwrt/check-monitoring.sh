#!/bin/sh
# The monitoring packages on the booted image (docs/monitoring.md, "What
# the real images can run"): sourced by check.sh (one line, before the
# removal) while the daemon serves packet_steering; it uses check.sh's
# run, say, note, st and stf. The packages are offered to the image's
# opkg; where it refuses them because a dependency is not in the image (the
# exporters, collectd-mod-exec: no feed here), their files are copied in as
# the package places them (unpacked by the test). Then each collector runs with the image's own
# interpreter against the real daemon, ubusd, /proc and /sys, and its
# values are compared with `ubus call packet_steering status`.
# vmtest/openwrt_monitoring_test.go puts the packages, the real exporters'
# programs (../shared/tools/prometheus-node-exporter) and this file in
# /root/pscheck/mon.
#
# shellcheck shell=ash
# shellcheck disable=SC3043 # local: busybox ash has it
# shellcheck disable=SC2317 # the check functions are called through run
# shellcheck disable=SC2015 # A && B || fail: either failing is the failure

mon=/root/pscheck/mon

if [ -d "$mon" ]; then
	mon_expect=
	[ -x /usr/bin/lua ] && mon_expect="$mon_expect mon-install-lua mon-lua"
	# The ucode exporter is 23.05's (its metrics.uc wants that ucode).
	case "$PSC_IMAGE" in 23.*) [ -f /usr/lib/ucode/ubus.so ] && mon_expect="$mon_expect mon-install-ucode mon-ucode" ;; esac
	[ -x /usr/sbin/collectd ] && mon_expect="$mon_expect mon-install-collectd mon-collectd"
	if [ -n "${PSC_ONLY:-}" ]; then
		only=
		for c in $mon_expect; do
			case " $PSC_ONLY " in *" $c "*) only="$only $c" ;; esac
		done
		mon_expect=$only
	fi
	say "EXPECT$mon_expect"

	# mon_install PACKAGE DEPENDENCY FILE: opkg install, or, when opkg
	# refuses for want of DEPENDENCY, the package's files unpacked; FILE
	# must then be in place.
	mon_install() {
		local ipk out
		ipk=$(ls "$mon/$1"_*_all.ipk) || return 1
		if out=$(opkg install "$ipk" 2>&1); then
			note "$1: installed with opkg"
		else
			echo "$out" | grep -q "cannot find dependency $2 for $1" || { echo "$out"; return 1; }
			note "$1: opkg refuses it: cannot find dependency $2 (not in this image); its files copied in"
			# Unpacked by the test (23.05's busybox has no tar).
			cp -R "$mon/$1.data/." / || return 1
		fi
		[ -f "$3" ] || { echo "no $3 after the install"; return 1; }
	}

	# mon_value TEXT NAME: the value of the unlabelled series NAME.
	mon_value() { echo "$1" | sed -n -e "s/^$2 //p" -e "s/^$2{} //p"; }

	# mon_run NAME FUNCTION: run, for the checks this image expects.
	mon_run() {
		case " $mon_expect " in *" $1 "*) run "$@" ;; esac
	}

	# mon_compare TEXT: a scrape's packet_steering series against status.
	mon_compare() {
		local s="$1" j cpus n m
		j=$(st) || { echo "status failed"; return 1; }
		cpus=$(grep -c ^processor /proc/cpuinfo)
		[ "$(mon_value "$s" packet_steering_up)" = 1 ] || { echo "packet_steering_up $(mon_value "$s" packet_steering_up)"; echo "$s" | tail -20; return 1; }
		[ "$(mon_value "$s" packet_steering_queues_up)" = 1 ] || { echo "packet_steering_queues_up $(mon_value "$s" packet_steering_queues_up)"; return 1; }
		case "$(echo "$j" | jsonfilter -e '@.in_sync')" in true) m=1 ;; *) m=0 ;; esac
		[ "$(mon_value "$s" packet_steering_in_sync)" = "$m" ] || { echo "in_sync $(mon_value "$s" packet_steering_in_sync), status $m"; return 1; }
		for n in applies:applies knobs_changed:changed writes_failed:failed irqs_refused:irqs_refused rollbacks:rollbacks; do
			m=$(echo "$j" | jsonfilter -e "@.totals.${n#*:}")
			[ -n "$m" ] && [ "$(mon_value "$s" "packet_steering_${n%%:*}_total")" = "$m" ] ||
				{ echo "packet_steering_${n%%:*}_total $(mon_value "$s" "packet_steering_${n%%:*}_total"), status totals.${n#*:} $m"; return 1; }
		done
		[ "$(mon_value "$s" packet_steering_applies_total)" -ge 1 ] || { echo "no apply counted"; return 1; }
		m=$(echo "$j" | jsonfilter -e '@.mode')
		echo "$s" | grep -q "^packet_steering_info{.*mode=\"$m\"" || { echo "no packet_steering_info with mode $m"; return 1; }
		n=$(echo "$s" | grep -c '^node_softnet_processed_total{')
		[ "$n" = "$cpus" ] || { echo "$n node_softnet_processed_total series, $cpus CPUs"; return 1; }
		n=$(echo "$s" | grep -c '^packet_steering_queue_cpu{.*device="eth0"')
		[ "$n" -ge 4 ] || { echo "$n packet_steering_queue_cpu series for eth0"; return 1; }
		note "scrape: $(echo "$s" | grep -c '^[a-z]') series, applies_total $(mon_value "$s" packet_steering_applies_total), knobs_changed_total $(mon_value "$s" packet_steering_knobs_changed_total)"
	}

	c_mon_install_lua() {
		mon_install prometheus-node-exporter-lua-packet-steering prometheus-node-exporter-lua /usr/lib/lua/prometheus-collectors/packet_steering.lua
	}
	mon_run mon-install-lua c_mon_install_lua
	c_mon_lua() {
		local out
		# The image has no luasocket, which the exporter loads only for
		# socket.gettime (scrape durations): os.time stands in.
		out=$(lua -e 'package.preload.socket = function() return { gettime = os.time } end' "$mon/prometheus-node-exporter-lua" 2>&1) ||
			{ echo "$out" | tail -5; return 1; }
		mon_compare "$out"
	}
	mon_run mon-lua c_mon_lua

	c_mon_install_ucode() {
		mkdir -p /usr/share/ucode/node-exporter && cp "$mon/metrics.uc" /usr/share/ucode/node-exporter/metrics.uc || return 1
		mon_install prometheus-node-exporter-ucode-packet-steering prometheus-node-exporter-ucode /usr/share/ucode/node-exporter/lib/packet_steering.uc
	}
	mon_run mon-install-ucode c_mon_install_ucode
	c_mon_ucode() {
		local out
		# The exporter's command-line scrape (its run.sh); the image has no
		# uhttpd-mod-ucode to serve it. CGI header lines first.
		out=$(ucode -T /usr/share/ucode/node-exporter/metrics.uc packet_steering 2>&1) || { echo "$out" | tail -5; return 1; }
		mon_compare "$(echo "$out" | tr -d '\r' | sed '1,/^$/d')"
	}
	mon_run mon-ucode c_mon_ucode

	c_mon_install_collectd() {
		mon_install collectd-packet-steering collectd-mod-exec /usr/libexec/packet-steering/collectd-softnet || return 1
		# Unpacked files: run the uci-defaults script as opkg's postinst would.
		if [ -f /etc/uci-defaults/90-packet-steering-collectd ]; then
			# shellcheck source=/dev/null # the package's script
			(cd /etc/uci-defaults && . ./90-packet-steering-collectd) && rm -f /etc/uci-defaults/90-packet-steering-collectd || return 1
		fi
		uci show luci_statistics | grep -q "cmdline='/usr/libexec/packet-steering/collectd-softnet'" ||
			{ echo "no exec input for the script:"; uci show luci_statistics | grep exec; return 1; }
		[ -f /www/luci-static/resources/statistics/rrdtool/definitions/packet_steering.js ] || { echo "no graph definition"; return 1; }
	}
	mon_run mon-install-collectd c_mon_install_collectd
	c_mon_collectd() {
		local cpus out n c v want
		cpus=$(grep -c ^processor /proc/cpuinfo)
		# One round, as collectd's exec plugin would read it (the plugin
		# itself is not in the image).
		out=$(COLLECTD_HOSTNAME=router COLLECTD_INTERVAL=5 /usr/libexec/packet-steering/collectd-softnet | head -n $((cpus * 5)))
		n=$(echo "$out" | grep -c '^PUTVAL "router/packet_steering-cpu[0-9]*/[a-z]*-[a-z_]*" interval=5 N:[0-9]*$')
		[ "$n" = $((cpus * 5)) ] || { echo "$n PUTVAL lines for $cpus CPUs:"; echo "$out"; return 1; }
		# Processed packets of each CPU: never less than softnet_stat said
		# before the round (a counter).
		c=0
		while read -r v _; do
			want=$(printf '%d' "0x$v")
			got=$(echo "$out" | sed -n "s|^PUTVAL \"router/packet_steering-cpu$c/packets-processed\" interval=5 N:||p")
			[ -n "$got" ] && [ "$got" -ge "$want" ] || { echo "cpu$c processed $got, softnet_stat had $want"; return 1; }
			c=$((c + 1))
		done </tmp/mon-softnet
	}
	cp /proc/net/softnet_stat /tmp/mon-softnet 2>/dev/null
	mon_run mon-collectd c_mon_collectd
fi
