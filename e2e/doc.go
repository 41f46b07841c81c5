// Package e2e holds the end-to-end test of the router lifecycle on the real
// kernel: the packet-steering binary runs as a daemon in a network namespace
// of the test's own, behind the in-process ubus broker, and is driven the
// way a router drives it (ubus calls, a restart, a hotplug event through the
// shipped hotplug.d script).
//
// The package has no code outside its tests. The test must never read or
// write the host's own configuration or devices: the daemon runs chrooted in
// a temporary directory (its own /etc/config and /var/lock) with only the
// namespace's /sys and the host's /proc bound in, and only the veths the
// test created, and their NAPI threads, are ever changed.
package e2e
