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
	# The Lua exporter under the image's own uhttpd (uhttpd-mod-lua: 22.03.4).
	[ -x /usr/bin/lua ] && [ -f /usr/lib/uhttpd_lua.so ] && [ -f /usr/lib/lua/nixio.so ] && mon_expect="$mon_expect mon-uhttpd-lua"
	# The Statistics graph: collectd with its rrdtool and unixsock plugins,
	# rrdtool, luci-app-statistics and socat (22.03.4), and the host's
	# browser (check-luci.sh's settings; not on 1-CPU boots).
	[ -x /usr/sbin/collectd ] && [ -f /usr/lib/collectd/rrdtool.so ] && [ -f /usr/lib/collectd/unixsock.so ] &&
		[ -x /usr/bin/rrdtool ] && [ -x /usr/bin/socat ] && [ -f /www/luci-static/resources/view/statistics/graphs.js ] &&
		[ -n "${PSL_HOST:-}" ] && mon_expect="$mon_expect mon-graph mon-graph-page"
	if [ -n "${PSC_ONLY:-}" ]; then
		only=
		for c in $mon_expect; do
			# mon-graph-page is mon-graph's browser half.
			case " $PSC_ONLY " in *" $c "* | *" ${c%-page} "*) only="$only $c" ;; esac
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
		# socket.gettime (scrape durations): mon/shim/socket.lua stands in.
		out=$(LUA_PATH="$mon/shim/?.lua;;" lua "$mon/prometheus-node-exporter-lua" 2>&1) ||
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

	mon_fetch() { uclient-fetch -q -T 5 -O "$2" "$1" 2>/dev/null; }
	# mon_softnet FILE CPU COLUMN: a softnet_stat copy's counter (decimal).
	mon_softnet() { printf '%d' "0x$(sed -n "$(($2 + 1))p" "$1" | cut -d' ' -f"$3")"; }

	# The exporter as its package starts it (its init script's uhttpd
	# command line, on loopback), with the image's uhttpd and uhttpd-mod-lua;
	# the one missing piece, luasocket's gettime, is the test's shim
	# (mon/shim/socket.lua: nixio.gettimeofday), on this uhttpd's LUA_PATH only.
	c_mon_uhttpd_lua() {
		local out pid c v lo hi
		[ -f /usr/lib/lua/prometheus-collectors/packet_steering.lua ] || { echo "no collector (mon-install-lua)"; return 1; }
		cp "$mon/prometheus-node-exporter-lua" /usr/bin/prometheus-node-exporter-lua && chmod 755 /usr/bin/prometheus-node-exporter-lua || return 1
		LUA_PATH="$mon/shim/?.lua;;" uhttpd -f -c /dev/null -l / -L /usr/bin/prometheus-node-exporter-lua -k 70 -p 127.0.0.1:9100 </dev/null >/tmp/mon-uhttpd.log 2>&1 &
		pid=$!
		cp /proc/net/softnet_stat /tmp/mon-uhttpd.before
		waitfor 15 mon_fetch http://127.0.0.1:9100/metrics /tmp/mon-uhttpd.metrics
		c=$?
		cp /proc/net/softnet_stat /tmp/mon-uhttpd.after
		[ "$c" = 0 ] || { kill "$pid"; cat /tmp/mon-uhttpd.log; echo "uhttpd (pid $pid) did not serve /metrics"; return 1; }
		out=$(cat /tmp/mon-uhttpd.metrics)
		mon_fetch http://127.0.0.1:9100/nothing /tmp/mon-uhttpd.404 && { kill "$pid"; echo "/nothing answered"; return 1; }
		kill "$pid"
		mon_compare "$out" || return 1
		# Each CPU's softnet counters: between softnet_stat before and after the scrape.
		c=0
		while [ "$c" -lt "$(grep -c ^processor /proc/cpuinfo)" ]; do
			for v in processed:1 dropped:2 times_squeezed:3; do
				lo=$(mon_softnet /tmp/mon-uhttpd.before $c "${v#*:}")
				hi=$(mon_softnet /tmp/mon-uhttpd.after $c "${v#*:}")
				got=$(echo "$out" | sed -n "s/^node_softnet_${v%:*}_total{cpu=\"$c\"} //p")
				[ -n "$got" ] && [ "$got" -ge "$lo" ] && [ "$got" -le "$hi" ] ||
					{ echo "node_softnet_${v%:*}_total{cpu=\"$c\"} $got, softnet_stat $lo before and $hi after"; return 1; }
			done
			c=$((c + 1))
		done
		echo "$out" | grep -q '^node_scrape_collector_duration_seconds{collector="packet_steering"} [0-9.e-]*$' ||
			{ echo "no scrape duration: $(echo "$out" | grep duration_seconds)"; return 1; }
		note "uhttpd served /metrics: $(echo "$out" | grep -c '^[a-z]') series, cpu0 processed $(echo "$out" | sed -n 's/^node_softnet_processed_total{cpu="0"} //p'), $(echo "$out" | grep 'duration_seconds{collector="packet_steering"}')"
	}
	mon_run mon-uhttpd-lua c_mon_uhttpd_lua

	# The Statistics graph: collectd as luci_statistics configures it (its
	# rrdtool plugin, unixsock, a 2 s interval), fed the script's rounds
	# through its unixsock socket (the exec plugin that would run the
	# script is not in the image), writes the RRDs; the host's browser then
	# has the image's LuCI draw them with our definition (mon-graph-page).
	mon_host=$(cat /proc/sys/kernel/hostname)
	mon_sock=/var/run/collectd-unixsock
	mon_rrd=/tmp/rrd/$mon_host
	# mon_feed: the script's rounds into collectd's socket, its answers in
	# /tmp/mon-graph.replies, what it sent in /tmp/mon-graph.sent (socat's
	# own copy: a tee between them would outlive socat where SIGPIPE is
	# ignored, and keep the script writing).
	mon_feed() {
		{
			sh -c 'echo $$ >/tmp/mon-graph.feeder; exec /usr/libexec/packet-steering/collectd-softnet' |
				sh -c 'echo $$ >/tmp/mon-graph.socat; exec socat -r /tmp/mon-graph.sent - UNIX-CONNECT:'"$mon_sock"
		} </dev/null >/tmp/mon-graph.replies 2>&1 &
	}
	# mon_unfeed: socat stopped; the script ends at its next write.
	mon_unfeed() {
		local f
		kill "$(cat /tmp/mon-graph.socat)" 2>/dev/null
		f=$(cat /tmp/mon-graph.feeder)
		waitfor 8 sh -c "! [ -d /proc/$f ]" || { echo "the script ($f) still runs with its reader gone"; return 1; }
	}
	# mon_ds FILE: an RRD's last stored counter.
	mon_ds() { rrdtool info "$1" | sed -n 's/^ds\[value\]\.last_ds = "\(.*\)"$/\1/p'; }
	c_mon_graph() {
		local cpus c f t n got want first last rounds lines rates
		cpus=$(grep -c ^processor /proc/cpuinfo)
		[ -x /usr/libexec/packet-steering/collectd-softnet ] || { echo "no script (mon-install-collectd)"; return 1; }
		uci set luci_statistics.collectd.Interval=2
		uci set luci_statistics.collectd_rrdtool.StepSize=2
		uci set luci_statistics.collectd_rrdtool.HeartBeat=10
		uci -q delete luci_statistics.collectd_rrdtool.RRATimespans
		uci add_list luci_statistics.collectd_rrdtool.RRATimespans=1min
		uci add_list luci_statistics.collectd_rrdtool.RRATimespans=10min
		uci set luci_statistics.rrdtool.default_timespan=1min
		uci set luci_statistics.collectd_unixsock.enable=1
		uci set luci_statistics.collectd_unixsock.SocketFile="$mon_sock"
		# Not in the image (collectd-mod-exec); the rest would only cost
		# emulated CPU and draw other tabs.
		for f in exec cpu load memory interface network iwinfo; do uci -q set "luci_statistics.collectd_$f.enable=0"; done
		uci commit luci_statistics
		/etc/init.d/luci_statistics start && /etc/init.d/collectd start || return 1
		grep -q '^LoadPlugin unixsock' /var/etc/collectd.conf && grep -q '^LoadPlugin rrdtool' /var/etc/collectd.conf ||
			{ echo "luci_statistics' collectd.conf:"; cat /var/etc/collectd.conf; return 1; }
		waitfor 30 test -S "$mon_sock" || { echo "no $mon_sock"; logread | grep -i collectd | tail -5; return 1; }
		cp /proc/net/softnet_stat /tmp/mon-graph.before
		COLLECTD_HOSTNAME=$mon_host COLLECTD_INTERVAL=2 mon_feed
		# Traffic on the lan (eth0's rx queues, RPS) while it runs: echo
		# replies from the host (busybox ping: one a second each).
		for n in 1 2 3 4 5 6; do ping -q -c 14 -s 1000 "${PSL_HOST%:*}" >/dev/null 2>&1 & done
		rounds=6
		waitfor 30 sh -c "[ \$(grep -c 'packets-processed' /tmp/mon-graph.sent) -ge $((rounds * cpus)) ]" ||
			{ mon_unfeed; echo "$(grep -c packets-processed /tmp/mon-graph.sent) rounds x CPUs sent in 30 s"; return 1; }
		mon_unfeed || return 1
		cp /proc/net/softnet_stat /tmp/mon-graph.after
		echo "FLUSH plugin=rrdtool" | socat - "UNIX-CONNECT:$mon_sock" | grep -q '^0 ' || { echo "FLUSH refused"; return 1; }
		# Every line the script sent was accepted.
		lines=$(grep -c '^PUTVAL ' /tmp/mon-graph.sent)
		n=$(grep -c '^0 Success: 1 value has been dispatched' /tmp/mon-graph.replies)
		[ "$n" = "$lines" ] || { echo "$lines PUTVAL lines sent, $n accepted:"; grep -v '^0 Success' /tmp/mon-graph.replies | head -5; return 1; }
		rates=
		c=0
		while [ "$c" -lt "$cpus" ]; do
			for t in packets-processed:1 packets-dropped:2 derive-time_squeeze:3 packets-rps_received:10 packets-flow_limit:11; do
				f=$mon_rrd/packet_steering-cpu$c/${t%:*}.rrd
				[ -f "$f" ] || { echo "no $f: $(find "$mon_rrd" -name "*.rrd" 2>&1 | head -3)"; return 1; }
				# The RRD's last counter is the script's last round; the rounds
				# lie within what softnet_stat said before and after.
				want=$(sed -n "s|^PUTVAL \"$mon_host/packet_steering-cpu$c/${t%:*}\" interval=2 N:||p" /tmp/mon-graph.sent)
				first=$(echo "$want" | head -1)
				last=$(echo "$want" | tail -1)
				got=$(mon_ds "$f")
				[ "$got" = "$last" ] || { echo "$f: last_ds $got, the last round sent $last"; return 1; }
				[ "$first" -ge "$(mon_softnet /tmp/mon-graph.before "$c" "${t#*:}")" ] && [ "$last" -le "$(mon_softnet /tmp/mon-graph.after "$c" "${t#*:}")" ] ||
					{ echo "$f: rounds $first..$last, softnet_stat $(mon_softnet /tmp/mon-graph.before "$c" "${t#*:}") before, $(mon_softnet /tmp/mon-graph.after "$c" "${t#*:}") after"; return 1; }
				# The stored rates: non-negative, and over the steps they cover
				# no more than the counter moved between the first and last
				# round. The first stored step may be known only in part (the
				# first round inside it) and is then the rate of that part: left
				# out of the sum.
				n=$(rrdtool fetch "$f" AVERAGE -s -90 | awk -v d=$((last - first)) '
					$1 ~ /^[0-9]+:$/ && tolower($2) !~ /nan/ { r = $2 + 0; if (r < 0) bad = 1; if (rows) sum += r * 2; rows++ }
					END { if (bad || sum > d * 1.001 + 1) { print "bad " sum " " d; exit } printf "%d %.0f", rows, sum }')
				case "$n" in
				"" | bad*) echo "$f: rates $n (rounds moved $((last - first))): $(rrdtool fetch "$f" AVERAGE -s -90 | tail -8 | tr '\n' ' ')"; return 1 ;;
				0\ *) echo "$f: no stored rate: $(rrdtool fetch "$f" AVERAGE -s -90 | tail -8 | tr '\n' ' ')"; return 1 ;;
				esac
				[ "$t" = packets-processed:1 ] && rates="$rates cpu$c ${n#* }/$((last - first)) in ${n% *} steps;"
			done
			c=$((c + 1))
		done
		note "collectd: $lines PUTVAL lines ($rounds+ rounds) accepted, RRDs of $cpus CPUs; processed packets stored/moved:$rates"
		# The graphs drawn with fresh data: fed again during the browser run.
		COLLECTD_HOSTNAME=$mon_host COLLECTD_INTERVAL=2 mon_feed
		touch /tmp/mon-graph.ok
	}
	rm -f /tmp/mon-graph.ok
	mon_run mon-graph c_mon_graph
	case " $mon_expect " in *" mon-graph-page "*)
		if [ -f /tmp/mon-graph.ok ]; then
			# LuCI's login as root (check-luci.sh's password; luci-setup may not have run).
			setpw root "$PSL_ROOT_PW"
			browser_run graph mon-graph-page
			mon_unfeed >/dev/null
		else
			say "FAIL mon-graph-page: no RRDs to draw (mon-graph failed or did not run)"
		fi
		;;
	esac
fi
