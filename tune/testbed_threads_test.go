package tune

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/steering"
	"golang.org/x/sys/unix"
)

// Addresses of TestTestbedThreads's bed (198.18.0.0/15 only).
const (
	ttRouterClient = "198.18.26.1"
	ttClient       = "198.18.26.2"
	ttRouterServer = "198.18.26.5"
	ttServer       = "198.18.26.6"
)

// TestTestbedThreads sweeps the CPUs of the NAPI threads (--threads) of
// the testbed router's client-side veth on the host's kernel: auto, legacy,
// then the four threads on each CPU and on all CPUs, TCP both ways; each
// candidate's placement is what the kernel reports for the threads while
// it runs, and afterwards every thread is where it was (a starting state
// no candidate holds).
func TestTestbedThreads(t *testing.T) {
	if netnstest.IsChild(t) {
		testbedThreadsRouter(t)
		return
	}
	netnstest.Skip(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		testenv.Skipf(t, "iperf3 not installed")
	}
	testenv.Short(t, "kernel testbed")
	b := newBed(t, "tt", bedAddrs{ttRouterClient, ttClient, ttRouterServer, ttServer})
	b.startIperfServers(t, ttServer, tbPort)
	t.Log(b.router.RunChild(t, map[string]string{"TB_DEVS": b.routerIn + "," + b.routerOut}))
}

// threadAffinities is the cpu list of each NAPI thread of dev, in thread
// order.
func threadAffinities(t *testing.T, dev string) []string {
	t.Helper()
	pids, err := netnstest.NAPIThreads(dev, 4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pid := range pids {
		out = append(out, affinityList(t, pid))
	}
	return out
}

func testbedThreadsRouter(t *testing.T) {
	devs := strings.Split(os.Getenv("TB_DEVS"), ",")
	if len(devs) != 2 {
		t.Fatalf("TB_DEVS=%q", os.Getenv("TB_DEVS"))
	}
	privateEtc(t)
	cfg := fmt.Sprintf("config globals 'globals'\n\toption mode 'auto'\n\nconfig device\n\toption name '%s'\n\nconfig device\n\toption name '%s'\n", devs[0], devs[1])
	if err := os.WriteFile("/etc/config/packet_steering", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ncpu := cpuCount(t)
	if ncpu < 2 {
		testenv.Skipf(t, "one CPU: no thread placement to choose")
	}
	// A starting state no candidate holds: the first thread of the swept
	// device on the last CPU, the others on all.
	dev := devs[0]
	pids, err := netnstest.NAPIThreads(dev, 4)
	if err != nil {
		t.Fatal(err)
	}
	var last unix.CPUSet
	last.Set(ncpu - 1)
	if err := unix.SchedSetaffinity(pids[0], &last); err != nil {
		t.Fatalf("pin napi thread %d: %v", pids[0], err)
	}
	before := steeringState(t, devs)

	o := tbOptions(t, tbPort)
	o.Target = ttServer
	o.Threads, o.Devices, o.MaxConfigs = true, dev, 2+ncpu+1
	o.Seconds, o.Runs, o.Settle, o.Bidir, o.MaxDuration = 1, 2, 300*time.Millisecond, true, 3*time.Minute
	rep, table, took := runTune(t, context.Background(), o)
	t.Logf("--threads sweep took %s\n%s", took.Round(time.Second), table)
	checkReport(t, rep, 2+ncpu+1, false)
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Candidate.Name)
	}
	want := []string{"auto", "legacy"}
	for c := 0; c < ncpu; c++ {
		want = append(want, fmt.Sprintf("%s:threads=%d", dev, c))
	}
	want = append(want, fmt.Sprintf("%s:threads=0-%d", dev, ncpu-1))
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("candidates %v, want %v", names, want)
	}
	if after := steeringState(t, devs); !sameState(t, before, after) {
		t.Errorf("steering not restored after the --threads sweep")
	}

	// One candidate applied as the sweep applies it: the kernel reports
	// every thread on that CPU.
	m := newMachine(steering.NewEngine("/"), steering.NewFSWriter("/"))
	cands := mustCandidates(t, dev+":threads=1")
	if _, err := m.Prepare(context.Background(), cands); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(context.Background(), cands[0]); err != nil {
		t.Fatal(err)
	}
	got := threadAffinities(t, dev)
	if _, err := m.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, cpus := range got {
		if cpus != "1" {
			t.Errorf("%s applied: thread %d of %s on %s, want 1", cands[0].Name, i, dev, cpus)
		}
	}
	if after := steeringState(t, devs); !sameState(t, before, after) {
		t.Errorf("steering not restored after %s", cands[0].Name)
	}
}
