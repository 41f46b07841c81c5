// Package monitoring holds no Go code of the program: its directory has the
// collectors for OpenWrt's Prometheus exporters (lua/, ucode/), the collectd
// exec plugin (collectd/) and the LuCI Statistics graph definition (luci/),
// and this package's tests run them, with the real exporters, promtool,
// Prometheus and collectd, against the daemon on a fixture root
// (make test-monitoring; docs/monitoring.md).
package monitoring
