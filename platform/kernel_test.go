package platform

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestRealKernelVeth reads the real kernel inside a fresh network namespace
// holding one veth pair with 4 rx/4 tx queues, GRO on and threaded NAPI:
// each veth must show 4 rx and 4 tx queues, kind virtual, threaded, and 4
// NAPI kernel threads whose Cpus_allowed_list matches sched_getaffinity.
// One thread is first pinned to the last CPU so the check is not trivially
// "all CPUs".
func TestRealKernelVeth(t *testing.T) {
	if netnstest.IsChild(t) {
		kernelChild(t)
		return
	}
	testenv.Short(t, "kernel test")
	ns := netnstest.New(t, "pa")
	// Unique names: NAPI threads are visible host-wide, and other tests
	// may create veths at the same time.
	a := fmt.Sprintf("pa%da", os.Getpid()%100000)
	b := fmt.Sprintf("pa%db", os.Getpid()%100000)
	ns.AddVeth(t, netnstest.Veth{Name: a, Peer: b, Queues: 4, Threaded: true,
		Addr: "198.18.9.1/30", PeerAddr: "198.18.9.2/30"})
	pids, err := netnstest.NAPIThreads(a, 4)
	if err != nil || len(pids) != 4 {
		t.Fatalf("NAPI threads of %s: %v %v", a, pids, err)
	}
	last := runtime.NumCPU() - 1
	var set unix.CPUSet
	set.Set(last)
	if err := unix.SchedSetaffinity(pids[0], &set); err != nil {
		t.Fatalf("pin napi thread %d (ours): %v", pids[0], err)
	}
	out := ns.RunChild(t, map[string]string{
		"PA_VETHS":  a + "," + b,
		"PA_PINNED": fmt.Sprintf("%d:%d", pids[0], last),
	})
	t.Logf("child:\n%s", out)
}

func kernelChild(t *testing.T) {
	a, b, ok := strings.Cut(os.Getenv("PA_VETHS"), ",")
	if !ok {
		t.Fatal("PA_VETHS not set")
	}
	var pinnedPID, pinnedCPU int
	if _, err := fmt.Sscanf(os.Getenv("PA_PINNED"), "%d:%d", &pinnedPID, &pinnedCPU); err != nil {
		t.Fatal(err)
	}
	s, err := Read(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.CPUs) == 0 || len(s.Softnet) == 0 || len(s.IRQs) == 0 {
		t.Errorf("host basics missing: %d cpus %d softnet %d irqs", len(s.CPUs), len(s.Softnet), len(s.IRQs))
	}
	names := map[string]bool{}
	for _, d := range s.Devices {
		names[d.Name] = true
	}
	if !reflect.DeepEqual(names, map[string]bool{"lo": true, a: true, b: true}) {
		t.Fatalf("devices in the namespace: %v (sysfs not of this namespace?)", names)
	}
	for _, name := range []string{a, b} {
		d := devByName(s, name)
		if d.Kind != KindVirtual || !d.Threaded || d.Driver != "" || d.OperState != "up" {
			t.Errorf("%s = %+v, want virtual, threaded, up, no driver", name, d)
		}
		if len(d.RxQueues) != 4 || len(d.TxQueues) != 4 {
			t.Errorf("%s: %d rx %d tx queues, want 4/4", name, len(d.RxQueues), len(d.TxQueues))
		}
		for i, q := range d.RxQueues {
			if q.Index != i {
				t.Errorf("%s rx order %+v", name, d.RxQueues)
			}
			if _, err := cpuset.ParseMask(q.RPSCPUs); err != nil {
				t.Errorf("%s %s rps_cpus %q: %v", name, q.Name, q.RPSCPUs, err)
			}
		}
		for _, q := range d.TxQueues {
			if _, err := cpuset.ParseMask(q.XPSCPUs); err != nil {
				t.Errorf("%s %s xps_cpus %q: %v", name, q.Name, q.XPSCPUs, err)
			}
		}
		var threads []NAPIThread
		for _, th := range s.NAPIThreads {
			if th.Owner == name {
				threads = append(threads, th)
			}
		}
		if len(threads) != 4 {
			t.Errorf("%s: %d NAPI threads %+v, want 4", name, len(threads), threads)
		}
		for _, th := range threads {
			// veth adds only rx NAPIs (veth.c veth_napi_add): no thread
			// may be taken for a tx-completion one.
			if th.Device != name || th.NAPIID <= 0 || th.Direction != DirRX {
				t.Errorf("thread %+v: want device %s, a napi id and direction rx", th, name)
			}
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(th.PID, &set); err != nil {
				t.Errorf("sched_getaffinity(%d): %v", th.PID, err)
				continue
			}
			var want []int
			for c := 0; c < len(set)*64; c++ {
				if set.IsSet(c) {
					want = append(want, c)
				}
			}
			got, err := cpuset.ParseList(th.CPUs)
			if err != nil || !reflect.DeepEqual(got.CPUs(), want) {
				t.Errorf("thread %d (%s) cpus %q, kernel says %v", th.PID, th.Name, th.CPUs, want)
			}
			if th.PID == pinnedPID && th.CPUs != strconv.Itoa(pinnedCPU) {
				t.Errorf("pinned thread %d cpus %q, want %d", th.PID, th.CPUs, pinnedCPU)
			}
		}
	}
	// proc/interrupts is a multi-record seq file that a reader gets in
	// several short reads; every row must be there.
	fh, err := os.Open("/proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := parseInterrupts(fh)
	fh.Close()
	if len(want) != len(s.IRQs) {
		t.Errorf("%d IRQs read, os.Open+parse gives %d", len(s.IRQs), len(want))
	}
	online := 0
	for _, c := range s.CPUs {
		if c.Online {
			online++
		}
	}
	if len(s.Softnet) != online {
		t.Errorf("%d softnet rows for %d online CPUs", len(s.Softnet), online)
	}
	t.Logf("threads: %+v", s.NAPIThreads)
	for _, g := range s.Gaps {
		t.Logf("gap on this machine: %s: %s", g.Path, g.Error)
	}
}
