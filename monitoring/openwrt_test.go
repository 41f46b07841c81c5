package monitoring_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// TestLuaCollectorOnOpenWrt runs the Lua exporter and the collector with
// OpenWrt's own Lua, lua-cjson and stock ubus CLI: in a chroot of the
// 22.03.4 x86_64 rootfs, whose ubus CLI talks to the project's broker on
// the rootfs' /var/run/ubus/ubus.sock. The rootfs has no luasocket, which
// the exporter loads only for socket.gettime (the scrape durations): a
// preloaded stand-in gives it os.time. Values as status; a slow daemon ends
// with up 0 through the real CLI's -t.
func TestLuaCollectorOnOpenWrt(t *testing.T) {
	requireMonitoring(t, "promtool", "chroot")
	rootfs := unpackRootfs(t, "openwrt-22.03.4-x86_64-rootfs.tar.xz")
	install(t, rootfs, filepath.Join(shared(t), "tools/prometheus-node-exporter/prometheus-node-exporter-lua/files/usr/bin/prometheus-node-exporter-lua"), "usr/bin/prometheus-node-exporter-lua", 0o755)
	install(t, rootfs, filepath.Join(top(t), "monitoring/lua/packet_steering.lua"), "usr/lib/lua/prometheus-collectors/packet_steering.lua", 0o644)
	// The stock ubus CLI's default socket; the fixture beside it.
	w := newWorld(t, filepath.Join(rootfs, "tmp/run/ubus"), preset)
	w.startDaemon(t)
	scrape := func() (string, time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "chroot", rootfs, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
			"PACKET_STEERING_ROOT=/tmp/run/ubus/root",
			"/usr/bin/lua", "-e", "package.preload.socket = function() return { gettime = os.time } end",
			"/usr/bin/prometheus-node-exporter-lua")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("exporter in the 22.03 rootfs: %v\n%s", err, errb.String())
		}
		return out.String(), time.Since(start)
	}
	text, took := scrape()
	t.Logf("scrape with OpenWrt 22.03's lua and ubus: %d lines in %v", strings.Count(text, "\n"), took)
	promtoolCheck(t, text)
	got := parseScrape(t, text)
	checkSeries(t, got, expectedSeries(t, w, w.mustCall(t, "status"), w.mustCall(t, "get_queues")))

	w.stopDaemon()
	text, _ = scrape()
	if s, ok := parseScrape(t, text)["packet_steering_up"]; !ok || s.value != 0 {
		t.Errorf("object missing: packet_steering_up %v (present %v)", s.value, ok)
	}
	never := func(ctx context.Context, _ *ubus.Request) ([]ubus.Attr, error) {
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		return nil, ctx.Err()
	}
	w.fakeObject(t, never, never)
	text, took = scrape()
	t.Logf("slow daemon: the stock ubus -t 2 ended the scrape after %v", took)
	if s, ok := parseScrape(t, text)["packet_steering_up"]; !ok || s.value != 0 {
		t.Errorf("slow daemon: packet_steering_up %v (present %v)", s.value, ok)
	}
}
