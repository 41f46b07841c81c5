package monitoring_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"golang.org/x/sys/unix"
)

// unpackRootfs unpacks one of ../shared/openwrt's x86_64 root file
// systems into a temporary directory, with what a booted router has and
// the tarball does not: /var as a link to /tmp and /dev/null.
func unpackRootfs(t *testing.T, name string) string {
	t.Helper()
	tarball := filepath.Join(shared(t), "openwrt", name)
	if _, err := os.Stat(tarball); err != nil {
		t.Fatalf("rootfs: %v", err)
	}
	dir, err := os.MkdirTemp("", "psow")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if out, err := exec.Command("tar", "-xJf", tarball, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", tarball, err, out)
	}
	if _, err := os.Lstat(filepath.Join(dir, "var")); os.IsNotExist(err) {
		if err := os.Symlink("tmp", filepath.Join(dir, "var")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dev/null")); err != nil {
		if err := unix.Mknod(filepath.Join(dir, "dev/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// install copies src into the rootfs at dst.
func install(t *testing.T, rootfs, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst = filepath.Join(rootfs, dst)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// ucodeRootfs is the 23.05 x86_64 rootfs (ucode with its fs, ubus and uci
// modules and libubus; Debian has no ucode) with the real
// prometheus-node-exporter-ucode's metrics.uc and the project's collector
// where the packages place them.
func ucodeRootfs(t *testing.T) string {
	t.Helper()
	dir := unpackRootfs(t, "openwrt-23.05-snapshot-r23633-x86_64-rootfs.tar.xz")
	install(t, dir, filepath.Join(shared(t), "tools/prometheus-node-exporter/prometheus-node-exporter-ucode/files/metrics.uc"), "usr/share/ucode/node-exporter/metrics.uc", 0o644)
	install(t, dir, filepath.Join(top(t), "monitoring/ucode/packet_steering.uc"), "usr/share/ucode/node-exporter/lib/packet_steering.uc", 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "tmp/w"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// scrapeUcode runs the exporter's command-line scrape (run.sh: ucode -T
// metrics.uc COLLECTOR) in a chroot of rootfs, against the world at
// /tmp/w of the rootfs, and returns the text format without the CGI status
// lines it prints first.
func scrapeUcode(t *testing.T, rootfs string) (string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chroot", rootfs, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"PACKET_STEERING_ROOT=/tmp/w/root", "PACKET_STEERING_UBUS_SOCKET=/tmp/w/ubus.sock",
		"/usr/bin/ucode", "-T", "/usr/share/ucode/node-exporter/metrics.uc", "packet_steering")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("ucode exporter: %v\n%s", err, errb.String())
	}
	took := time.Since(start)
	text := out.String()
	if i := strings.Index(text, "\n\n"); strings.HasPrefix(text, "Status: 200") && i >= 0 {
		text = text[i+2:]
	} else {
		t.Fatalf("no status header from metrics.uc:\n%s", text)
	}
	return text, took
}

// TestUcodeExporter: the real prometheus-node-exporter-ucode (metrics.uc)
// with the project's collector, run by the 23.05 rootfs's ucode and
// libubus against the daemon on the project's broker: promtool passes, the
// values equal status/get_queues/softnet_stat, and the series are the Lua
// collector's. Bad cases: object missing and a slow daemon give up 0.
func TestUcodeExporter(t *testing.T) {
	requireMonitoring(t, "lua5.1", "promtool", "unshare", "chroot")
	rootfs := ucodeRootfs(t)
	w := newWorld(t, filepath.Join(rootfs, "tmp/w"), preset)
	w.startDaemon(t)
	text, took := scrapeUcode(t, rootfs)
	t.Logf("ucode scrape: %d lines in %v", strings.Count(text, "\n"), took)
	promtoolCheck(t, text)
	got := parseScrape(t, text)
	checkSeries(t, got, expectedSeries(t, w, w.mustCall(t, "status"), w.mustCall(t, "get_queues")))
	if v := got[`node_scrape_collector_success{collector="packet_steering"}`].value; v != 1 {
		t.Errorf("node_scrape_collector_success = %v", v)
	}
	luaText, _ := scrapeLua(t, w, ubusStandIn(t, w.sock))
	lua := map[string]float64{}
	for k, s := range parseScrape(t, luaText) {
		if s.name != "node_scrape_collector_duration_seconds" && s.name != "node_scrape_collector_success" {
			lua[k] = s.value
		}
	}
	checkSeries(t, got, lua)

	w.stopDaemon()
	text, _ = scrapeUcode(t, rootfs)
	if v, ok := parseScrape(t, text)["packet_steering_up"]; !ok || v.value != 0 {
		t.Errorf("object missing: packet_steering_up %v (present %v), want 0", v.value, ok)
	}
	errReply := func(context.Context, *ubus.Request) ([]ubus.Attr, error) {
		return []ubus.Attr{ubus.String("error", "read /sys: input/output error"), ubus.String("mode", "auto")}, ubus.StatusUnknownError
	}
	w.fakeObject(t, errReply, errReply)
	text, _ = scrapeUcode(t, rootfs)
	if v, ok := parseScrape(t, text)["packet_steering_up"]; !ok || v.value != 0 {
		t.Errorf("error after a reply: packet_steering_up %v (present %v), want 0", v.value, ok)
	}
	w.stopFake(t)
	var refused atomic.Int32
	w.fakeObject(t, refusingStatus(t, &refused), jsonReply(t, `{"devices": []}`))
	text, _ = scrapeUcode(t, rootfs)
	got = parseScrape(t, text)
	if got["packet_steering_up"].value != 1 || got["packet_steering_queues_up"].value != 1 || got["packet_steering_in_sync"].value != 1 || refused.Load() != 1 {
		t.Errorf("status refusing queues: up %v, queues_up %v, in_sync %v, refused %d; want 1, 1, 1, 1", got["packet_steering_up"].value,
			got["packet_steering_queues_up"].value, got["packet_steering_in_sync"].value, refused.Load())
	}
	w.stopFake(t)
	never := func(ctx context.Context, _ *ubus.Request) ([]ubus.Attr, error) {
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		return nil, ctx.Err()
	}
	w.fakeObject(t, never, never)
	text, took = scrapeUcode(t, rootfs)
	t.Logf("slow daemon: ucode scrape took %v", took)
	promtoolCheck(t, text)
	if v, ok := parseScrape(t, text)["packet_steering_up"]; !ok || v.value != 0 {
		t.Errorf("slow daemon: packet_steering_up %v (present %v), want 0", v.value, ok)
	}
}
