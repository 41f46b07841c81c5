package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/daemon"
	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
)

// loadSim writes the load counters of a fixture root as if the given NAPI
// threads (pid -> fraction of a CPU) and RPS work (rps_cpus file -> fraction
// of a CPU, as softirq time on the mask's lowest CPU) ran, with pps packets
// per second spread over the CPUs.
type loadSim struct {
	root    string
	cpus    int
	start   time.Time
	mu      sync.Mutex
	threads map[int]float64
	softirq map[string]float64
	pps     float64
	stat    map[int][]string // the fields after comm of each thread's stat
	head    map[int]string   // "pid (comm)"
	ticks   map[int]float64  // accumulated thread ticks
	cpuAcc  []struct{ total, idle, softirq, processed float64 }
	last    time.Time
}

func newLoadSim(t *testing.T, root string, cpus int, pids ...int) *loadSim {
	t.Helper()
	s := &loadSim{root: root, cpus: cpus, start: time.Now(), last: time.Now(), threads: map[int]float64{}, softirq: map[string]float64{},
		stat: map[int][]string{}, head: map[int]string{}, ticks: map[int]float64{}}
	s.cpuAcc = make([]struct{ total, idle, softirq, processed float64 }, cpus)
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join(root, "proc", fmt.Sprint(pid), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		i := strings.LastIndexByte(string(b), ')')
		s.head[pid] = string(b[:i+1])
		s.stat[pid] = strings.Fields(string(b[i+1:]))
	}
	return s
}

func (s *loadSim) set(threads map[int]float64, softirq map[string]float64, pps float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.threads, s.softirq, s.pps = threads, softirq, pps
}

// step advances the counters to now and writes them (each file replaced
// by a rename, so a reader never sees half of one).
func (s *loadSim) step(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	dt := now.Sub(s.last).Seconds()
	s.last = now
	busy := make([]float64, s.cpus)
	for pid, l := range s.threads {
		s.ticks[pid] += l * dt * 100
	}
	softirq := map[int]float64{}
	for rel, l := range s.softirq {
		b, err := os.ReadFile(filepath.Join(s.root, rel))
		if err != nil {
			t.Error(err)
			continue
		}
		set, err := cpuset.ParseMask(strings.TrimSpace(string(b)))
		if err != nil || set.IsEmpty() {
			continue
		}
		softirq[set.CPUs()[0]] += l
	}
	var stat, softnet strings.Builder
	net := "NET_RX:"
	hdr := ""
	for c := 0; c < s.cpus; c++ {
		a := &s.cpuAcc[c]
		busy[c] = softirq[c]
		a.total += dt * 100
		a.softirq += softirq[c] * dt * 100
		a.processed += s.pps / float64(s.cpus) * dt
		a.idle += (1 - busy[c]) * dt * 100
		fmt.Fprintf(&stat, "cpu%d 0 0 %d %d 0 0 %d 0 0 0\n", c, uint64(a.total-a.idle-a.softirq), uint64(a.idle), uint64(a.softirq))
		fmt.Fprintf(&softnet, "%08x 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 %08x\n", uint64(a.processed), c)
		hdr += fmt.Sprintf(" CPU%d", c)
		net += fmt.Sprintf(" %d", uint64(a.processed))
	}
	write := func(rel, content string) {
		p := filepath.Join(s.root, rel)
		if err := os.WriteFile(p+".tmp", []byte(content), 0o644); err != nil {
			t.Error(err)
			return
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Error(err)
		}
	}
	write("proc/stat", stat.String())
	write("proc/net/softnet_stat", softnet.String())
	write("proc/softirqs", hdr+"\n"+net+"\n")
	for pid, f := range s.stat {
		f[11] = fmt.Sprint(uint64(s.ticks[pid]))
		write(filepath.Join("proc", fmt.Sprint(pid), "stat"), s.head[pid]+" "+strings.Join(f, " ")+"\n")
	}
}

// The adaptive loop in the daemon: set_mode adaptive starts it; while the
// simulated load saturates CPU 0 (ring 0's thread plus wlan0's RPS work),
// one queue moves, announced as packet_steering.applied with the reason;
// status and get_queues show the deviation; set_mode auto stops the loop
// and puts the auto placement back.
func TestDaemonAdaptiveLoop(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	sim := newLoadSim(t, root, 4, 300, 301, 302, 303)
	sim.set(map[int]float64{300: 0.1, 301: 0.1}, nil, 100)
	sim.step(t)
	_, sock := ubustest.Start(t)
	events := listenApplied(t, sock)

	cfg := adaptive.DefaultConfig()
	cfg.Interval, cfg.MaxIdleInterval, cfg.MinDwell = 100*time.Millisecond, 400*time.Millisecond, 2*time.Second
	log := serveTestDaemon(t, sock, root, cfg)
	waitEvent(t, events) // start

	stopSim := make(chan struct{})
	simDone := make(chan struct{})
	go func() {
		defer close(simDone)
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopSim:
				return
			case <-tk.C:
				sim.step(t)
			}
		}
	}()
	defer func() { close(stopSim); <-simDone }()

	if code, _, errOut := callCmd(t, sock, "set_mode", `{"mode":"adaptive","persist":false}`); code != 0 {
		t.Fatalf("set_mode adaptive: %s", errOut)
	}
	// adaptive starts from the auto plan: nothing changed, no event.
	if !strings.Contains(log.String(), "adaptive loop started") {
		t.Fatalf("loop not started:\n%s", log.String())
	}
	// Idle: no traffic, no moves, quick samples backing off.
	waitSampling(t, sock, 15*time.Second, log.String)
	time.Sleep(600 * time.Millisecond)
	st, out := statusReply(t, sock)
	ad, _ := st["adaptive"].(map[string]any)
	if st["mode"] != "adaptive" || ad == nil {
		t.Fatalf("status without adaptive: %s", out)
	}
	smp := ad["sampling"].(map[string]any)
	if smp["running"] != true || smp["active"] != false || len(ad["moves"].([]any)) != 0 {
		t.Errorf("idle sampling %v moves %v", smp, ad["moves"])
	}

	// CPU 0 saturated: ring 0's thread 50%, wlan0's RPS softirq 45%.
	sim.set(map[int]float64{300: 0.5, 301: 0.05, 302: 0.05, 303: 0.05}, map[string]float64{"sys/class/net/wlan0/queues/rx-0/rps_cpus": 0.45}, 100000)
	ev := waitEventFor(t, events, 5*time.Second, func() string {
		_, out, _ := callCmd(t, sock, "status")
		return out + "\n" + log.String()
	})
	reason, _ := ev["reason"].(string)
	if !strings.HasPrefix(reason, "adaptive: ") || !strings.Contains(reason, "cpu0 saturated (net load ") || ev["mode"] != "adaptive" {
		t.Errorf("move event %v", ev)
	}
	st, out = statusReply(t, sock)
	ad = st["adaptive"].(map[string]any)
	devs := ad["deviations"].([]any)
	if len(devs) != 1 || len(ad["moves"].([]any)) != 1 {
		t.Fatalf("after the move: %s", out)
	}
	dev := devs[0].(map[string]any)
	if dev["auto_cpu"] != float64(0) || dev["cpu"] == float64(0) || !strings.Contains(dev["reason"].(string), "saturated") {
		t.Errorf("deviation %v (%T %T)", dev, dev["auto_cpu"], dev["cpu"])
	}
	code, out, _ := callCmd(t, sock, "get_queues", fmt.Sprintf(`{"device":"%s"}`, dev["device"]))
	if code != 0 || !strings.Contains(out, `"adaptive"`) || !strings.Contains(out, `"auto_cpu": 0`) {
		t.Errorf("get_queues does not show the deviation: %s", out)
	}
	if !strings.Contains(log.String(), "msg=\"adaptive move\"") {
		t.Errorf("move not logged:\n%s", log.String())
	}

	// Steady afterwards: no more moves for a while.
	select {
	case ev := <-events:
		t.Errorf("second move while steady: %v", ev)
	case <-time.After(time.Second):
	}

	if code, _, errOut := callCmd(t, sock, "set_mode", `{"mode":"auto","persist":false}`); code != 0 {
		t.Fatalf("set_mode auto: %s", errOut)
	}
	if ev := waitEvent(t, events); ev["reason"] != "set_mode auto" || ev["changed"].(int64) == 0 {
		t.Errorf("set_mode auto did not put the auto placement back: %v", ev)
	}
	if !strings.Contains(log.String(), "adaptive loop stopped") {
		t.Errorf("loop not stopped:\n%s", log.String())
	}
	code, out, _ = callCmd(t, sock, "status")
	if code != 0 || strings.Contains(out, `"adaptive"`) {
		t.Errorf("status in auto still shows adaptive: %s", out)
	}
}

func waitEventFor(t *testing.T, ch <-chan map[string]any, d time.Duration, state func() string) map[string]any {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(d):
		t.Fatalf("no packet_steering.applied event within %s; state:\n%s", d, state())
		return nil
	}
}

// runningSampling is status's adaptive.sampling while the loop runs, nil
// (with the reply) while it does not.
func runningSampling(t *testing.T, sock string) (map[string]any, string) {
	t.Helper()
	st, out := statusReply(t, sock)
	ad, _ := st["adaptive"].(map[string]any)
	smp, _ := ad["sampling"].(map[string]any)
	if smp == nil || smp["running"] != true {
		return nil, out
	}
	return smp, out
}

// waitSampling waits up to d for the loop started by set_mode adaptive to
// report itself running: its goroutine does that first, but under make
// test-cross's emulator on a loaded machine that has taken over 500 ms.
// logs is the daemon's output, for the failure.
func waitSampling(t *testing.T, sock string, d time.Duration, logs func() string) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		smp, out := runningSampling(t, sock)
		if smp != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop not running %s after set_mode adaptive: %s\n%s", d, out, logs())
		}
	}
}

// The idle cost of the adaptive mode: a daemon process in mode adaptive on
// a machine without traffic (a fixture whose counters do not move). The
// loop reads only softnet_stat and backs off (2, 4, 8, 16, then every 32
// s); the process uses no measurable CPU. PS_ADAPTIVE_IDLE_SECONDS sets
// the window (default 5; the README's figure is from 60).
func TestDaemonAdaptiveIdleCost(t *testing.T) {
	secs := 5
	if n, err := strconv.Atoi(os.Getenv("PS_ADAPTIVE_IDLE_SECONDS")); err == nil && n > 0 {
		secs = n
	}
	root := fixturetest.Root(t, "demo", nil)
	testenv.WriteTree(t, root, map[string]string{
		"proc/stat":     "cpu0 1 0 1 5 0 0 2 0\ncpu1 1 0 1 5 0 0 2 0\ncpu2 1 0 1 5 0 0 2 0\ncpu3 1 0 1 5 0 0 2 0\n",
		"proc/softirqs": "  CPU0 CPU1 CPU2 CPU3\n NET_RX: 1 2 3 4\n",
	})
	_, sock := ubustest.Start(t)
	d := startDaemonProcess(t, sock, root)
	cmd, stderr := d.cmd, d.stderr
	waitForObject(t, sock, 5*time.Second)
	if code, _, errOut := callCmd(t, sock, "set_mode", `{"mode":"adaptive","persist":false}`); code != 0 {
		t.Fatalf("set_mode adaptive: %s", errOut)
	}
	waitSampling(t, sock, 15*time.Second, stderr.String)
	// Let the call's own work settle.
	time.Sleep(500 * time.Millisecond)
	wakeups := func() float64 {
		smp, out := runningSampling(t, sock)
		if smp == nil {
			t.Fatalf("loop not running: %s\n%s", out, stderr.String())
		}
		return smp["wakeups"].(float64)
	}
	w0 := wakeups()
	// A call arms the idle trimmer (a GC 2 s later): wait it out.
	time.Sleep(2500 * time.Millisecond)
	t0 := cpuTicks(t, cmd.Process.Pid)
	time.Sleep(time.Duration(secs) * time.Second)
	ticks := cpuTicks(t, cmd.Process.Pid) - t0
	w := wakeups() - w0
	t.Logf("adaptive, no traffic, %d s: %d CPU ticks (utime+stime), %.0f loop wake-ups", secs, ticks, w)
	if ticks > 1 {
		if emu := testenv.Emulator(); emu != "" {
			// make test-cross: the ticks are the emulator's own as much.
			t.Logf("not checked under %s: the ticks count the emulator's own work", emu)
		} else {
			t.Errorf("idle adaptive daemon used %d CPU ticks in %d s", ticks, secs)
		}
	}
	// Back-off: 2+4+8+16 s, then one per 32 s; the status calls above
	// are not samples.
	if limit := 4 + float64(secs+3)/32 + 1; w > limit {
		t.Errorf("%.0f wake-ups in %d s without traffic, want at most %.0f", w, secs, limit)
	}
}

// The loop's options come from the `config adaptive` section of UCI: the
// loop starts with them, and a reload after the section changed restarts
// it with the new values (a reload with nothing changed does not). A bad
// value is listed in config_errors and its default used; status shows the
// effective options with their sources.
func TestDaemonAdaptiveOptionsReload(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	conf := filepath.Join(root, "etc/config/packet_steering")
	write := func(adaptive string) {
		t.Helper()
		body := "config globals 'globals'\n\toption mode 'adaptive'\n\nconfig adaptive 'adaptive'\n" + adaptive
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("\toption interval '0.3'\n\toption max_idle_interval '0.6'\n\toption dwell '7'\n")
	_, sock := ubustest.Start(t)
	log := serveTestDaemon(t, sock, root, adaptive.Config{})
	// The start apply started the loop with the section's values.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.String(), "adaptive loop started") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(log.String(), `msg="adaptive loop started" interval=300ms max_idle_interval=600ms dwell=7s max_moves=1`) {
		t.Fatalf("loop start:\n%s", log.String())
	}
	options := func() (map[string]string, []any) {
		t.Helper()
		st, out := statusReply(t, sock)
		ad, _ := st["adaptive"].(map[string]any)
		if ad == nil {
			t.Fatalf("status without adaptive: %s", out)
		}
		got := map[string]string{}
		for _, o := range ad["config"].([]any) {
			m := o.(map[string]any)
			got[m["name"].(string)] = m["value"].(string) + " " + m["source"].(string)
		}
		errs, _ := st["config_errors"].([]any)
		return got, errs
	}
	opts, errs := options()
	if opts["interval"] != "300ms packet_steering" || opts["dwell"] != "7s packet_steering" || opts["high_load"] != "85% default" || len(errs) != 0 {
		t.Errorf("options %v, config errors %v", opts, errs)
	}

	write("\toption interval '0.2'\n\toption max_idle_interval '0.6'\n\toption max_moves 'two'\n")
	if code, _, errOut := callCmd(t, sock, "apply", `{"reason":"reload"}`); code != 0 {
		t.Fatalf("reload: %s", errOut)
	}
	if !strings.Contains(log.String(), `msg="adaptive loop restarting: its options changed"`) ||
		!strings.Contains(log.String(), `msg="adaptive loop started" interval=200ms max_idle_interval=600ms dwell=20s max_moves=1`) {
		t.Fatalf("reload with changed options:\n%s", log.String())
	}
	opts, errs = options()
	if opts["interval"] != "200ms packet_steering" || opts["dwell"] != "20s default" || opts["max_moves"] != "1 default" {
		t.Errorf("options after the reload %v", opts)
	}
	if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]), `packet_steering.adaptive.max_moves: "two" is not a whole number`) {
		t.Errorf("config errors %v", errs)
	}
	if code, _, errOut := callCmd(t, sock, "apply", `{"reason":"reload"}`); code != 0 {
		t.Fatalf("reload: %s", errOut)
	}
	if n := strings.Count(log.String(), "adaptive loop restarting"); n != 1 {
		t.Errorf("%d restarts, want 1 (the unchanged reload restarts nothing):\n%s", n, log.String())
	}
}

// serveTestDaemon serves a daemon for root on the broker at sock until the
// test ends (its error, if any, fails the test) and returns its log, once
// the object is registered. A zero acfg takes the loop's options from UCI.
func serveTestDaemon(t *testing.T, sock, root string, acfg adaptive.Config) *testenv.Buffer {
	t.Helper()
	log := &testenv.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		eng := steering.NewEngine(root)
		done <- daemon.Serve(ctx, daemon.Config{Socket: sock, Engine: eng, Loop: eng, Log: daemon.NewLogger(log, true),
			ConnectWait: 2 * time.Second, DrainWait: 5 * time.Second, Adaptive: acfg})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	waitForObject(t, sock, 5*time.Second)
	return log
}
