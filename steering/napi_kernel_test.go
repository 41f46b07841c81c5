package steering

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/genetlink"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"golang.org/x/sys/unix"
)

// napiKernelVeth is the veth of TestKernelNAPIKnobs: threaded NAPI, GRO
// on (veth has NAPI only with GRO), two queues, so two NAPI instances.
var napiKernelVeth = netnstest.Veth{Name: "nk0s", Peer: "nk0p", Queues: 2, Threaded: true,
	Addr: "198.18.21.1/30", PeerAddr: "198.18.21.2/30"}

// TestKernelNAPIKnobs runs the per-NAPI knobs through the product on the
// host's kernel: a custom config with defer_hard_irqs, gro_flush_timeout
// and (6.17+) per-NAPI threaded on a veth in a namespace of its own, the
// engine with root "/" (as TestKernelApply), the values read back with
// napi-get, a second apply that writes nothing, get_queues, and release,
// which puts every knob back to the device's defaults. A kernel without
// napi-set must get the hint and have nothing written.
func TestKernelNAPIKnobs(t *testing.T) {
	if netnstest.IsChild(t) {
		napiKernelChild(t)
		return
	}
	testenv.Short(t, "kernel test")
	ns := netnstest.New(t, "nk")
	ns.AddVeth(t, napiKernelVeth)
	if pids, err := netnstest.NAPIThreads(napiKernelVeth.Name, 2); err != nil || len(pids) < 2 {
		t.Fatalf("NAPI threads of %s: %v %v", napiKernelVeth.Name, pids, err)
	}
	out := ns.RunChild(t, map[string]string{kernelRootEnv: t.TempDir()})
	t.Log(out)
}

// napiState reads the device's NAPIs with napi-get: "id:defer/timeout/threaded" each, in id order.
func napiState(t *testing.T, dev string) ([]genetlink.NAPI, string) {
	t.Helper()
	ctx := context.Background()
	c, err := genetlink.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nd, err := genetlink.OpenNetdev(ctx, c)
	if err != nil {
		testenv.Skipf(t, "no netdev family: %v", err)
	}
	b, err := os.ReadFile("/sys/class/net/" + dev + "/ifindex")
	if err != nil {
		t.Fatal(err)
	}
	var ifindex uint32
	fmt.Sscan(string(b), &ifindex)
	napis, err := nd.NAPIs(ctx, ifindex)
	if err != nil {
		t.Fatalf("napi-get %s: %v", dev, err)
	}
	// The dump lists them newest first (measured on 6.18).
	sort.Slice(napis, func(i, j int) bool { return napis[i].ID < napis[j].ID })
	var parts []string
	for _, n := range napis {
		p := fmt.Sprintf("%d:", n.ID)
		if c := n.Config; c.DeferHardIRQs != nil && c.GROFlushTimeout != nil {
			p += fmt.Sprintf("%d/%d", *c.DeferHardIRQs, *c.GROFlushTimeout)
		} else {
			p += "-/-"
		}
		if n.Config.Threaded != nil {
			p += fmt.Sprintf("/%d", *n.Config.Threaded)
		}
		parts = append(parts, p)
	}
	if !nd.Supports("napi-set") {
		return nil, strings.Join(parts, " ")
	}
	return napis, strings.Join(parts, " ")
}

func napiKernelChild(t *testing.T) {
	root := os.Getenv(kernelRootEnv)
	dev := napiKernelVeth.Name
	before, was := napiState(t, dev)
	if len(before) == 0 {
		// No napi-set: the product must say so and write nothing.
		t.Logf("kernel without napi-set: %s", was)
	}
	threaded := len(before) > 0 && before[0].Config.Threaded != nil
	conf := "config globals 'globals'\n\toption mode 'custom'\n\nconfig device\n\toption name '" + dev + "'\n" +
		"\toption defer_hard_irqs '2'\n\toption gro_flush_timeout '20000'\n\tlist queue_gro_flush_timeout 'rx-1=200000'\n"
	if threaded {
		// rx-1's NAPI back into softirq, rx-0 keeps its thread.
		conf += "\tlist queue_napi_threaded 'rx-1=0'\n"
	}
	testenv.WriteTree(t, root, map[string]string{
		"etc/config/network":         networkConfig,
		"etc/config/firewall":        "config defaults\n\toption input 'REJECT'\n",
		"etc/config/packet_steering": conf,
		"var/lock/.keep":             "",
	})
	for _, d := range []string{"sys", "proc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("/"+d, filepath.Join(root, d), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			t.Fatalf("bind /%s: %v", d, err)
		}
	}
	if err := unix.Chroot(root); err != nil {
		t.Fatalf("chroot: %v", err)
	}
	if err := os.Chdir("/"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e := NewEngine("/")
	res, err := e.Apply(ctx, ApplyRequest{Reason: "kernel test"})
	if err != nil || len(res.Failed) != 0 {
		t.Fatalf("apply: %v %+v", err, res)
	}
	var changed []string
	for _, a := range res.Changed {
		if plan.IsNAPIKnob(a.Kind) {
			changed = append(changed, a.Target()+" "+string(a.Kind)+" "+a.Current+"->"+a.Value)
		}
	}
	_, after := napiState(t, dev)
	t.Logf("napi-get before: %s\napply (%d µs) changed %d per-NAPI knobs: %s\nnapi-get after: %s",
		was, res.DurationUS, len(changed), strings.Join(changed, ", "), after)
	if len(before) == 0 {
		if len(changed) != 0 || after != was {
			t.Fatalf("a kernel without napi-set was written: %v, %s -> %s", changed, was, after)
		}
		st, err := e.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range st.Hints {
			if h.ID == plan.HintNAPIKnobsUnsupported && strings.Contains(h.Text, "not supported by this kernel") {
				return
			}
		}
		t.Fatalf("no %s hint: %+v", plan.HintNAPIKnobsUnsupported, st.Hints)
	}
	if len(before) != 2 {
		t.Fatalf("%d NAPIs of %s, want 2 (one per rx queue, GRO on)", len(before), dev)
	}
	want := fmt.Sprintf("%d:2/20000", before[0].ID)
	if threaded {
		want += fmt.Sprintf("/1 %d:2/200000/0", before[1].ID)
	} else {
		want += fmt.Sprintf(" %d:2/200000", before[1].ID)
	}
	if after != want {
		t.Errorf("napi-get after apply: %s, want %s", after, want)
	}
	if threaded {
		// rx-1's kthread is gone, rx-0's stays.
		if pids, _ := netnstest.NAPIThreads(dev, 0); len(pids) != 1 {
			t.Errorf("napi threads of %s after rx-1 went to softirq: %v, want 1", dev, pids)
		}
	}
	again, err := e.Apply(ctx, ApplyRequest{Reason: "again"})
	if err != nil || len(again.Changed) != 0 || len(again.Failed) != 0 {
		t.Errorf("second apply: %v changed %+v failed %+v", err, again.Changed, again.Failed)
	}
	st, err := e.Status(ctx)
	if err != nil || !st.InSync {
		t.Errorf("status: %v, in sync %v", err, st != nil && st.InSync)
	}
	qs, err := e.Queues(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	if k := qs[0].Rx[1].NAPIKnobs; k == nil || k.GROFlushTimeoutNS != "200000" || k.WantGROFlushTimeoutNS != "200000" || k.DeferHardIRQs != "2" {
		t.Errorf("get_queues %s rx-1: %+v", dev, k)
	} else {
		t.Logf("get_queues %s rx-1: %+v", dev, *k)
	}
	// Release: back to the device's defaults, which are what the NAPIs
	// held before (a fresh veth: 0, 0, threaded as the device file says).
	rel, err := e.Release(ctx, false)
	if err != nil || len(rel.Failed) != 0 {
		t.Fatalf("release: %v %+v", err, rel)
	}
	_, released := napiState(t, dev)
	t.Logf("napi-get after release: %s", released)
	if released != was {
		t.Errorf("after release %s, want the values before %s", released, was)
	}
	if threaded {
		if pids, err := netnstest.NAPIThreads(dev, 2); len(pids) != 2 {
			t.Errorf("napi threads of %s after release: %v %v, want 2", dev, pids, err)
		}
	}
}
