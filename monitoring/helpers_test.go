package monitoring_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/platform/fixture"
)

// requireMonitoring skips unless make test-monitoring asked for these tests
// (PACKET_STEERING_MONITORING=1); then the tools they need must be there.
func requireMonitoring(t *testing.T, tools ...string) {
	t.Helper()
	if os.Getenv("PACKET_STEERING_MONITORING") != "1" {
		t.Skip("set PACKET_STEERING_MONITORING=1 (make test-monitoring) to run the exporter, Prometheus and collectd tests")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the monitoring tests need root (a private mount namespace for the exporter's fixed paths, chroot)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run scripts/deps.sh monitoring", tool)
		}
	}
}

// top is the repository's top directory.
func top(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// shared is ../shared beside the checkout (PACKET_STEERING_SHARED overrides).
func shared(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("PACKET_STEERING_SHARED"); d != "" {
		return d
	}
	d := filepath.Join(top(t), "..", "shared")
	if _, err := os.Stat(d); err != nil {
		// A git worktree: beside the main checkout.
		if out, err := exec.Command("git", "-C", top(t), "rev-parse", "--path-format=absolute", "--git-common-dir").Output(); err == nil {
			d = filepath.Join(filepath.Dir(filepath.Dir(strings.TrimSpace(string(out)))), "shared")
		}
	}
	return d
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// TestMain removes the binary that binary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary builds cmd/packet-steering once per test run.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ps-monitoring-bin")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "packet-steering")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/packet-steering")
		cmd.Dir = top(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// world is a fixture root with a ubus broker and, once started, the daemon
// serving packet_steering on it.
type world struct {
	root, sock string
	broker     *ubustest.Broker
	daemon     *exec.Cmd
	daemonOut  *bytes.Buffer
	fake       *ubus.Conn // fakeObject's connection
}

// newWorld builds preset's fixture root at dir/root and a broker at
// dir/ubus.sock (dir: a fresh temporary directory when "").
func newWorld(t *testing.T, dir, preset string) *world {
	t.Helper()
	if dir == "" {
		var err error
		// Unix socket paths are limited to 108 bytes.
		dir, err = os.MkdirTemp("", "psmon")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	spec, ok := fixture.Preset(preset)
	if !ok {
		t.Fatalf("no preset %q", preset)
	}
	w := &world{root: filepath.Join(dir, "root"), sock: filepath.Join(dir, "ubus.sock")}
	if err := fixture.Build(w.root, spec); err != nil {
		t.Fatal(err)
	}
	b, err := ubustest.Listen(w.sock)
	if err != nil {
		t.Fatal(err)
	}
	w.broker = b
	t.Cleanup(func() { b.Close() })
	return w
}

// startDaemon runs the packet-steering daemon on the world and waits until
// its object answers status.
func (w *world) startDaemon(t *testing.T) {
	t.Helper()
	w.daemonOut = &bytes.Buffer{}
	cmd := exec.Command(binary(t), "daemon", "--socket", w.sock, "--root", w.root, "--log", "stderr")
	cmd.Stdout, cmd.Stderr = w.daemonOut, w.daemonOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.daemon = cmd
	t.Cleanup(w.stopDaemon)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := w.call("status"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not serve status within 20 s:\n%s", w.daemonOut)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopDaemon ends the daemon (SIGTERM) and waits for it.
func (w *world) stopDaemon() {
	if w.daemon == nil {
		return
	}
	w.daemon.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { w.daemon.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		w.daemon.Process.Kill()
		<-done
	}
	w.daemon = nil
}

// call runs `packet-steering call METHOD` against the world's broker and
// decodes the reply.
func (w *world) call(method string) (map[string]any, error) {
	out, err := exec.Command(binPath, "call", "--socket", w.sock, "--timeout", "5", method).Output()
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, err
	}
	return v, nil
}

func (w *world) mustCall(t *testing.T, method string) map[string]any {
	t.Helper()
	v, err := w.call(method)
	if err != nil {
		t.Fatalf("call %s: %v", method, err)
	}
	return v
}

// fakeObject registers an object packet_steering on the world's broker whose
// status and get_queues run the handlers given (a stand-in for a daemon that
// is slow or answers nonsense).
func (w *world) fakeObject(t *testing.T, status, queues ubus.Handler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ubus.Dial(ctx, w.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	obj := &ubus.Object{Path: "packet_steering", Methods: []ubus.Method{
		{Name: "status", Handler: status},
		{Name: "get_queues", Args: []ubus.ArgSig{{Name: "device", Type: ubus.TypeString}}, Handler: queues},
	}}
	if err := c.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	w.fake = c
}

// stopFake takes the fake object off the broker (its connection closes).
func (w *world) stopFake(t *testing.T) {
	t.Helper()
	if w.fake != nil {
		w.fake.Close()
		w.fake = nil
	}
	// The broker drops the object when it sees the connection go.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := w.call("status"); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake object is still on the broker 5 s after its connection closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// jsonReply is a handler answering the JSON object given.
func jsonReply(t *testing.T, js string) ubus.Handler {
	attrs, err := ubus.AttrsFromJSON([]byte(js))
	if err != nil {
		t.Fatalf("reply %s: %v", js, err)
	}
	return func(context.Context, *ubus.Request) ([]ubus.Attr, error) { return attrs, nil }
}

// ubusStandIn writes, into a new directory for PATH, a `ubus` command for
// the host (which has no ubus CLI): `ubus [-t S] call OBJECT METHOD [JSON]`
// as `packet-steering call`, which keeps the CLI's output and exit codes;
// an object other than packet_steering is "Not found" (4), as from the CLI.
func ubusStandIn(t *testing.T, sock string) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
t=30
while [ $# -gt 0 ]; do
	case $1 in
	-t) t=$2; shift 2 ;;
	-s) shift 2 ;;
	*) break ;;
	esac
done
[ "$1" = call ] || { echo "usage: ubus [-t S] call OBJECT METHOD [JSON]" >&2; exit 254; }
[ "$2" = packet_steering ] || { echo "Command failed: Not found" >&2; exit 4; }
shift 2
exec ` + binary(t) + ` call -s ` + sock + ` -t "$t" "$@"
`
	if err := os.WriteFile(filepath.Join(dir, "ubus"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// luaExporter returns the command running OpenWrt's
// prometheus-node-exporter-lua, unchanged, with the project's collector as
// its only collector: in a private mount namespace an overlay on /usr/lib
// gets /usr/lib/lua/prometheus-collectors/packet_steering.lua (the path the
// exporter lists), and LUA_PATH adds /usr/lib/lua/?.lua as OpenWrt's Lua
// has it. With args it runs them (the HTTP stand-in) instead of the
// exporter's command-line scrape.
func luaExporter(t *testing.T, w *world, pathDir string, args ...string) *exec.Cmd {
	t.Helper()
	ov := t.TempDir()
	exporter := filepath.Join(shared(t), "tools/prometheus-node-exporter/prometheus-node-exporter-lua/files/usr/bin/prometheus-node-exporter-lua")
	if _, err := os.Stat(exporter); err != nil {
		t.Fatalf("the exporter: %v", err)
	}
	collector := filepath.Join(top(t), "monitoring/lua/packet_steering.lua")
	run := `exec lua5.1 "$EXPORTER"`
	if len(args) > 0 {
		run = `exec "$@"`
	}
	script := `set -e
mkdir -p "$OV/u" "$OV/w"
mount -t overlay overlay -o lowerdir=/usr/lib,upperdir="$OV/u",workdir="$OV/w" /usr/lib
mkdir -p /usr/lib/lua/prometheus-collectors
cp "$COLLECTOR" /usr/lib/lua/prometheus-collectors/packet_steering.lua
` + run
	cmd := exec.Command("unshare", append([]string{"-m", "--propagation", "private", "sh", "-c", script, "sh"}, args...)...)
	cmd.Env = append(os.Environ(),
		"OV="+ov, "EXPORTER="+exporter, "COLLECTOR="+collector,
		"PATH="+pathDir+":"+os.Getenv("PATH"),
		"LUA_PATH=/usr/lib/lua/?.lua;;",
		"PACKET_STEERING_ROOT="+w.root)
	return cmd
}

// scrapeLua runs one command-line scrape of the Lua exporter within 20 s
// and returns its output and how long it took.
func scrapeLua(t *testing.T, w *world, pathDir string) (string, time.Duration) {
	t.Helper()
	cmd := luaExporter(t, w, pathDir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exporter: %v\n%s", err, errb.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the exporter did not finish its scrape within 20 s")
	}
	if errb.Len() > 0 {
		t.Logf("exporter stderr: %s", errb.String())
	}
	return out.String(), time.Since(start)
}

// promtoolCheck runs promtool check metrics on a scrape: it must parse, and
// the only lint findings allowed are the exporter's own families without
// help text (prometheus-node-exporter-lua's metric() writes none).
func promtoolCheck(t *testing.T, scrape string) {
	t.Helper()
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" || line == "node_scrape_collector_duration_seconds no help text" || line == "node_scrape_collector_success no help text" {
			continue
		}
		t.Errorf("promtool check metrics: %s", line)
	}
	if code != 0 && code != 3 { // 3: lint findings only
		t.Errorf("promtool check metrics exited %d:\n%s", code, out)
	}
}

// sample is one line of the text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$`)
var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseScrape reads the samples of a scrape, keyed by series (name and
// sorted labels).
func parseScrape(t *testing.T, text string) map[string]sample {
	t.Helper()
	got := map[string]sample{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("not a sample line: %q", line)
			continue
		}
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			t.Errorf("value of %q: %v", line, err)
			continue
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelRE.FindAllStringSubmatch(m[3], -1) {
			s.labels[l[1]] = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\n`, "\n").Replace(l[2])
		}
		k := key(s.name, s.labels)
		if _, dup := got[k]; dup {
			t.Errorf("series %s twice", k)
		}
		got[k] = s
	}
	return got
}

// key names a series: name{a="1",b="2"} with sorted labels.
func key(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	ks := make([]string, 0, len(labels))
	for k := range labels {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = k + `="` + labels[k] + `"`
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// family returns the series of one family, by key.
func family(got map[string]sample, name string) map[string]float64 {
	f := map[string]float64{}
	for k, s := range got {
		if s.name == name {
			f[k] = s.value
		}
	}
	return f
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
