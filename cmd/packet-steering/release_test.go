package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// TestReleaseCommand: after auto on the ipq807x fixture (XPS per queue, the
// EDMA IRQs and NAPI threads pinned), release puts XPS to 0, the IRQs to
// default_smp_affinity and the threads on all CPUs, and leaves RPS alone.
func TestReleaseCommand(t *testing.T) {
	root := planRoot(t, "ipq807x")
	if err := os.WriteFile(filepath.Join(root, "proc/irq/default_smp_affinity"), []byte("f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "apply", "--root", root); code != 0 {
		t.Fatalf("apply: %s", errs)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read("sys/class/net/eth0/queues/tx-1/xps_cpus"); got != "2" {
		t.Fatalf("after apply: eth0 tx-1 xps %q, want 2", got)
	}
	rpsBefore := read("sys/class/net/eth0/queues/rx-1/rps_cpus")

	code, out, errs := runCLI(t, "release", "--root", root, "--json")
	if code != 0 {
		t.Fatalf("release: exit %d: %s", code, errs)
	}
	var res steering.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	kinds := map[plan.ActionKind]int{}
	for _, a := range res.Changed {
		kinds[a.Kind]++
	}
	if kinds[plan.KindXPSCPUs] == 0 || kinds[plan.KindIRQAffinity] == 0 || kinds[plan.KindNAPIAffinity] == 0 ||
		kinds[plan.KindRPSCPUs] != 0 || kinds[plan.KindRPSFlowCnt] != 0 {
		t.Errorf("release changed %v", kinds)
	}
	for q := 0; q < 4; q++ {
		if got := read("sys/class/net/eth0/queues/tx-" + string(rune('0'+q)) + "/xps_cpus"); got != "0" {
			t.Errorf("tx-%d xps %q, want 0", q, got)
		}
	}
	if got := read("proc/irq/61/smp_affinity"); got != "f" {
		t.Errorf("irq 61 %q, want f (default_smp_affinity)", got)
	}
	if got := read("sys/class/net/eth0/queues/rx-1/rps_cpus"); got != rpsBefore {
		t.Errorf("rps changed: %q -> %q", rpsBefore, got)
	}
	// A second release changes nothing.
	if code, out, _ := runCLI(t, "release", "--root", root); code != 0 || !strings.Contains(out, " 0 changed") {
		t.Errorf("second release: exit %d\n%s", code, out)
	}
}

// TestReleaseSockFlowsFromEarlierFlows: an RFS table that an earlier flows
// setting sized (rps_sock_flow_entries 512, flows now 0, so no plan of the
// settings in force has the sysctl) goes back to 0 on release too; found on
// the OpenWrt 23.05 image by make test-openwrt (LuCI's steering_flows 128,
// then 0, then opkg remove left 512).
func TestReleaseSockFlowsFromEarlierFlows(t *testing.T) {
	root := planRoot(t, "ipq807x")
	sock := filepath.Join(root, "proc/sys/net/core/rps_sock_flow_entries")
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sock, []byte("512\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "release", "--root", root); code != 0 {
		t.Fatalf("release: exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(sock)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "0" {
		t.Errorf("rps_sock_flow_entries %q after release, want 0", got)
	}
	// Nothing to release a second time.
	if code, out, _ := runCLI(t, "release", "--root", root); code != 0 || !strings.Contains(out, " 0 changed") {
		t.Errorf("second release: exit %d\n%s", code, out)
	}
}
