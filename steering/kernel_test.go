package steering

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"golang.org/x/sys/unix"
)

// kernelRootEnv passes the directory that the kernel test's child turns into
// its root.
const kernelRootEnv = "STEERING_KERNEL_ROOT"

// The veths of the kernel test: names no host uses, so that the NAPI threads
// (visible host-wide in /proc) are ours alone.
var kernelVeths = []netnstest.Veth{
	{Name: "c2s0", Peer: "c2p0", Queues: 4, Threaded: true, Addr: "198.18.20.1/30", PeerAddr: "198.18.20.2/30"},
	{Name: "c2s1", Peer: "c2p1", Queues: 4, Threaded: true, Addr: "198.18.20.5/30", PeerAddr: "198.18.20.6/30"},
}

// TestKernelApply applies real modes to real veths with threaded NAPI: in a
// network namespace of its own, in a child process whose root is a private
// directory with the namespace's /sys and the host's /proc bound in, so that
// the engine runs with root "/" (sched_setaffinity, real sysfs) while its
// config and lock files stay in that directory.
func TestKernelApply(t *testing.T) {
	if netnstest.IsChild(t) {
		kernelChild(t)
		return
	}
	testenv.Short(t, "kernel test")
	ns := netnstest.New(t, "c2")
	for _, v := range kernelVeths {
		ns.AddVeth(t, v)
		if pids, err := netnstest.NAPIThreads(v.Name, v.Queues); err != nil || len(pids) < v.Queues {
			t.Fatalf("NAPI threads of %s: %v %v", v.Name, pids, err)
		}
	}
	root := t.TempDir()
	out := ns.RunChild(t, map[string]string{kernelRootEnv: root})
	t.Log(out)
}

// kernelChild runs inside the namespace (see TestKernelApply).
func kernelChild(t *testing.T) {
	root := os.Getenv(kernelRootEnv)
	if root == "" {
		t.Fatal("no root directory passed")
	}
	var devices strings.Builder
	for _, v := range kernelVeths {
		fmt.Fprintf(&devices, "\nconfig device\n\toption name '%s'\n\toption rps_cpus '1'\n\toption napi_cpus '1'\n", v.Name)
	}
	testenv.WriteTree(t, root, map[string]string{
		"etc/config/network":         networkConfig,
		"etc/config/firewall":        "config defaults\n\toption input 'REJECT'\n",
		"etc/config/packet_steering": "config globals 'globals'\n\toption mode 'auto'\n" + devices.String(),
		"var/lock/.keep":             "",
	})
	for _, d := range []string{"sys", "proc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		// `ip netns exec` gave this process a private mount namespace
		// (slave to the host's) and a /sys of the network namespace.
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
	// net.core.rps_sock_flow_entries is global (init_net only): it must not
	// be visible here, or flows would change the host.
	flows := 100
	if _, err := os.Stat("/proc/sys/net/core/rps_sock_flow_entries"); err == nil {
		flows = 0
		t.Log("rps_sock_flow_entries is visible in this namespace: testing with flows 0")
	}

	ctx := context.Background()
	e := NewEngine("/")
	for _, step := range []struct {
		mode  plan.Mode
		flows int
	}{{plan.ModeLegacy, 0}, {plan.ModeOff, 0}, {plan.ModeAuto, flows}, {plan.ModeCustom, 0}, {plan.ModeLegacy, 0}} {
		res, err := e.SetMode(ctx, SetModeRequest{Mode: step.mode, Flows: intp(step.flows), Persist: true, Reason: "kernel test"})
		if err != nil {
			t.Fatalf("set_mode %s: %v", step.mode, err)
		}
		if len(res.Failed) != 0 {
			t.Fatalf("set_mode %s failed: %+v", step.mode, res.Failed)
		}
		t.Logf("%s: %d changed, %d unchanged, %d skipped", step.mode, len(res.Changed), res.Unchanged, len(res.Skipped))
		checkKernelState(t, e, step.mode)

		again, err := e.Apply(ctx, ApplyRequest{Reason: "again"})
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Changed) != 0 || len(again.Failed) != 0 {
			t.Fatalf("%s: second apply changed %v, failed %v", step.mode, again.Changed, again.Failed)
		}
		st, err := e.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.InSync || st.Mode != step.mode {
			t.Fatalf("%s: status mode %s in sync %v", step.mode, st.Mode, st.InSync)
		}
	}
}

// checkKernelState reads the kernel's own files and affinities back and
// compares them with the plan for mode.
func checkKernelState(t *testing.T, e *Engine, mode plan.Mode) {
	t.Helper()
	snap, p, err := e.Plan(context.Background(), plan.PlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != mode {
		t.Fatalf("plan mode %s, want %s", p.Mode, mode)
	}
	managed := map[string]int{}
	for _, a := range p.Actions {
		switch a.Kind {
		case plan.KindRPSCPUs:
			b, err := os.ReadFile("/sys/class/net/" + a.Device + "/queues/" + a.Queue + "/rps_cpus")
			if err != nil {
				t.Fatal(err)
			}
			if !cpuset.SameMask(string(b), a.Value) {
				t.Errorf("%s: %s/%s rps_cpus is %q, plan says %q", mode, a.Device, a.Queue, strings.TrimSpace(string(b)), a.Value)
			}
			managed[a.Device]++
		case plan.KindRPSFlowCnt:
			b, err := os.ReadFile("/sys/class/net/" + a.Device + "/queues/" + a.Queue + "/rps_flow_cnt")
			if err != nil {
				t.Fatal(err)
			}
			if !plan.SameValue(a.Kind, strings.TrimSpace(string(b)), a.Value) {
				t.Errorf("%s: %s/%s rps_flow_cnt is %q, plan says %q", mode, a.Device, a.Queue, strings.TrimSpace(string(b)), a.Value)
			}
		case plan.KindNAPIAffinity:
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(a.PID, &set); err != nil {
				t.Fatalf("sched_getaffinity %d: %v", a.PID, err)
			}
			if got := cpuSetList(&set); !cpuset.SameList(got, a.Value) {
				t.Errorf("%s: %s (pid %d) runs on %s, plan says %s", mode, a.Thread, a.PID, got, a.Value)
			}
			managed[plan.PairQueues(snap).ActionDevice(a)]++
		}
	}
	for _, v := range kernelVeths {
		if managed[v.Name] < v.Queues {
			t.Errorf("%s: only %d knobs of %s checked; the plan must manage the configured veths", mode, managed[v.Name], v.Name)
		}
	}
	// veth adds one NAPI per rx queue and none for transmit (veth.c
	// veth_napi_add), so every thread is an rx thread: rx-i pairs with
	// the i-th NAPI id, and there is no tx thread. In auto (rss-per-cpu:
	// each veth has at least one rx queue per CPU here) the kernel must
	// run rx-i's thread on CPU i mod n.
	pair := plan.PairQueues(snap)
	for _, v := range kernelVeths {
		dp := pair.Device(v.Name)
		if len(dp.TxThreads) != 0 || len(dp.RxThreads) != v.Queues {
			t.Errorf("%s: %d rx and %d tx threads, want %d and 0", v.Name, len(dp.RxThreads), len(dp.TxThreads), v.Queues)
			continue
		}
		for i, q := range dp.Rx {
			if q.Thread == nil || q.Thread.Direction != platform.DirRX || (i > 0 && q.Thread.NAPIID <= dp.Rx[i-1].Thread.NAPIID) {
				t.Errorf("%s rx-%d paired with %+v", v.Name, i, q.Thread)
				continue
			}
			if mode != plan.ModeAuto || len(snap.CPUs) > v.Queues {
				continue
			}
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(q.Thread.PID, &set); err != nil {
				t.Fatalf("sched_getaffinity %d: %v", q.Thread.PID, err)
			}
			if got, want := cpuSetList(&set), strconv.Itoa(i%len(snap.CPUs)); got != want {
				t.Errorf("auto: %s rx-%d's thread %s runs on %s, want %s", v.Name, i, q.Thread.Name, got, want)
			}
		}
	}
	if mode == plan.ModeOff {
		for _, v := range kernelVeths {
			for q := 0; q < v.Queues; q++ {
				b, _ := os.ReadFile(fmt.Sprintf("/sys/class/net/%s/queues/rx-%d/rps_cpus", v.Name, q))
				if !cpuset.SameMask(string(b), "0") {
					t.Errorf("off: %s rx-%d rps_cpus %q", v.Name, q, b)
				}
			}
		}
	}
	if mode == plan.ModeCustom {
		for _, v := range kernelVeths {
			b, _ := os.ReadFile("/sys/class/net/" + v.Name + "/queues/rx-0/rps_cpus")
			if !cpuset.SameMask(string(b), "1") {
				t.Errorf("custom: %s rx-0 rps_cpus %q, want the override 1", v.Name, b)
			}
		}
	}
}
