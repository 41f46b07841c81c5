package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"golang.org/x/sys/unix"
)

// The testbed: three namespaces made by the test, client - router - server,
// joined by veth pairs with 4 queues and threaded NAPI, forwarding on the
// router, addresses from 198.18.0.0/15 only. iperf3 -s runs in the server
// namespace; tune runs in the router namespace (a re-executed test binary
// under `ip netns exec`, so /sys shows the router), with root "/" and an
// overlay on /etc, private to that process's mount namespace, so its UCI
// config lives in a temp dir (and tmpfs on /run/lock and
// /var/run/packet-steering, see privateEtc).
const (
	tbRouterClient = "198.18.20.1"
	tbClient       = "198.18.20.2"
	tbRouterServer = "198.18.20.5"
	tbServer       = "198.18.20.6"
	tbPort         = "5201"
)

func TestTestbed(t *testing.T) {
	if netnstest.IsChild(t) {
		testbedRouter(t)
		return
	}
	netnstest.Skip(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		testenv.Skipf(t, "iperf3 not installed")
	}
	testenv.Short(t, "kernel testbed")
	b := newBed(t, "tg", bedAddrs{tbRouterClient, tbClient, tbRouterServer, tbServer})
	b.startIperfServers(t, tbServer, tbPort)
	out := b.router.RunChild(t, map[string]string{
		"TB_DEVS":      b.routerIn + "," + b.routerOut,
		"TB_CLIENT_NS": b.client.Name,
	})
	t.Log(out)
}

// testbedRouter runs inside the router namespace.
func testbedRouter(t *testing.T) {
	devs := strings.Split(os.Getenv("TB_DEVS"), ",")
	clientNS := os.Getenv("TB_CLIENT_NS")
	if len(devs) != 2 || clientNS == "" {
		t.Fatalf("child environment incomplete: TB_DEVS=%q TB_CLIENT_NS=%q", os.Getenv("TB_DEVS"), clientNS)
	}
	privateEtc(t)
	// The config names both router ends, so every mode manages them (the
	// stock rule skips devices without a bus device, like veth).
	cfg := fmt.Sprintf("config globals 'globals'\n\toption mode 'auto'\n\nconfig device\n\toption name '%s'\n\nconfig device\n\toption name '%s'\n", devs[0], devs[1])
	if err := os.WriteFile("/etc/config/packet_steering", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// A starting state that no candidate holds, so a missed restore shows.
	writeSys(t, devs[0], "queues/rx-1/rps_cpus", "1")
	writeSys(t, devs[1], "queues/rx-2/rps_cpus", "2")
	writeSys(t, devs[1], "queues/rx-3/rps_flow_cnt", "16")
	pids, err := netnstest.NAPIThreads(devs[0], 4)
	if err != nil {
		t.Fatal(err)
	}
	var one unix.CPUSet
	one.Set(1)
	if err := unix.SchedSetaffinity(pids[0], &one); err != nil {
		t.Fatalf("pin napi thread %d: %v", pids[0], err)
	}
	before := steeringState(t, devs)
	t.Logf("steering before: %v", before)

	// 1. The built-in iperf3 driver, TCP both ways between the router and
	// the server, generated candidates: the four modes and RPS variants.
	o := tbOptions(t, tbPort)
	o.Seconds, o.Runs, o.Settle, o.Bidir = 1, 3, 500*time.Millisecond, true
	o.Devices, o.MaxConfigs, o.MaxDuration = strings.Join(devs, ","), 10, 2*time.Minute
	rep, table, took := runTune(t, context.Background(), o)
	t.Logf("sweep 1 took %s\n%+v\n%s", took.Round(time.Second), o, table)
	if took > 2*time.Minute {
		t.Errorf("sweep took %s, want under 2 minutes", took)
	}
	checkReport(t, rep, 4, false)
	for _, r := range rep.Results {
		if r.Retransmits == nil {
			t.Errorf("%s: no TCP retransmits", r.Candidate.Name)
		}
	}
	if after := steeringState(t, devs); !sameState(t, before, after) {
		t.Errorf("steering not restored after sweep 1")
	}

	// 2. Forwarded UDP both ways, client <-> server through the router, by a
	// --load command run in the client namespace; ranked by loss.
	load := fmt.Sprintf("ip netns exec %s iperf3 -c \"$PS_TUNE_TARGET\" -p %s -u -b 300M -l 1200 --bidir -t 1 -J", clientNS, tbPort)
	cands := fmt.Sprintf("off;auto;%s:2/%s:1;%s:1/%s:2", devs[0], devs[1], devs[0], devs[1])
	o = tbOptions(t, tbPort)
	o.LoadCmd, o.LoadTime, o.Runs, o.Settle = load, 1700*time.Millisecond, 2, 500*time.Millisecond
	o.Candidates, o.Metric, o.MaxDuration = cands, "loss", 2*time.Minute
	rep, table, took = runTune(t, context.Background(), o)
	t.Logf("sweep 2 took %s\n%+v\n%s", took.Round(time.Second), o, table)
	checkReport(t, rep, 4, true)
	if after := steeringState(t, devs); !sameState(t, before, after) {
		t.Errorf("steering not restored after sweep 2")
	}

	// 3. Ctrl-C in the middle: the context ends during the second
	// candidate; the state is restored all the same.
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	o = tbOptions(t, tbPort)
	o.Seconds, o.Runs, o.Settle = 1, 3, 200*time.Millisecond
	o.Candidates, o.JSON = "off;"+devs[0]+":2;auto", true
	err = o.Run(ctx, &out, &errb)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled sweep: err = %v, want deadline exceeded\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "restoring the original state") {
		t.Errorf("cancelled sweep did not restore:\n%s", errb.String())
	}
	if after := steeringState(t, devs); !sameState(t, before, after) {
		t.Errorf("steering not restored after the cancelled sweep")
	}

	// 4. --save: the winner is written to UCI (custom mode, device
	// sections) and applied after the restore.
	winner := devs[0] + ":2/" + devs[1] + ":2"
	o = tbOptions(t, tbPort)
	o.Seconds, o.Runs, o.Settle, o.Candidates, o.Save = 1, 1, 0, winner, true
	rep, _, _ = runTune(t, context.Background(), o)
	if rep.Recommendation.Candidate != winner {
		t.Fatalf("recommendation %+v", rep.Recommendation)
	}
	saved, err := os.ReadFile("/etc/config/packet_steering")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"option mode 'custom'", "option name '" + devs[0] + "'", "option rps_cpus '2'"} {
		if !strings.Contains(string(saved), want) {
			t.Errorf("saved config lacks %q:\n%s", want, saved)
		}
	}
	if got := readSys(t, devs[1], "queues/rx-0/rps_cpus"); !cpuset.SameMask(got, "2") {
		t.Errorf("after --save %s rx-0 rps_cpus = %q, want 2", devs[1], got)
	}
}

// privateEtc puts an overlay on /etc whose upper layer is a temp dir, and a
// tmpfs on /run/lock. Both are mounts in this process's own mount namespace
// (ip netns exec made it, with slave propagation), so nothing reaches the
// host's /etc or /run/lock.
func privateEtc(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("overlay", "/etc", "overlay", 0, "lowerdir=/etc,upperdir="+upper+",workdir="+work); err != nil {
		testenv.Skipf(t, "cannot overlay /etc in the child's mount namespace: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount("/etc", unix.MNT_DETACH) })
	if err := os.MkdirAll("/etc/config", 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat("/run/lock"); err == nil && fi.IsDir() {
		if err := unix.Mount("tmpfs", "/run/lock", "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("tmpfs on /run/lock: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount("/run/lock", unix.MNT_DETACH) })
	}
	// The engine on "/" keeps its runtime files (apply state, the
	// adaptive state) under /var/run/packet-steering: a tmpfs there, so
	// that nothing of the bed's is left in the machine's own /var/run,
	// also when the run is killed.
	const runDir = "/var/run/packet-steering"
	created := false
	if _, err := os.Stat(runDir); os.IsNotExist(err) {
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			t.Fatal(err)
		}
		created = true
	}
	if err := unix.Mount("tmpfs", runDir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("tmpfs on %s: %v", runDir, err)
	}
	t.Cleanup(func() {
		_ = unix.Unmount(runDir, unix.MNT_DETACH)
		if created {
			_ = os.Remove(runDir)
		}
	})
}

// tbOptions are the options every test-bed sweep starts from: load to the
// server's iperf3 on port.
func tbOptions(t *testing.T, port string) Options {
	t.Helper()
	o := DefaultOptions()
	o.Target = tbServer
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("port %q: %v", port, err)
	}
	o.Port = p
	return o
}

func runTune(t *testing.T, ctx context.Context, o Options) (*report, string, time.Duration) {
	t.Helper()
	var out, errb bytes.Buffer
	start := time.Now()
	o.JSON = true
	err := o.Run(ctx, &out, &errb)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("tune %+v: %v\nstderr:\n%s", o, err, errb.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("tune --json output: %v\n%s", err, out.String())
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("progress:\n%s", errb.String())
	return &rep, table.String(), took
}

// checkReport asserts that every candidate was measured with every metric.
func checkReport(t *testing.T, rep *report, minCands int, udp bool) {
	t.Helper()
	if !rep.Complete || !rep.Restore.Verified || rep.Restore.Error != "" {
		t.Errorf("complete %v restore %+v", rep.Complete, rep.Restore)
	}
	if len(rep.Results) < minCands {
		t.Errorf("%d candidates, want at least %d", len(rep.Results), minCands)
	}
	if rep.Recommendation.Candidate == "" {
		t.Errorf("no recommendation: %+v", rep.Recommendation)
	}
	for _, r := range rep.Results {
		name := r.Candidate.Name
		if r.Error != "" || len(r.Runs) != rep.Runs {
			t.Errorf("%s: error %q, %d runs of %d", name, r.Error, len(r.Runs), rep.Runs)
			continue
		}
		if r.Throughput.N != rep.Runs || r.Throughput.Min <= 0 {
			t.Errorf("%s: throughput %+v", name, r.Throughput)
		}
		if udp && r.LossPercent == nil {
			t.Errorf("%s: no UDP loss", name)
		}
		if len(r.CPUs) < 2 {
			t.Errorf("%s: per-CPU counters for %d CPUs", name, len(r.CPUs))
			continue
		}
		var processed, netrx float64
		for _, c := range r.CPUs {
			processed += c.Processed.Median
			netrx += c.NetRX.Median
			if c.SoftirqMS.N != rep.Runs || c.Dropped.N != rep.Runs || c.TimeSqueeze.N != rep.Runs || c.RPSReceived.N != rep.Runs {
				t.Errorf("%s cpu %d: a counter was not summarised: %+v", name, c.CPU, c)
			}
		}
		if processed == 0 || netrx == 0 {
			t.Errorf("%s: load left no trace in softnet (%v) or NET_RX (%v)", name, processed, netrx)
		}
	}
}

func sysPath(dev, rel string) string { return filepath.Join("/sys/class/net", dev, rel) }

func writeSys(t *testing.T, dev, rel, v string) {
	t.Helper()
	if err := os.WriteFile(sysPath(dev, rel), []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readSys(t *testing.T, dev, rel string) string {
	t.Helper()
	b, err := os.ReadFile(sysPath(dev, rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// steeringState reads every knob tune may touch on the devices: rps_cpus
// and rps_flow_cnt per rx queue, xps_cpus per tx queue, the NAPI threads'
// affinity, and rps_sock_flow_entries where it exists.
func steeringState(t *testing.T, devs []string) map[string]string {
	t.Helper()
	st := map[string]string{}
	for _, d := range devs {
		for _, pat := range []string{"queues/rx-*/rps_cpus", "queues/rx-*/rps_flow_cnt", "queues/tx-*/xps_cpus"} {
			files, err := filepath.Glob(sysPath(d, pat))
			if err != nil || len(files) == 0 {
				t.Fatalf("no %s on %s", pat, d)
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					st[f] = "error: " + err.Error()
					continue
				}
				st[f] = strings.TrimSpace(string(b))
			}
		}
		pids, err := netnstest.NAPIThreads(d, 4)
		if err != nil {
			t.Fatal(err)
		}
		for i, pid := range pids {
			st[fmt.Sprintf("napi/%s #%d (pid %d)", d, i, pid)] = affinityList(t, pid)
		}
	}
	// rps_sock_flow_entries is global (init_net only): absent in a namespace.
	if b, err := os.ReadFile("/proc/sys/net/core/rps_sock_flow_entries"); err == nil {
		st["rps_sock_flow_entries"] = strings.TrimSpace(string(b))
	}
	return st
}

// affinityList is the CPUs thread pid may run on, as "0,1".
func affinityList(t *testing.T, pid int) string {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		t.Fatalf("affinity of %d: %v", pid, err)
	}
	var cpus []string
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, fmt.Sprint(c))
		}
	}
	return strings.Join(cpus, ",")
}

func sameState(t *testing.T, before, after map[string]string) bool {
	t.Helper()
	ok := len(before) == len(after)
	keys := make([]string, 0, len(before))
	for k := range before {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if after[k] != before[k] {
			t.Errorf("%s: before %q, after %q", k, before[k], after[k])
			ok = false
		}
	}
	return ok
}
