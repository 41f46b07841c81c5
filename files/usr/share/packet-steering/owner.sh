# shellcheck shell=ash
#
# Who serves the ubus object packet_steering: the resident daemon, or rpcd
# running /usr/libexec/rpcd/packet_steering (a symlink to
# /usr/sbin/packet-steering) as an exec plugin for each call. Sourced by
# /etc/init.d/packet-steering.
#
# packet_steering.globals.daemon decides ("auto": the daemon where at least
# 2 CPUs are online, the plugin on a single-CPU router; "1" and "0" force
# it); `packet-steering owner` applies that rule, the same function the
# plugin's `list` and the daemon ask. ubusd refuses a second object of the
# same name, so exactly one of them must register it:
#
# - rpcd runs the plugin's `list` when it starts (and when it restarts);
#   the plugin lists the four methods only while the record below says
#   "rpcd" (before the init script ran at boot: when the rule says so) and
#   otherwise prints {}, which registers nothing.
# - The init script records the owner in /var/run/packet-steering/owner and
#   restarts rpcd when the owner changed, after the daemon's object is gone,
#   so that rpcd lists again; the daemon, starting while rpcd still holds
#   the name, retries until it is free.
#
# Paths are below ${IPKG_INSTROOT} like every OpenWrt package script.

PS_OWNER_FILE="${IPKG_INSTROOT}/var/run/packet-steering/owner"
PS_RPCD_INIT="${IPKG_INSTROOT}/etc/init.d/rpcd"

# ps_owner: print who is to serve the object now: daemon or rpcd. When the
# binary cannot say, the daemon (the behaviour before the option existed).
ps_owner() {
	ps_o="$(packet-steering owner 2>/dev/null)"
	case "$ps_o" in
	daemon | rpcd) echo "$ps_o" ;;
	*) echo daemon ;;
	esac
}

# ps_owner_recorded: print the owner the init script last set up ("" none).
ps_owner_recorded() {
	[ -f "$PS_OWNER_FILE" ] && cat "$PS_OWNER_FILE"
	return 0
}

ps_owner_record() {
	mkdir -p "${PS_OWNER_FILE%/*}" && echo "$1" >"$PS_OWNER_FILE"
}

# ps_object_gone: wait (at most 5 s) until no program holds the object, such
# as a daemon that was just told to stop and finishes its last call.
ps_object_gone() {
	ps_i=0
	while ubus list packet_steering >/dev/null 2>&1; do
		[ "$ps_i" -ge 5 ] && return 1
		sleep 1
		ps_i=$((ps_i + 1))
	done
	return 0
}

# ps_rpcd_relist: restart rpcd so that it runs the plugin's `list` again
# and registers (or drops) the object. LuCI sessions end with it: this only
# happens when the owner changes.
ps_rpcd_relist() {
	[ -x "$PS_RPCD_INIT" ] || return 0
	ps_log "ubus object packet_steering now served by $1; restarting rpcd"
	"$PS_RPCD_INIT" restart
}

# ps_owner_start: set the owner up as the service starts; sets PS_OWNER.
# rpcd: rpcd is restarted when it listed {} last time (the daemon owned
# the object, or the service was stopped) or when the object is missing
# (rpcd started before the plugin was installed); at boot (nothing
# recorded) rpcd has already listed under the same rule. daemon: rpcd is
# restarted when it served the object, so that it lets go.
ps_owner_start() {
	PS_OWNER="$(ps_owner)"
	ps_last="$(ps_owner_recorded)"
	ps_owner_record "$PS_OWNER"
	case "$PS_OWNER" in
	rpcd)
		if [ "$ps_last" = daemon ] || [ "$ps_last" = stopped ] || ! ubus list packet_steering >/dev/null 2>&1; then
			ps_object_gone || ps_log "packet_steering still on ubus; rpcd may not register it"
			ps_rpcd_relist rpcd
		fi
		;;
	daemon)
		[ "$ps_last" = rpcd ] && ps_rpcd_relist daemon
		;;
	esac
	return 0
}

# ps_owner_stop: the service stops; a plugin serving the object stops
# serving it too (rpcd drops it when it lists again). PS_NEXT_OWNER names
# who serves next when the stop is half of an owner switch (for the log).
ps_owner_stop() {
	ps_last="$(ps_owner_recorded)"
	ps_owner_record stopped
	[ "$ps_last" = rpcd ] && ps_rpcd_relist "${PS_NEXT_OWNER:-nobody}"
	return 0
}

# ps_owner_changed: true when the owner to be differs from the recorded
# one (packet_steering.globals.daemon changed, or a CPU went on- or
# offline under auto).
ps_owner_changed() {
	ps_last="$(ps_owner_recorded)"
	[ -n "$ps_last" ] && [ "$ps_last" != stopped ] && [ "$(ps_owner)" != "$ps_last" ]
}
