package tune

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/steering"
)

// The adaptive comparison bed: tune's test bed (client -> router -> server
// namespaces, veth pairs with 4 queues and threaded NAPI, forwarding on
// the router), with the client steering each UDP flow to one queue of the
// router's input veth: a veth delivers into the peer's rx queue of the
// same number as the tx queue it sent on, so each flow's iperf3 client is
// pinned to one CPU and the client veth's XPS maps that CPU to the wanted
// tx queue (set per phase; the client namespace and its processes are the
// test's own). auto puts rx-0 and rx-2 on CPU 0, rx-1 and rx-3 on CPU 1, so
// the load shifts:
//
//	phase 1  flows on rx-0 and rx-2: both on CPU 0 under auto
//	phase 2  flows on rx-1 and rx-3: both on CPU 1 under auto
//	steady   flows on rx-0 and rx-1: balanced under auto (adaptive must
//	         not move anything)
//
// Strategies: auto; the two static placements that split both phases'
// pairs ({rx-0,rx-1}/{rx-2,rx-3} and {rx-0,rx-3}/{rx-1,rx-2}), the best
// of which is the best static choice in hindsight; adaptive with the
// daemon's default configuration, its loop running through both phases.
// Static placements are deviations applied through the engine (adaptive
// mode without its loop), so every strategy writes through the same code.
//
// It takes minutes and its figures depend on the machine's other load, so
// it runs only when asked (-count=1: the variables are read by the
// re-executed child, which go test's cache does not see):
//
//	PACKET_STEERING_ADAPTIVE_BED=1 go test -count=1 ./tune -run '^TestAdaptiveTestbed$' -v -timeout 40m
//
// with ADAPTIVE_BED_RUNS (default 3), ADAPTIVE_BED_PHASE (seconds per
// phase, default 15), ADAPTIVE_BED_RATE (iperf3 -b per flow, default 100M:
// two such flows need more than one CPU's forwarding on the 2-CPU VM,
// one does not; at 50M nothing saturates there and every strategy
// forwards all of it)
// and ADAPTIVE_BED_RULES (firewall rules, default 15000).
// TestAdaptiveTestbedShort is the short functional version that make test
// runs: one collision, one move, nothing timed.
const (
	abRouterClient = "198.18.22.1"
	abClient       = "198.18.22.2"
	abRouterServer = "198.18.22.5"
	abServer       = "198.18.22.6"
)

// abPorts are the iperf3 servers' ports, one per concurrent flow.
var abPorts = []string{"5301", "5302"}

func TestAdaptiveTestbed(t *testing.T) {
	if netnstest.IsChild(t) {
		adaptiveBedRouter(t, false)
		return
	}
	if os.Getenv("PACKET_STEERING_ADAPTIVE_BED") == "" {
		t.Skip("the adaptive comparison takes minutes: set PACKET_STEERING_ADAPTIVE_BED=1")
	}
	adaptiveBed(t)
}

func TestAdaptiveTestbedShort(t *testing.T) {
	if netnstest.IsChild(t) {
		adaptiveBedRouter(t, true)
		return
	}
	testenv.Short(t, "kernel test bed")
	adaptiveBed(t)
}

// adaptiveBed builds the namespaces and runs the test again inside the
// router's.
func adaptiveBed(t *testing.T) {
	netnstest.Skip(t)
	for _, tool := range []string{"iperf3", "taskset", "ethtool", "iptables-legacy-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	b := newBed(t, "ad", bedAddrs{abRouterClient, abClient, abRouterServer, abServer})
	// veth hands a packet to the peer's NAPI (the thread the steering
	// places) only when GRO may take it (drivers/net/veth.c
	// veth_skb_is_eligible_for_gro): a sender without TSO, or a socket's
	// packet to a receiver with UDP GRO forwarding. Otherwise it goes to
	// the backlog of the sending CPU and no placement matters.
	b.client.MustExec(t, "ethtool", "-K", b.clientDev, "tso", "off")
	// A router's forwarding costs more than a veth's: a firewall of
	// ADAPTIVE_BED_RULES (default 15000) rules that do not match, walked
	// for every forwarded packet in the NAPI thread that received it
	// (iptables-legacy: a linear walk). Without it the senders, not the
	// router, are the bottleneck on this machine.
	rules := envInt("ADAPTIVE_BED_RULES", 15000)
	var fw strings.Builder
	fw.WriteString("*filter\n:FORWARD ACCEPT [0:0]\n")
	for i := 0; i < rules; i++ {
		fmt.Fprintf(&fw, "-A FORWARD -s 198.19.%d.%d/32 -p udp -j DROP\n", i/256, i%256)
	}
	fw.WriteString("COMMIT\n")
	fwFile := filepath.Join(t.TempDir(), "rules")
	if err := os.WriteFile(fwFile, []byte(fw.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	b.router.MustExec(t, "iptables-legacy-restore", fwFile)
	b.startIperfServers(t, abServer, abPorts...)
	out := b.router.RunChild(t, map[string]string{
		"AB_DEVS":       b.routerIn + "," + b.routerOut,
		"AB_CLIENT_NS":  b.client.Name,
		"AB_CLIENT_DEV": b.clientDev,
	})
	t.Log(out)
}

// abFlow is one iperf3 UDP flow's result.
type abFlow struct {
	bps  float64
	loss float64
}

// runFlows runs one iperf3 UDP client per given router rx queue at once,
// from the client namespace, for secs seconds: flow i is pinned to CPU i
// and the client veth's XPS sends CPU i's packets on tx queue queues[i].
func runFlows(ctx context.Context, clientNS, clientDev string, queues []int, rate string, secs int) ([]abFlow, error) {
	if len(queues) > len(abPorts) {
		return nil, fmt.Errorf("%d flows, %d servers", len(queues), len(abPorts))
	}
	var script strings.Builder
	for q := 0; q < 4; q++ {
		mask := 0
		for i, want := range queues {
			if want == q {
				mask |= 1 << i
			}
		}
		fmt.Fprintf(&script, "echo %x > /sys/class/net/%s/queues/tx-%d/xps_cpus\n", mask, clientDev, q)
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", clientNS, "sh", "-ec", script.String()).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("client XPS: %v: %s", err, out)
	}
	out := make([]abFlow, len(queues))
	errs := make([]error, len(queues))
	var wg sync.WaitGroup
	for i := range queues {
		p := abPorts[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, time.Duration(secs+20)*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cctx, "ip", "netns", "exec", clientNS, "taskset", "-c", strconv.Itoa(i), "iperf3", "-c", abServer, "-p", p,
				"-u", "-b", rate, "-l", "1200", "-t", strconv.Itoa(secs), "-J")
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("iperf3 port %s: %v: %s %s", p, err, firstLine(se.String()), firstLine(so.String()))
				return
			}
			m, _, err := parseIperf(so.Bytes())
			if err != nil {
				errs[i] = fmt.Errorf("iperf3 port %s: %w", p, err)
				return
			}
			out[i].bps = m.Throughput
			if m.LossPercent != nil {
				out[i].loss = *m.LossPercent
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// abStrategy is one way to place the queues for a run.
type abStrategy struct {
	name string
	// moves places rx queues (index -> CPU) as deviations from auto; nil
	// for auto itself.
	place    map[int]int
	adaptive bool
}

// abResult collects one strategy's runs.
type abResult struct {
	phase [2][]float64 // Mbit/s of both flows added, per run
	loss  [2][]float64 // the worse flow's loss %, per run
	total []float64
	moves []int
}

func adaptiveBedRouter(t *testing.T, short bool) {
	devs := strings.Split(os.Getenv("AB_DEVS"), ",")
	clientNS, clientDev := os.Getenv("AB_CLIENT_NS"), os.Getenv("AB_CLIENT_DEV")
	if len(devs) != 2 || clientNS == "" || clientDev == "" {
		t.Fatalf("child environment incomplete: AB_DEVS=%q AB_CLIENT_NS=%q", os.Getenv("AB_DEVS"), clientNS)
	}
	privateEtc(t)
	cfg := fmt.Sprintf("config globals 'globals'\n\toption mode 'auto'\n\nconfig device\n\toption name '%s'\n\nconfig device\n\toption name '%s'\n", devs[0], devs[1])
	if err := os.WriteFile("/etc/config/packet_steering", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	eng := steering.NewEngine("/")
	setMode := func(m plan.Mode) {
		t.Helper()
		res, err := eng.SetMode(ctx, steering.SetModeRequest{Mode: m, Reason: "bed"})
		if err != nil || len(res.Failed) > 0 {
			t.Fatalf("set_mode %s: %v %+v", m, err, res)
		}
	}
	setMode(plan.ModeAuto)
	// Check the layout the phases rely on: auto puts rx-i on CPU i%2.
	qs, err := eng.Queues(ctx, devs[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, rx := range qs[0].Rx {
		if rx.NAPI == nil || rx.NAPI.CPUs != strconv.Itoa(i%2) {
			t.Fatalf("%s %s: NAPI thread %+v, want it on CPU %d under auto", devs[0], rx.Queue, rx.NAPI, i%2)
		}
	}
	acfg := adaptive.DefaultConfig()
	runs, phaseSecs, rate := envInt("ADAPTIVE_BED_RUNS", 3), envInt("ADAPTIVE_BED_PHASE", 15), os.Getenv("ADAPTIVE_BED_RATE")
	if rate == "" {
		rate = "100M"
	}
	if short {
		// One collision, long enough for two hot intervals and a move.
		runs, phaseSecs = 1, 10
		acfg.Interval, acfg.MinDwell = time.Second, 5*time.Second
	}

	// place applies a static placement as deviations (adaptive mode, no
	// loop).
	place := func(p map[int]int) {
		t.Helper()
		setMode(plan.ModeAdaptive)
		var moves []adaptive.Move
		for q, cpu := range p {
			moves = append(moves, adaptive.Move{Device: devs[0], Queue: "rx-" + strconv.Itoa(q), Kind: adaptive.UnitNAPI,
				From: q % 2, To: cpu, Home: q % 2, Reason: "static placement"})
		}
		if len(moves) == 0 {
			return
		}
		res, err := eng.Adapt(ctx, moves)
		if err != nil || len(res.Failed) > 0 {
			t.Fatalf("static placement %v: %v %+v", p, err, res)
		}
	}
	// startLoop runs the adaptive loop until the returned stop is
	// called, which returns the moves made.
	startLoop := func() func() []adaptive.Move {
		setMode(plan.ModeAdaptive)
		lctx, cancel := context.WithCancel(ctx)
		var mu sync.Mutex
		var made []adaptive.Move
		done := make(chan error, 1)
		go func() {
			done <- eng.RunAdaptive(lctx, acfg, func(c context.Context, m []adaptive.Move) (*steering.Result, error) {
				mu.Lock()
				made = append(made, m...)
				mu.Unlock()
				t.Logf("adaptive move: %s", adaptive.Reason(m))
				return eng.Adapt(c, m)
			})
		}()
		return func() []adaptive.Move {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("adaptive loop: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			return made
		}
	}
	phases := [2][]int{{0, 2}, {1, 3}}

	if short {
		before := queueTicks(t, eng, devs[0])
		stop := startLoop()
		flows, err := runFlows(ctx, clientNS, clientDev, phases[0], rate, phaseSecs)
		made := stop()
		if err != nil {
			t.Fatal(err)
		}
		if st, err := eng.Status(ctx); err == nil && st.Adaptive != nil && st.Adaptive.Sampling != nil {
			t.Logf("last loads: %+v", st.Adaptive.Sampling.Loads)
		}
		after := queueTicks(t, eng, devs[0])
		var got []uint64
		for q := range after {
			got = append(got, after[q]-before[q])
		}
		t.Logf("phase 1 under adaptive: %.0f + %.0f Mbit/s, NAPI thread ticks per router rx queue %v, moves %v", flows[0].bps/1e6, flows[1].bps/1e6, got, made)
		// The bed: the flows land on rx-0 and rx-2.
		if got[0] < 10 || got[2] < 10 || got[1]+got[3] > (got[0]+got[2])/10 {
			t.Fatalf("flows did not land on rx-0 and rx-2: %v", got)
		}
		// Functional: the loop saw the collision of rx-0 and rx-2 on
		// CPU 0 and moved one of them to CPU 1, through the engine.
		if len(made) == 0 {
			t.Skipf("no move: the collision did not saturate CPU 0 on this machine at %s per flow (a faster machine: raise ADAPTIVE_BED_RATE or ADAPTIVE_BED_RULES)", rate)
		}
		m := made[0]
		if m.Device != devs[0] || (m.Queue != "rx-0" && m.Queue != "rx-2") || m.From != 0 || m.To != 1 || !strings.Contains(m.Reason, "cpu0 saturated") {
			t.Errorf("first move %+v, want rx-0 or rx-2 from CPU 0 to 1 because CPU 0 saturated", m)
		}
		setMode(plan.ModeAuto)
		return
	}

	strategies := []abStrategy{
		{name: "auto"},
		{name: "static rx-0,1|rx-2,3", place: map[int]int{1: 0, 2: 1}},
		{name: "static rx-0,3|rx-1,2", place: map[int]int{3: 0, 2: 1}},
		{name: "adaptive", adaptive: true},
	}
	results := make([]abResult, len(strategies))
	for r := 0; r < runs; r++ {
		for k := range strategies {
			// Rotate the order so that drift in the machine's other load
			// does not always hit the same strategy.
			i := (k + r) % len(strategies)
			s := strategies[i]
			setMode(plan.ModeAuto)
			var stop func() []adaptive.Move
			if s.adaptive {
				stop = startLoop()
			} else if s.place != nil {
				place(s.place)
			}
			time.Sleep(500 * time.Millisecond)
			var total float64
			for ph, ports := range phases {
				flows, err := runFlows(ctx, clientNS, clientDev, ports, rate, phaseSecs)
				if err != nil {
					if stop != nil {
						stop()
					}
					t.Fatal(err)
				}
				sum, worst := 0.0, 0.0
				for _, f := range flows {
					sum += f.bps / 1e6
					worst = max(worst, f.loss)
				}
				results[i].phase[ph] = append(results[i].phase[ph], sum)
				results[i].loss[ph] = append(results[i].loss[ph], worst)
				total += sum
				t.Logf("run %d %s phase %d: %.0f Mbit/s, worst loss %.2f%%", r+1, s.name, ph+1, sum, worst)
			}
			results[i].total = append(results[i].total, total/2)
			if stop != nil {
				results[i].moves = append(results[i].moves, len(stop()))
			}
		}
	}

	// Steady and balanced: flows on rx-0 and rx-1 (CPU 0 and CPU 1 under
	// auto); adaptive must not move anything.
	setMode(plan.ModeAuto)
	stop := startLoop()
	var steadyRuns []float64
	for r := 0; r < runs; r++ {
		flows, err := runFlows(ctx, clientNS, clientDev, []int{0, 1}, rate, phaseSecs)
		if err != nil {
			stop()
			t.Fatal(err)
		}
		steadyRuns = append(steadyRuns, (flows[0].bps+flows[1].bps)/1e6)
	}
	steadyMoves := stop()
	setMode(plan.ModeAuto)

	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "strategy\tphase 1 Mbit/s\tphase 2 Mbit/s\tmean Mbit/s\tloss %% p1\tloss %% p2\tmoves/run\t\n")
	for i, s := range strategies {
		res := results[i]
		mv := "-"
		if s.adaptive {
			mv = fmtInts(res.moves)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.name, medRange(res.phase[0]), medRange(res.phase[1]), medRange(res.total),
			medRange(res.loss[0]), medRange(res.loss[1]), mv)
	}
	fmt.Fprintf(tw, "adaptive, steady balanced (rx-0 + rx-1)\t%s\t\t\t\t\t%d\t\n", medRange(steadyRuns), len(steadyMoves))
	_ = tw.Flush()
	t.Logf("adaptive comparison: %d runs, %d s per phase, %s per flow (iperf3 UDP, 1200-byte datagrams), median (min-max)\n%s", runs, phaseSecs, rate, b.String())
	if len(steadyMoves) > 0 {
		t.Errorf("adaptive moved %d queues while the load was steady and balanced: %v", len(steadyMoves), steadyMoves)
	}
}

// queueTicks reads the CPU time (clock ticks) of each rx queue's NAPI
// thread of a device: where each queue's work ran.
func queueTicks(t *testing.T, eng *steering.Engine, dev string) []uint64 {
	t.Helper()
	qs, err := eng.Queues(context.Background(), dev)
	if err != nil {
		t.Fatal(err)
	}
	var n []uint64
	for _, rx := range qs[0].Rx {
		if rx.NAPI == nil {
			t.Fatalf("%s %s: no NAPI thread", dev, rx.Queue)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", rx.NAPI.PID))
		if err != nil {
			t.Fatal(err)
		}
		v, err := platform.ParseTaskTicks(b)
		if err != nil {
			t.Fatal(err)
		}
		n = append(n, v)
	}
	return n
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func medRange(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	f := func(v float64) string {
		if v < 10 {
			return strconv.FormatFloat(v, 'f', 2, 64)
		}
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return fmt.Sprintf("%s (%s-%s)", f(med), f(s[0]), f(s[len(s)-1]))
}

func fmtInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}
