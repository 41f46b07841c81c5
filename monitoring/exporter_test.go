package monitoring_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/internal/ubus"
)

// preset is the fixture the tests scrape: 4 CPUs, 4 rx rings with
// threaded NAPI and per-queue IRQs, DSA and wifi.
const preset = "ipq807x"

// TestLuaExporter scrapes the real prometheus-node-exporter-lua with the
// project's collector against the daemon on a fixture: the text format
// passes promtool, and every value equals what the daemon's status and
// get_queues and the fixture's softnet_stat say.
func TestLuaExporter(t *testing.T) {
	requireMonitoring(t, "lua5.1", "promtool", "unshare")
	w := newWorld(t, "", preset)
	w.startDaemon(t)
	path := ubusStandIn(t, w.sock)
	text, took := scrapeLua(t, w, path)
	t.Logf("scrape: %d lines in %v", strings.Count(text, "\n"), took)
	promtoolCheck(t, text)
	got := parseScrape(t, text)
	want := expectedSeries(t, w, w.mustCall(t, "status"), w.mustCall(t, "get_queues"))
	checkSeries(t, got, want)
	if v := got[`node_scrape_collector_success{collector="packet_steering"}`].value; v != 1 {
		t.Errorf("node_scrape_collector_success = %v", v)
	}
}

// expectedSeries is every packet_steering_* and node_softnet_* series the
// collectors must write for this status, get_queues reply and fixture.
func expectedSeries(t *testing.T, w *world, st, q map[string]any) map[string]float64 {
	t.Helper()
	want := map[string]float64{"packet_steering_up": 1, "packet_steering_queues_up": 1}
	// Softnet: the fixture's file, parsed here independently.
	raw, err := os.ReadFile(filepath.Join(w.root, "proc/net/softnet_stat"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{0: "node_softnet_processed_total", 1: "node_softnet_dropped_total", 2: "node_softnet_times_squeezed_total",
		8: "node_softnet_cpu_collision_total", 9: "node_softnet_received_rps_total", 10: "node_softnet_flow_limit_count_total", 11: "node_softnet_backlog_len"}
	for row, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		cols := strings.Fields(line)
		cpu := strconv.Itoa(row)
		if len(cols) >= 13 {
			n, _ := strconv.ParseUint(cols[12], 16, 32)
			cpu = strconv.FormatUint(n, 10)
		}
		for i, name := range names {
			if i < len(cols) {
				v, err := strconv.ParseUint(cols[i], 16, 32)
				if err != nil {
					t.Fatal(err)
				}
				want[key(name, map[string]string{"cpu": cpu})] = float64(v)
			}
		}
	}
	// The status' own per-CPU counters must agree with the file.
	for _, c := range st["cpus"].([]any) {
		m := c.(map[string]any)
		cpu := strconv.Itoa(int(m["cpu"].(float64)))
		for field, name := range map[string]string{"processed": "node_softnet_processed_total", "dropped": "node_softnet_dropped_total",
			"time_squeeze": "node_softnet_times_squeezed_total", "rps_received": "node_softnet_received_rps_total"} {
			if k := key(name, map[string]string{"cpu": cpu}); want[k] != m[field].(float64) {
				t.Errorf("status cpus[%s].%s = %v, softnet_stat %v", cpu, field, m[field], want[k])
			}
		}
	}
	cfg := st["configured"].(map[string]any)
	plat := st["platform"].(map[string]any)
	svc := st["service"].(map[string]any)
	want[key("packet_steering_info", map[string]string{
		"mode": st["mode"].(string), "configured_mode": cfg["mode"].(string), "source": cfg["source"].(string),
		"policy": st["policy"].(string), "offload": st["offload"].(string), "served_by": svc["served_by"].(string),
		"board": plat["board"].(string), "target": plat["target"].(string)})] = 1
	want["packet_steering_flows"] = cfg["flows"].(float64)
	want["packet_steering_cpus"] = plat["cpus"].(float64)
	want["packet_steering_in_sync"] = b2f(st["in_sync"].(bool))
	la := st["last_apply"].(map[string]any)
	at, err := time.Parse(time.RFC3339Nano, la["time"].(string))
	if err != nil {
		t.Fatal(err)
	}
	want["packet_steering_last_apply_timestamp_seconds"] = float64(at.UnixNano()) / 1e9
	want["packet_steering_last_apply_changed"] = la["changed"].(float64)
	want["packet_steering_last_apply_failed"] = la["failed"].(float64)
	want["packet_steering_last_apply_duration_seconds"] = la["duration_us"].(float64) / 1e6
	want["packet_steering_unfinished_apply"] = 0
	errs, _ := st["config_errors"].([]any)
	want["packet_steering_config_errors"] = float64(len(errs))
	for _, h := range st["hints"].([]any) {
		want[key("packet_steering_hint", map[string]string{"id": h.(map[string]any)["id"].(string)})] = 1
	}
	// The totals since the daemon started, as counters.
	tot := st["totals"].(map[string]any)
	since, err := time.Parse(time.RFC3339Nano, tot["since"].(string))
	if err != nil {
		t.Fatal(err)
	}
	want["packet_steering_totals_since_timestamp_seconds"] = float64(since.UnixNano()) / 1e9
	for name, member := range map[string]string{"applies": "applies", "knobs_changed": "changed", "writes_failed": "failed",
		"irqs_refused": "irqs_refused", "rollbacks": "rollbacks", "adaptive_moves": "adaptive_moves"} {
		want["packet_steering_"+name+"_total"] = tot[member].(float64)
	}
	if want["packet_steering_applies_total"] < 1 || want["packet_steering_knobs_changed_total"] < la["changed"].(float64) {
		t.Errorf("totals %v: the daemon's start apply (changed %v) not counted", tot, la["changed"])
	}
	// Queues: CPU sets parsed with the project's own cpuset package.
	irqCounts := procInterrupts(t, w.root)
	knob := func(dev, queue, name, live, wantv string, parse func(string) (cpuset.Set, error)) {
		l, _ := parse(live)
		for _, c := range l.CPUs() {
			want[key("packet_steering_queue_cpu", map[string]string{"device": dev, "queue": queue, "knob": name, "cpu": strconv.Itoa(c)})] = 1
		}
		if wantv == "" {
			return
		}
		p, err := parse(wantv)
		if err != nil {
			t.Fatalf("%s %s %s: planned %q: %v", dev, queue, name, wantv, err)
		}
		for _, c := range p.CPUs() {
			want[key("packet_steering_queue_planned_cpu", map[string]string{"device": dev, "queue": queue, "knob": name, "cpu": strconv.Itoa(c)})] = 1
		}
		want[key("packet_steering_queue_in_sync", map[string]string{"device": dev, "queue": queue, "knob": name})] = b2f(l.Equal(p))
	}
	threadIRQ := func(dev, queue string, e map[string]any) {
		if n, ok := e["napi"].(map[string]any); ok {
			knob(dev, queue, "napi", n["cpus"].(string), n["want_cpus"].(string), cpuset.ParseList)
		}
		if i, ok := e["irq"].(map[string]any); ok {
			knob(dev, queue, "irq", i["cpus"].(string), i["want_cpus"].(string), cpuset.ParseList)
			irq := strconv.Itoa(int(i["irq"].(float64)))
			for cpu, n := range irqCounts[irq] {
				want[key("packet_steering_queue_interrupts_total", map[string]string{"device": dev, "queue": queue, "irq": irq, "cpu": strconv.Itoa(cpu)})] = n
			}
		}
	}
	for _, d := range q["devices"].([]any) {
		dm := d.(map[string]any)
		dev := dm["name"].(string)
		for _, r := range dm["rx"].([]any) {
			rm := r.(map[string]any)
			knob(dev, rm["queue"].(string), "rps", rm["rps_cpus"].(string), rm["want_rps_cpus"].(string), cpuset.ParseMask)
			threadIRQ(dev, rm["queue"].(string), rm)
		}
		for _, x := range dm["tx"].([]any) {
			xm := x.(map[string]any)
			knob(dev, xm["queue"].(string), "xps", xm["xps_cpus"].(string), xm["want_xps_cpus"].(string), cpuset.ParseMask)
			threadIRQ(dev, xm["queue"].(string), xm)
		}
	}
	return want
}

// procInterrupts reads the fixture's /proc/interrupts: irq -> per-CPU counts.
func procInterrupts(t *testing.T, root string) map[string][]float64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "proc/interrupts"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	ncpu := len(strings.Fields(lines[0]))
	out := map[string][]float64{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		irq := strings.TrimSuffix(f[0], ":")
		if _, err := strconv.Atoi(irq); err != nil {
			continue
		}
		var counts []float64
		for _, c := range f[1:] {
			n, err := strconv.ParseUint(c, 10, 64)
			if err != nil || len(counts) == ncpu {
				break
			}
			counts = append(counts, float64(n))
		}
		out[irq] = counts
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// checkSeries compares the packet_steering_* and node_softnet_* series of
// a scrape with want (floating values within a microsecond's worth).
func checkSeries(t *testing.T, got map[string]sample, want map[string]float64) {
	t.Helper()
	have := map[string]float64{}
	for k, s := range got {
		if strings.HasPrefix(s.name, "packet_steering_") || strings.HasPrefix(s.name, "node_softnet_") {
			have[k] = s.value
		}
	}
	for k, v := range want {
		g, ok := have[k]
		switch {
		case !ok:
			t.Errorf("missing %s (want %v)", k, v)
		case math.Abs(g-v) > 1e-6*math.Max(1, math.Abs(v)) && !(strings.HasSuffix(k, "_timestamp_seconds") && math.Abs(g-v) < 0.01):
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	for k, v := range have {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s %v", k, v)
		}
	}
}

// TestLuaExporterBadCases: whatever happens to the daemon, the scrape
// succeeds (node_scrape_collector_success 1, promtool passes) with the
// softnet counters and packet_steering_up 0, or, for replies of the wrong
// shape, up 1 and only what decodes.
func TestLuaExporterBadCases(t *testing.T) {
	requireMonitoring(t, "lua5.1", "promtool", "unshare")
	malformedStatus := `{"mode": 7, "configured": "auto", "platform": [1, 2], "in_sync": "yes",
		"last_apply": {"time": "yesterday", "changed": "many", "failed": null},
		"hints": [1, {"id": 5}, {"id": "ok-hint"}], "config_errors": {"a": 1}, "cpus": "none",
		"adaptive": {"moves": "x"}, "totals": {"since": 5, "applies": "x", "changed": 3}}`
	malformedQueues := `{"devices": [7, {"name": "eth0", "rx": [{"queue": "rx-0", "rps_cpus": "zz", "want_rps_cpus": "2",
		"napi": {"cpus": "3-1", "want_cpus": 4}, "irq": {"irq": "sixty", "cpus": "0", "want_cpus": "0-1"}}, "junk"], "tx": 5}]}`
	var refused atomic.Int32 // status calls with an argument the fake refused
	tests := []struct {
		name  string
		setup func(t *testing.T, w *world)
		up    float64
		check func(t *testing.T, got map[string]sample)
	}{
		{"object missing", func(t *testing.T, w *world) {}, 0, nil},
		{"daemon stopped", func(t *testing.T, w *world) { w.startDaemon(t); w.stopDaemon() }, 0, nil},
		{"no ubusd", func(t *testing.T, w *world) { w.broker.Close(); os.Remove(w.sock) }, 0, nil},
		{"slow daemon", func(t *testing.T, w *world) {
			never := func(ctx context.Context, _ *ubus.Request) ([]ubus.Attr, error) {
				select {
				case <-ctx.Done():
				case <-time.After(30 * time.Second):
				}
				return nil, ctx.Err()
			}
			w.fakeObject(t, never, never)
		}, 0, nil},
		{"status error", func(t *testing.T, w *world) {
			fail := func(context.Context, *ubus.Request) ([]ubus.Attr, error) { return nil, ubus.StatusUnknownError }
			w.fakeObject(t, fail, fail)
		}, 0, nil},
		{"error after a reply", func(t *testing.T, w *world) {
			// As the daemon answers a failed call: {"error": ...}, then
			// UNKNOWN_ERROR; the CLI prints the reply and exits 9.
			errReply := func(context.Context, *ubus.Request) ([]ubus.Attr, error) {
				return []ubus.Attr{ubus.String("error", "read /sys: input/output error"), ubus.String("mode", "auto")}, ubus.StatusUnknownError
			}
			w.fakeObject(t, errReply, errReply)
		}, 0, nil},
		{"status refuses queues", func(t *testing.T, w *world) {
			// An older daemon: status takes no argument (INVALID_ARGUMENT
			// for one); the collector asks status alone, then get_queues.
			w.fakeObject(t, refusingStatus(t, &refused), jsonReply(t, `{"devices": [{"name": "eth0", "rx": [{"queue": "rx-0", "rps_cpus": "2", "want_rps_cpus": "2"}], "tx": []}]}`))
		}, 1, func(t *testing.T, got map[string]sample) {
			if n := refused.Load(); n != 1 {
				t.Errorf("status with an argument asked %d times, want 1 (then status alone)", n)
			}
			want := map[string]float64{
				`packet_steering_in_sync`:   1,
				`packet_steering_queues_up`: 1,
				`packet_steering_queue_in_sync{device="eth0",knob="rps",queue="rx-0"}`: 1,
			}
			for k, v := range want {
				if s, ok := got[k]; !ok || s.value != v {
					t.Errorf("%s = %v (present %v), want %v", k, s.value, ok, v)
				}
			}
		}},
		{"malformed replies", func(t *testing.T, w *world) {
			w.fakeObject(t, jsonReply(t, malformedStatus), jsonReply(t, malformedQueues))
		}, 1, func(t *testing.T, got map[string]sample) {
			for _, k := range []string{"packet_steering_in_sync", "packet_steering_last_apply_timestamp_seconds", "packet_steering_last_apply_changed", "packet_steering_flows",
				"packet_steering_applies_total", "packet_steering_totals_since_timestamp_seconds", "packet_steering_writes_failed_total"} {
				if s, ok := got[k]; ok {
					t.Errorf("%s %v from a reply of the wrong type", k, s.value)
				}
			}
			want := map[string]float64{
				`packet_steering_hint{id="ok-hint"}`:  1,
				`packet_steering_config_errors`:       0,
				`packet_steering_queues_up`:           1,
				`packet_steering_knobs_changed_total`: 3,
				`packet_steering_queue_planned_cpu{cpu="1",device="eth0",knob="rps",queue="rx-0"}`: 1,
				`packet_steering_queue_in_sync{device="eth0",knob="rps",queue="rx-0"}`:             0,
				`packet_steering_queue_cpu{cpu="0",device="eth0",knob="irq",queue="rx-0"}`:         1,
				`packet_steering_queue_in_sync{device="eth0",knob="irq",queue="rx-0"}`:             0,
			}
			for k, v := range want {
				if s, ok := got[k]; !ok || s.value != v {
					t.Errorf("%s = %v (present %v), want %v", k, s.value, ok, v)
				}
			}
			if n := len(family(got, "packet_steering_queue_interrupts_total")); n != 0 {
				t.Errorf("%d interrupt series for an irq that is not a number", n)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "", preset)
			tc.setup(t, w)
			text, took := scrapeLua(t, w, ubusStandIn(t, w.sock))
			t.Logf("%s: scrape took %v", tc.name, took)
			promtoolCheck(t, text)
			got := parseScrape(t, text)
			if s := got["packet_steering_up"]; s.value != tc.up {
				t.Errorf("packet_steering_up = %v, want %v", s.value, tc.up)
			}
			if v := got[`node_scrape_collector_success{collector="packet_steering"}`].value; v != 1 {
				t.Errorf("node_scrape_collector_success = %v", v)
			}
			if n := len(family(got, "node_softnet_processed_total")); n != 4 {
				t.Errorf("%d node_softnet_processed_total series, want 4 (softnet needs no daemon)", n)
			}
			if tc.up == 0 {
				for k := range got {
					if strings.HasPrefix(k, "packet_steering_") && k != "packet_steering_up" {
						t.Errorf("%s written without an answer", k)
					}
				}
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// refusingStatus is the status of a daemon before status took queues: an
// argument is INVALID_ARGUMENT (counted in n); without, a short status.
func refusingStatus(t *testing.T, n *atomic.Int32) ubus.Handler {
	good := jsonReply(t, `{"mode": "auto", "in_sync": true}`)
	return func(ctx context.Context, req *ubus.Request) ([]ubus.Attr, error) {
		if len(req.Args) > 0 {
			n.Add(1)
			return nil, ubus.StatusInvalidArgument
		}
		return good(ctx, req)
	}
}

// TestSoftnetWidths: the 9-, 11- and 13-column forms of softnet_stat (old
// kernels, up to 5.9, 5.10 on) give the series of the columns present;
// without the CPU id column cpu is the row number.
func TestSoftnetWidths(t *testing.T) {
	requireMonitoring(t, "lua5.1", "unshare")
	rows := map[int][]string{
		9:  {"00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000003", "00000020 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000"},
		11: {"00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000003 00000004 00000005", "00000020 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000"},
		13: {"00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000003 00000004 00000005 00000006 00000000", "00000020 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000002"},
	}
	for width, lines := range rows {
		t.Run(strconv.Itoa(width), func(t *testing.T) {
			w := newWorld(t, "", preset)
			if err := os.WriteFile(filepath.Join(w.root, "proc/net/softnet_stat"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			text, _ := scrapeLua(t, w, ubusStandIn(t, w.sock))
			got := parseScrape(t, text)
			second := "1"
			if width == 13 {
				second = "2" // the CPU id column: CPU 1 offline
			}
			want := map[string]float64{
				`node_softnet_processed_total{cpu="0"}`:              16,
				`node_softnet_processed_total{cpu="` + second + `"}`: 32,
				`node_softnet_dropped_total{cpu="0"}`:                1,
				`node_softnet_times_squeezed_total{cpu="0"}`:         2,
				`node_softnet_cpu_collision_total{cpu="0"}`:          3,
			}
			if width >= 11 {
				want[`node_softnet_received_rps_total{cpu="0"}`] = 4
				want[`node_softnet_flow_limit_count_total{cpu="0"}`] = 5
			}
			if width >= 13 {
				want[`node_softnet_backlog_len{cpu="0"}`] = 6
			}
			have := map[string]float64{}
			for k, s := range got {
				if strings.HasPrefix(s.name, "node_softnet_") && s.labels["cpu"] == "0" || k == `node_softnet_processed_total{cpu="`+second+`"}` {
					have[k] = s.value
				}
			}
			if d := testenv.Diff(want, have); d != "" {
				t.Errorf("softnet series (-want +got):\n%s", d)
			}
		})
	}
}
