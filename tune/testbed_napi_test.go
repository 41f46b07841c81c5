package tune

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/genetlink"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/platform"
)

// Addresses of TestTestbedNAPI's bed (198.18.0.0/15 only).
const (
	tnRouterClient = "198.18.22.1"
	tnClient       = "198.18.22.2"
	tnRouterServer = "198.18.22.5"
	tnServer       = "198.18.22.6"
)

// TestTestbedNAPI sweeps the per-NAPI knobs (--napi) on the testbed's
// router end towards the server on the host's kernel: auto and the six
// defer-hard-irqs x gro-flush-timeout settings, TCP both ways, each
// candidate's per-NAPI knobs written through netlink; the table shows the
// throughput against the interrupts and NET_RX runs; afterwards every
// NAPI holds what it held before (a starting value no candidate sets).
// A kernel without napi-set skips.
func TestTestbedNAPI(t *testing.T) {
	if netnstest.IsChild(t) {
		testbedNAPIRouter(t)
		return
	}
	netnstest.Skip(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		testenv.Skipf(t, "iperf3 not installed")
	}
	testenv.Short(t, "kernel testbed")
	b := newBed(t, "tn", bedAddrs{tnRouterClient, tnClient, tnRouterServer, tnServer})
	b.startIperfServers(t, tnServer, tbPort)
	t.Log(b.router.RunChild(t, map[string]string{"TB_DEVS": b.routerIn + "," + b.routerOut}))
}

// napiKnobState is every NAPI of dev as napi-get states it, in id order.
func napiKnobState(t *testing.T, nd *genetlink.Netdev, dev string) string {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/" + dev + "/ifindex")
	if err != nil {
		t.Fatal(err)
	}
	var ifindex uint32
	fmt.Sscan(string(b), &ifindex)
	napis, err := nd.NAPIs(context.Background(), ifindex)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(napis, func(i, j int) bool { return napis[i].ID < napis[j].ID })
	var parts []string
	for _, n := range napis {
		if n.Config.DeferHardIRQs == nil || n.Config.GROFlushTimeout == nil {
			t.Fatalf("NAPI %d reports no config on a kernel with napi-set", n.ID)
		}
		parts = append(parts, fmt.Sprintf("%d:%d/%d", n.ID, *n.Config.DeferHardIRQs, *n.Config.GROFlushTimeout))
	}
	return strings.Join(parts, " ")
}

func testbedNAPIRouter(t *testing.T) {
	devs := strings.Split(os.Getenv("TB_DEVS"), ",")
	if len(devs) != 2 {
		t.Fatalf("TB_DEVS=%q", os.Getenv("TB_DEVS"))
	}
	ctx := context.Background()
	c, err := genetlink.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nd, err := genetlink.OpenNetdev(ctx, c)
	if err != nil || !nd.Supports("napi-set") {
		testenv.Skipf(t, "kernel without napi-set: %v", err)
	}
	privateEtc(t)
	cfg := fmt.Sprintf("config globals 'globals'\n\toption mode 'auto'\n\nconfig device\n\toption name '%s'\n\nconfig device\n\toption name '%s'\n", devs[0], devs[1])
	if err := os.WriteFile("/etc/config/packet_steering", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// A starting state no candidate holds: the first NAPI of the router's
	// server-side end at defer-hard-irqs 1, gro-flush-timeout 1000 ns.
	dev := devs[1]
	napis, err := nd.NAPIs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := 0
	for _, n := range napis {
		if b, _ := os.ReadFile("/sys/class/net/" + dev + "/ifindex"); strings.TrimSpace(string(b)) == fmt.Sprint(n.Ifindex) && (first == 0 || int(n.ID) < first) {
			first = int(n.ID)
		}
	}
	if _, err := platform.SetNAPIKnobs(ctx, first, platform.NAPIKnobs{DeferHardIRQs: 1, GROFlushTimeoutNS: 1000}); err != nil {
		t.Fatalf("start state: %v", err)
	}
	before := napiKnobState(t, nd, dev)
	t.Logf("per-NAPI knobs of %s before: %s", dev, before)

	o := tbOptions(t, tbPort)
	o.Target = tnServer
	o.NAPI, o.Devices, o.MaxConfigs = true, dev, 7
	o.Seconds, o.Runs, o.Settle, o.Bidir, o.MaxDuration = 1, 2, 300*time.Millisecond, true, 3*time.Minute
	rep, table, took := runTune(t, ctx, o)
	t.Logf("--napi sweep took %s\n%s", took.Round(time.Second), table)
	checkReport(t, rep, 7, false)
	if len(rep.Results) != 7 {
		t.Errorf("%d candidates, want auto and 6 per-NAPI settings", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Interrupts == nil {
			t.Errorf("%s: no interrupt count", r.Candidate.Name)
		}
	}
	if after := napiKnobState(t, nd, dev); after != before {
		t.Errorf("per-NAPI knobs not restored: %s, want %s", after, before)
	}
}
