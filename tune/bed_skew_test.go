package tune

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// The skewed-RSS bed (docs/platforms.md, "Test beds"; `make beds`): tune's
// test bed (client -> router -> server namespaces, veth pairs with 4
// queues and threaded NAPI, forwarding on the router) with every flow on
// one rx queue of the router's input, as RSS leaves it on the boards of
// openwrt/openwrt#13493: the client veth's XPS sends everything on tx-0,
// and a veth delivers into the peer's rx queue of the same number. The
// router walks a firewall of SKEW_BED_RULES rules that do not match (as in
// the adaptive bed), so that its forwarding, not the senders, limits the
// rate on this machine. A warm-up gives rx-0's NAPI thread the CPU time
// the skew rule needs as evidence (plan/rule_irqfixed.go: at least 1000
// ticks and 80% of the device's); then `packet-steering tune` (the same
// code, run in the router namespace) measures the stock rule (legacy),
// auto, off and every RPS mask of the input veth with the rest as auto
// places it, by the UDP throughput the server receives, and the test
// prints it as ratios to auto's. It checks, functionally, that auto
// spread the skewed queue; it asserts nothing about the figures.
const (
	skRouterClient = "198.18.24.1"
	skClient       = "198.18.24.2"
	skRouterServer = "198.18.24.5"
	skServer       = "198.18.24.6"
	skPort         = "5401"
)

func TestBedSkew(t *testing.T) {
	if netnstest.IsChild(t) {
		skewBedRouter(t)
		return
	}
	if os.Getenv("PACKET_STEERING_BEDS") == "" {
		t.Skip("set PACKET_STEERING_BEDS=1 (make beds) to run the test beds")
	}
	netnstest.Skip(t)
	for _, tool := range []string{"iperf3", "taskset", "ethtool", "iptables-legacy-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the skew bed needs %s (scripts/deps.sh installs it): %v", tool, err)
		}
	}
	b := newBed(t, "sk", bedAddrs{skRouterClient, skClient, skRouterServer, skServer})
	// veth hands packets to the peer's NAPI thread only when GRO may take
	// them (see adaptiveBed): the client sends without TSO.
	b.client.MustExec(t, "ethtool", "-K", b.clientDev, "tso", "off")
	// Every CPU's packets on tx-0, so all of them arrive on the router's
	// rx-0.
	var xps strings.Builder
	for q := 0; q < 4; q++ {
		mask := "0"
		if q == 0 {
			mask = cpuset.Range(0, cpuCount(t)-1).Mask()
		}
		fmt.Fprintf(&xps, "echo %s > /sys/class/net/%s/queues/tx-%d/xps_cpus\n", mask, b.clientDev, q)
	}
	b.client.MustExec(t, "sh", "-ec", xps.String())
	rules := envInt("SKEW_BED_RULES", 50000)
	var fw strings.Builder
	fw.WriteString("*filter\n:FORWARD ACCEPT [0:0]\n")
	for i := 0; i < rules; i++ {
		fmt.Fprintf(&fw, "-A FORWARD -s 198.19.%d.%d/32 -p udp -j DROP\n", i/256%256, i%256)
	}
	fw.WriteString("COMMIT\n")
	fwFile := filepath.Join(t.TempDir(), "rules")
	if err := os.WriteFile(fwFile, []byte(fw.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	b.router.MustExec(t, "iptables-legacy-restore", fwFile)
	b.startIperfServers(t, skServer, skPort)
	out := b.router.RunChild(t, map[string]string{
		"SK_DEVS":      b.routerIn + "," + b.routerOut,
		"SK_CLIENT_NS": b.client.Name,
		"SK_RULES":     strconv.Itoa(rules),
	})
	t.Log(out)
}

// cpuCount is the number of online CPUs.
func cpuCount(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	s, err := cpuset.ParseList(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("online CPUs %q: %v", b, err)
	}
	return s.Len()
}

// skewBedRouter runs inside the router namespace.
func skewBedRouter(t *testing.T) {
	devs := strings.Split(os.Getenv("SK_DEVS"), ",")
	clientNS := os.Getenv("SK_CLIENT_NS")
	if len(devs) != 2 || clientNS == "" {
		t.Fatalf("child environment incomplete: SK_DEVS=%q SK_CLIENT_NS=%q", os.Getenv("SK_DEVS"), clientNS)
	}
	privateEtc(t)
	cfg := fmt.Sprintf("config globals 'globals'\n\toption mode 'auto'\n\nconfig device\n\toption name '%s'\n\nconfig device\n\toption name '%s'\n", devs[0], devs[1])
	if err := os.WriteFile("/etc/config/packet_steering", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs, secs := envInt("SKEW_BED_RUNS", 5), envInt("SKEW_BED_SECONDS", 3)
	rate := os.Getenv("SKEW_BED_RATE")
	if rate == "" {
		rate = "100M"
	}
	load := fmt.Sprintf("ip netns exec %s iperf3 -c \"$PS_TUNE_TARGET\" -p %s -u -b %s -l 1200 -P 4 -t %d -J", clientNS, skPort, rate, secs)

	// Warm-up under the stock rule with RPS off on rx-0 (auto before it has
	// evidence): rx-0's thread does all the forwarding and gathers the
	// ticks the skew rule reads.
	eng := steering.NewEngine("/")
	if _, err := eng.SetMode(ctx, steering.SetModeRequest{Mode: plan.ModeAuto, Reason: "bed"}); err != nil {
		t.Fatal(err)
	}
	coldMask := readSys(t, devs[0], "queues/rx-0/rps_cpus")
	warm := envInt("SKEW_BED_WARMUP", 45)
	wctx, cancel := context.WithTimeout(ctx, time.Duration(warm+30)*time.Second)
	w := exec.CommandContext(wctx, "ip", "netns", "exec", clientNS, "iperf3", "-c", skServer, "-p", skPort, "-u", "-b", rate, "-l", "1200", "-P", "4", "-t", strconv.Itoa(warm), "-J")
	wout, err := w.CombinedOutput()
	cancel()
	if err != nil {
		t.Fatalf("warm-up: %v: %s", err, firstLine(string(wout)))
	}
	ticks := queueTicks(t, eng, devs[0])
	t.Logf("after %d s of warm-up: NAPI thread ticks per rx queue of %s: %v", warm, devs[0], ticks)
	if _, err := eng.SetMode(ctx, steering.SetModeRequest{Mode: plan.ModeAuto, Reason: "bed"}); err != nil {
		t.Fatal(err)
	}
	hotMask := readSys(t, devs[0], "queues/rx-0/rps_cpus")
	t.Logf("auto's rx-0 RPS on %s: %s before the warm-up, %s after", devs[0], coldMask, hotMask)
	if cpuset.SameMask(hotMask, "0") {
		t.Errorf("auto left the skewed rx-0 of %s without RPS after the warm-up (ticks %v)", devs[0], ticks)
	}

	cands := []string{"legacy", "auto", "off"}
	for m := 0; m < 1<<cpuCount(t); m++ {
		cands = append(cands, fmt.Sprintf("%s:%x", devs[0], m))
	}
	o := tbOptions(t, skPort)
	o.Target = skServer
	o.LoadCmd, o.LoadTime, o.Runs, o.Settle = load, time.Duration(secs)*time.Second+time.Second, runs, time.Second
	// In rounds unless SKEW_BED_INTERLEAVE=0: the shared machine's drift
	// then falls on every candidate alike (tune --interleave).
	o.Interleave = envInt("SKEW_BED_INTERLEAVE", 1) != 0
	o.Candidates, o.MaxConfigs, o.MaxDuration = strings.Join(cands, ";"), 64, 20*time.Minute
	rep, table, took := runTune(t, ctx, o)
	t.Logf("sweep took %s\n%s", took.Round(time.Second), table)
	t.Log("\n" + skewSummary(rep, fmt.Sprintf("Skewed-RSS bed: host namespaces, %d CPUs, 4-queue veth with every flow on rx-0, %s firewall rules, iperf3 UDP -P 4 -b %s -l 1200; Mbit/s the server received, median (min-max) of %d runs of %d s%s",
		cpuCount(t), os.Getenv("SK_RULES"), rate, runs, secs, map[bool]string{true: ", interleaved (every candidate once per round)", false: ""}[o.Interleave])))
}

// skewSummary prints each candidate's median and range with its ratio to
// auto's, then auto against the stock rule and the sweep's best.
func skewSummary(rep *report, header string) string {
	var b strings.Builder
	fmt.Fprintln(&b, header)
	var auto, stock, best float64
	bestName := ""
	for _, r := range rep.Results {
		switch r.Candidate.Name {
		case "auto":
			auto = r.Throughput.Median
		case "legacy":
			stock = r.Throughput.Median
		}
		if r.Error == "" && r.Throughput.Median > best {
			best, bestName = r.Throughput.Median, r.Candidate.Name
		}
	}
	ratio := func(a, b float64) string {
		if b <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	fmt.Fprintf(&b, "%-22s %-18s %24s %7s\n", "candidate", "rps", "Mbit/s", "/ auto")
	for _, r := range rep.Results {
		name := r.Candidate.Name
		if r.SameAs != "" {
			name += " (=" + r.SameAs + ")"
		}
		tp := r.Throughput
		fmt.Fprintf(&b, "%-22s %-18s %24s %7s\n", name, strings.Join(r.Masks, " "),
			fmt.Sprintf("%.0f (%.0f-%.0f)", tp.Median/1e6, tp.Min/1e6, tp.Max/1e6), ratio(tp.Median, auto))
	}
	fmt.Fprintf(&b, "auto / stock rule (legacy): %s\n", ratio(auto, stock))
	fmt.Fprintf(&b, "auto / best of the sweep (%s): %s (goal: at least 0.95)\n", bestName, ratio(auto, best))
	return b.String()
}
