package monitoring_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCollectdExec runs Debian's collectd with its exec plugin running the
// project's script (as nobody, as collectd requires) and its csv plugin:
// within a bounded wait every CPU's processed, dropped, time_squeeze,
// rps_received and flow_limit values arrive under packet_steering-cpuN with
// the types luci-app-statistics graphs (packets, derive) and equal the
// fixture's softnet_stat.
func TestCollectdExec(t *testing.T) {
	requireMonitoring(t, "collectd")
	dir, err := os.MkdirTemp("", "pscd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// nobody must reach the script and the fixture.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, dir, preset)
	script, err := os.ReadFile(filepath.Join(top(t), "monitoring/collectd/packet-steering-softnet"))
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "collectd-softnet")
	if err := os.WriteFile(exe, script, 0o755); err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(dir, "csv")
	conf := fmt.Sprintf(`Hostname "router"
Interval 1
BaseDir %q
PIDFile %q
TypesDB "/usr/share/collectd/types.db"
LoadPlugin exec
LoadPlugin csv
<Plugin exec>
	Exec "nobody" %q
</Plugin>
<Plugin csv>
	DataDir %q
	StoreRates false
</Plugin>
`, dir, filepath.Join(dir, "collectd.pid"), exe, csv)
	if err := os.WriteFile(filepath.Join(dir, "collectd.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("collectd", "-f", "-C", filepath.Join(dir, "collectd.conf"))
	cmd.Env = append(os.Environ(), "PACKET_STEERING_ROOT="+w.root)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	raw, err := os.ReadFile(filepath.Join(w.root, "proc/net/softnet_stat"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{}
	for row, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(line)
		cpu := strconv.Itoa(row)
		if len(f) >= 13 {
			n, _ := strconv.ParseUint(f[12], 16, 32)
			cpu = strconv.FormatUint(n, 10)
		}
		for i, name := range map[int]string{0: "packets-processed", 1: "packets-dropped", 2: "derive-time_squeeze", 9: "packets-rps_received", 10: "packets-flow_limit"} {
			v, _ := strconv.ParseUint(f[i], 16, 32)
			want["packet_steering-cpu"+cpu+"/"+name] = v
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := ""
		for id, v := range want {
			got, err := lastCSV(filepath.Join(csv, "router", id))
			if err != nil || got != v {
				missing = fmt.Sprintf("%s: %v %v (want %d)", id, got, err, v)
				break
			}
		}
		if missing == "" {
			t.Logf("collectd wrote all %d values", len(want))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s\ncollectd:\n%s", missing, tail(out.String()))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// lastCSV is the last value of the csv plugin's file for an identifier
// (<dir>/<plugin-instance>/<type-instance>-<date>).
func lastCSV(prefix string) (uint64, error) {
	files, _ := filepath.Glob(prefix + "-*")
	if len(files) == 0 {
		return 0, fmt.Errorf("no file %s-*", prefix)
	}
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		return 0, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	f := strings.Split(lines[len(lines)-1], ",")
	if len(f) != 2 {
		return 0, fmt.Errorf("line %q", lines[len(lines)-1])
	}
	v, err := strconv.ParseFloat(f[1], 64)
	return uint64(v), err
}
