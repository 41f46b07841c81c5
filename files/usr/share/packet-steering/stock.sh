# shellcheck shell=ash
#
# Handing the steering knobs between netifd's stock packet_steering service
# and packet-steering, so that exactly one of them writes RPS/XPS masks, flow
# counts and NAPI/IRQ affinities. Sourced by /etc/init.d/packet-steering,
# /etc/uci-defaults/90-packet-steering and the package's postinst/prerm.
#
# How the stock service is wired (openwrt/openwrt,
# package/network/config/netifd/files/etc/init.d/packet_steering): a procd
# service, START=25, whose start and reload run the target's hook
# /usr/libexec/platform/packet-steering.sh when one is installed (bcm53xx
# and bcm4908 ship one; disabling the service stops the hook too) or
# else /usr/libexec/network/packet-steering.uc with
# network.@globals[0].packet_steering and steering_flows; procd runs that
# reload on every change of the network or firewall config and on interface
# events, through the triggers the service registers when it starts.
#
# Taking over therefore disables that service (no S25packet_steering link,
# so it never starts and never registers its triggers) and stops it if it
# runs (procd drops its triggers). Nothing in /etc/config/network changes, so
# LuCI's network page keeps showing the user's packet_steering and
# steering_flows settings, which packet-steering reads and keeps truthful.
# Handing back enables and starts the stock service again; its start applies
# the stock rule for those settings at once.
#
# The network page stays the user's switch: when its two settings change
# (procd runs "reload network" when LuCI applies a network change),
# ps_sync_from_network carries them into /etc/config/packet_steering; the
# daemon's set_mode writes both files itself. Other network changes (an
# address, a new interface) leave packet_steering alone, so a mode set with
# `uci set packet_steering...` is not undone by them: the last values seen
# are kept in /var/run/packet-steering/network-globals (written when the
# service starts).
#
# Paths are below ${IPKG_INSTROOT} like every OpenWrt package script; it is
# empty on a router.

PS_STOCK_INIT="${IPKG_INSTROOT}/etc/init.d/packet_steering"
PS_STATE_DIR="${IPKG_INSTROOT}/var/run/packet-steering"
# The state of every service packet-steering disabled, before it did:
# "NAME enabled|disabled", one line per service, written once; hand-back
# restores exactly that. In /etc, so that it survives reboots.
PS_TAKEOVER="${IPKG_INSTROOT}/etc/packet-steering/takeover"
PS_SMP_INIT="${IPKG_INSTROOT}/etc/init.d/smp_affinity"
PS_OWN_INIT="${IPKG_INSTROOT}/etc/init.d/packet-steering"

ps_log() {
	logger -t packet-steering -p daemon.notice "$*"
}

# ps_takeover: disable the stock service if it is enabled, and stop it in
# any case: netifd's package scripts start it on an upgrade even while it is
# disabled, and a started stock service keeps its procd triggers until it is
# stopped. Idempotent; a router without the stock service is left alone.
ps_takeover() {
	[ -x "$PS_STOCK_INIT" ] || return 0
	ps_record packet_steering
	if "$PS_STOCK_INIT" enabled; then
		"$PS_STOCK_INIT" disable
		ps_log "took steering over from netifd's packet_steering service (now disabled; removing packet-steering enables it again)"
	fi
	"$PS_STOCK_INIT" stop >/dev/null 2>&1
	return 0
}

# ps_handback: give the knobs back as packet-steering found them (and
# leave no /etc/packet-steering behind): the
# knobs only it manages to the kernel's defaults (`packet-steering
# release`: XPS, IRQ and NAPI affinities, rps_sock_flow_entries), then
# every service it disabled back to its state before the takeover; netifd's
# service, enabled again, starts and applies the stock rule at once. A
# service that was disabled before stays disabled (and stopped). Without a
# record (taken over by an older version), the stock service is enabled.
ps_handback() {
	packet-steering release >/dev/null 2>&1 ||
		ps_log "could not reset XPS, IRQ and NAPI affinities to the kernel defaults"
	ps_handback_writers
	if [ -x "$PS_STOCK_INIT" ]; then
		if [ "$(ps_recorded packet_steering)" = disabled ]; then
			ps_log "netifd's packet_steering service stays disabled, as it was before packet-steering was installed"
		else
			"$PS_STOCK_INIT" enable
			"$PS_STOCK_INIT" start >/dev/null 2>&1
			ps_log "handed steering back to netifd's packet_steering service"
		fi
	fi
	rm -f "$PS_TAKEOVER"
	# the directory too, unless something else was put there
	rmdir "${PS_TAKEOVER%/*}" 2>/dev/null
	return 0
}

# ps_record NAME: note the state of /etc/init.d/NAME before packet-steering
# first disables it; later calls keep the first note.
ps_record() {
	ps_init="${IPKG_INSTROOT}/etc/init.d/$1"
	[ -x "$ps_init" ] || return 0
	grep -q "^$1 " "$PS_TAKEOVER" 2>/dev/null && return 0
	mkdir -p "${PS_TAKEOVER%/*}" || return 1
	if "$ps_init" enabled; then
		echo "$1 enabled" >>"$PS_TAKEOVER"
	else
		echo "$1 disabled" >>"$PS_TAKEOVER"
	fi
}

# ps_recorded NAME: the noted state of NAME (enabled, disabled or nothing).
ps_recorded() {
	sed -n "s/^$1 //p" "$PS_TAKEOVER" 2>/dev/null | head -n 1
}

# ps_target: DISTRIB_TARGET from /etc/openwrt_release ("qualcommax/ipq807x").
ps_target() {
	sed -n "s/^DISTRIB_TARGET=['\"]\{0,1\}\([^'\"]*\).*/\1/p" "${IPKG_INSTROOT}/etc/openwrt_release" 2>/dev/null
}

# ps_takeover_writers: take over the other writers of the knobs that
# packet-steering covers (plan/otherwriters.go has the inventory and why):
# on qualcommax/ipq807x, /etc/init.d/smp_affinity (START=93: it would pin
# the EDMA IRQs and NAPI threads after packet-steering at every boot; the
# qualcommax-ipq807x profile places them, and its wifi ring IRQs as the
# script did). It acts only at boot, so disabling it is enough. The same
# script on other targets and irqbalance are deferred to: left alone here,
# their knobs left out of the plan. rockchip's hotplug script
# 40-net-smp-affinity is part of base-files and is not disabled either:
# packet-steering's hotplug script applies again after it instead (taken
# over where the plan places its IRQs, see plan/writer_rockchip.go).
ps_takeover_writers() {
	[ -x "$PS_SMP_INIT" ] || return 0
	[ "$(ps_target)" = qualcommax/ipq807x ] || return 0
	ps_record smp_affinity
	if "$PS_SMP_INIT" enabled; then
		"$PS_SMP_INIT" disable
		ps_log "took IRQ placement over from /etc/init.d/smp_affinity (now disabled; removing packet-steering enables it again)"
	fi
	return 0
}

# ps_handback_writers: enable the writers ps_takeover_writers disabled, if
# they were enabled before, and run their placement now (smp_affinity only
# acts at boot); run rockchip's hotplug script once (ps_handback_rockchip).
ps_handback_writers() {
	ps_handback_rockchip
	[ -x "$PS_SMP_INIT" ] || return 0
	[ "$(ps_recorded smp_affinity)" = enabled ] || return 0
	"$PS_SMP_INIT" enable
	"$PS_SMP_INIT" boot >/dev/null 2>&1
	ps_log "handed IRQ placement back to /etc/init.d/smp_affinity"
	return 0
}

# ps_handback_rockchip: rockchip's 40-net-smp-affinity pins its IRQs only
# when a netdev is added, and `packet-steering release` has just set the
# IRQs the plan pinned (its own among them where packet-steering took it
# over) to the kernel's default: so it is run once now, as hotplug-call
# runs it (sourced after /lib/functions.sh, which has its board_name, with
# ACTION=add), and its placement is back without waiting for the next
# netdev. In the background: it may wait 12 s for each IRQ it looks for.
ps_handback_rockchip() {
	ps_hook="${IPKG_INSTROOT}/etc/hotplug.d/net/40-net-smp-affinity"
	[ -f "$ps_hook" ] || return 0
	(
		if [ -f "${IPKG_INSTROOT}/lib/functions.sh" ]; then
			# shellcheck source=/dev/null
			. "${IPKG_INSTROOT}/lib/functions.sh"
		fi
		ACTION=add
		export ACTION
		# shellcheck source=/dev/null
		. "$ps_hook"
	) </dev/null >/dev/null 2>&1 &
	ps_log "handed IRQ placement back to /etc/hotplug.d/net/40-net-smp-affinity (run once now)"
	return 0
}

# ps_postinst: the package's postinst. OpenWrt's default_postinst (which
# runs the uci-defaults, then enables and starts the service on install,
# and on an upgrade only starts it) runs it as postinst-pkg after the
# uci-defaults and before the start for opkg; for apk the package's script
# follows the whole default_postinst in post-install. opkg and apk both set
# PKG_UPGRADE=1 on an upgrade (apk runs post-upgrade, which exports it): the
# daemon still running is the old binary, so it is restarted.
ps_postinst() {
	if [ "${PKG_UPGRADE:-}" = 1 ] && "$PS_OWN_INIT" enabled; then
		"$PS_OWN_INIT" restart >/dev/null 2>&1
	fi
	ps_takeover
	ps_takeover_writers
}

# ps_prerm: the package's prerm on removal. opkg runs it before its
# default_prerm stops the service, apk after: so it stops and disables
# packet-steering itself before handing back (a running daemon would take
# over again). Nothing is handed back on an upgrade: opkg runs no prerm
# then and apk runs no pre-deinstall, but a PKG_UPGRADE=1 in the
# environment is honoured all the same.
ps_prerm() {
	[ "${PKG_UPGRADE:-}" = 1 ] && return 0
	if [ -x "$PS_OWN_INIT" ]; then
		"$PS_OWN_INIT" stop >/dev/null 2>&1
		"$PS_OWN_INIT" disable
	fi
	ps_handback
}

# ps_sync_from_network: make packet_steering.globals follow
# network.@globals[0].packet_steering and steering_flows, the settings on
# LuCI's network page: 0 -> mode off, 2 -> mode all, 1 or unset (enabled
# upstream) -> auto, but a mode the page cannot express (legacy, custom:
# both "enabled" there) is kept. A numeric steering_flows sets flows.
# Creates the config when absent; commits only when something changed.
ps_sync_from_network() {
	ps_changed=
	ps_steering="$(uci -q get network.@globals[0].packet_steering)"
	ps_flows="$(uci -q get network.@globals[0].steering_flows)"

	[ -f "${IPKG_INSTROOT}/etc/config/packet_steering" ] ||
		touch "${IPKG_INSTROOT}/etc/config/packet_steering" || return 1
	if ! uci -q get packet_steering.globals >/dev/null; then
		uci set packet_steering.globals=globals
		ps_changed=1
	fi

	ps_cur="$(uci -q get packet_steering.globals.mode)"
	case "$ps_steering" in
	0) ps_mode=off ;;
	2) ps_mode=all ;;
	*)
		case "$ps_cur" in
		auto | legacy | custom) ps_mode="$ps_cur" ;;
		*) ps_mode=auto ;;
		esac
		;;
	esac
	if [ "$ps_mode" != "$ps_cur" ]; then
		uci set packet_steering.globals.mode="$ps_mode"
		ps_changed=1
	fi

	case "$ps_flows" in
	'' | *[!0-9]*) ;;
	*)
		if [ "$ps_flows" != "$(uci -q get packet_steering.globals.flows)" ]; then
			uci set packet_steering.globals.flows="$ps_flows"
			ps_changed=1
		fi
		;;
	esac
	if ! uci -q get packet_steering.globals.flows >/dev/null; then
		uci set packet_steering.globals.flows=0
		ps_changed=1
	fi

	[ -z "$ps_changed" ] || uci commit packet_steering
}

# ps_network_values: the network page's two settings as one word.
ps_network_values() {
	printf '%s/%s\n' "$(uci -q get network.@globals[0].packet_steering)" \
		"$(uci -q get network.@globals[0].steering_flows)"
}

# ps_remember_network: note the network page's settings as seen now.
ps_remember_network() {
	mkdir -p "$PS_STATE_DIR" && ps_network_values >"$PS_STATE_DIR/network-globals"
}

# ps_network_changed: true when the network page's settings differ from the
# ones last noted (or none were noted).
ps_network_changed() {
	[ "$(cat "$PS_STATE_DIR/network-globals" 2>/dev/null)" != "$(ps_network_values)" ]
}

# ps_config_pristine: true when packet_steering.globals holds the shipped
# defaults (mode auto, flows 0) or nothing.
ps_config_pristine() {
	case "$(uci -q get packet_steering.globals.mode)" in
	'' | auto) ;;
	*) return 1 ;;
	esac
	case "$(uci -q get packet_steering.globals.flows)" in
	'' | 0) return 0 ;;
	esac
	return 1
}
