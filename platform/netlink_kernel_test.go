package platform

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/genetlink"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestNetlinkKernelVeth asks the running kernel's netdev netlink family
// inside a fresh network namespace holding a 4-queue veth pair with
// threaded NAPI (GRO on, which veth needs for NAPI at all) and a second
// pair with GRO on but not threaded, and checks what it reports against
// sysfs and procfs:
//
//   - queue-get lists exactly the queues under sys/class/net/DEV/queues;
//   - napi-get lists one NAPI per rx queue of each device with GRO, with
//     a PID exactly on the threaded ones, and those PIDs are the
//     napi/DEV-<id> kthreads of /proc with the same NAPI id in the name;
//   - platform.Read, which combines both, records netlink as "ok" with no
//     disagreement, ties every thread to its device as rx, and every NAPI
//     to its device;
//   - a queue's NAPI id, when the driver states one, is a NAPI of the
//     device (veth on 6.18 states none: it does not call
//     netif_queue_set_napi, so its map stays inferred).
//
// A kernel before 6.8 has no queue-get: the test then checks that the
// snapshot says so and the inference stands.
func TestNetlinkKernelVeth(t *testing.T) {
	if netnstest.IsChild(t) {
		netlinkKernelChild(t)
		return
	}
	testenv.Short(t, "kernel test")
	ns := netnstest.New(t, "nl")
	id := os.Getpid() % 100000
	a, b := fmt.Sprintf("nl%da", id), fmt.Sprintf("nl%db", id)
	c, d := fmt.Sprintf("nl%dc", id), fmt.Sprintf("nl%dd", id)
	ns.AddVeth(t, netnstest.Veth{Name: a, Peer: b, Queues: 4, Threaded: true})
	ns.AddVeth(t, netnstest.Veth{Name: c, Peer: d, Queues: 2})
	ns.MustExec(t, "ethtool", "-K", c, "gro", "on")
	for _, dev := range []string{a, b} {
		if pids, err := netnstest.NAPIThreads(dev, 4); err != nil || len(pids) != 4 {
			t.Fatalf("NAPI threads of %s: %v %v", dev, pids, err)
		}
	}
	out := ns.RunChild(t, map[string]string{"NL_THREADED": a + "," + b, "NL_GRO": c, "NL_PLAIN": d})
	t.Logf("child:\n%s", out)
}

func netlinkKernelChild(t *testing.T) {
	threaded := strings.Split(os.Getenv("NL_THREADED"), ",")
	gro, plain := os.Getenv("NL_GRO"), os.Getenv("NL_PLAIN")
	if len(threaded) != 2 || gro == "" || plain == "" {
		t.Fatal("NL_* not set")
	}
	ctx := context.Background()
	s, err := Read(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if s.Netlink == nil {
		t.Fatal("Read of / did not ask netlink")
	}
	t.Logf("netlink: %s, %d NAPIs, ops %v", s.Netlink.Status, len(s.Netlink.NAPIs), s.Netlink.Ops)
	for _, g := range s.Gaps {
		if strings.HasPrefix(g.Path, netlinkPath) {
			t.Errorf("netlink gap: %s: %s", g.Path, g.Error)
		}
	}
	if s.Netlink.Status != "ok" {
		if !strings.HasPrefix(s.Netlink.Status, "unavailable: ") {
			t.Fatalf("status %q", s.Netlink.Status)
		}
		testenv.Skipf(t, "kernel without the netlink map: %s", s.Netlink.Status)
	}
	for _, dis := range s.Netlink.Disagreements {
		t.Errorf("netlink disagrees with the inference: %s", dis)
	}

	conn, err := genetlink.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	nd, err := genetlink.OpenNetdev(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(append([]string{}, threaded...), gro, plain) {
		dev := devByName(s, name)
		if dev == nil {
			t.Fatalf("no device %s in the snapshot", name)
		}
		if dev.Ifindex <= 0 {
			t.Fatalf("%s: ifindex %d", name, dev.Ifindex)
		}
		queues, err := nd.Queues(ctx, uint32(dev.Ifindex))
		if err != nil {
			t.Fatalf("%s: queue-get: %v", name, err)
		}
		// queue-get against sysfs queues/.
		var nl, fsq []string
		for _, q := range queues {
			nl = append(nl, q.Type+"-"+strconv.Itoa(int(q.ID)))
		}
		ents, err := os.ReadDir(filepath.Join("/sys/class/net", name, "queues"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			fsq = append(fsq, e.Name())
		}
		sort.Strings(nl)
		sort.Strings(fsq)
		if strings.Join(nl, " ") != strings.Join(fsq, " ") {
			t.Errorf("%s: queue-get lists %v, sysfs %v", name, nl, fsq)
		}
		napis, err := nd.NAPIs(ctx, uint32(dev.Ifindex))
		if err != nil {
			t.Fatalf("%s: napi-get: %v", name, err)
		}
		ids := map[int]bool{}
		for _, n := range napis {
			ids[int(n.ID)] = true
		}
		for _, q := range append(append([]RxQueue{}, dev.RxQueues...), txAsRx(dev.TxQueues)...) {
			if q.NAPIID != 0 && !ids[q.NAPIID] {
				t.Errorf("%s %s: NAPI id %d is none of the device's NAPIs %v", name, q.Name, q.NAPIID, ids)
			}
		}
		t.Logf("%s (ifindex %d, threaded file %v): %d queues from queue-get, %d with a NAPI id (netlink map: %v); napi-get: %s",
			name, dev.Ifindex, dev.Threaded, len(queues), countNAPIIDs(queues), dev.HasNetlink(), describeNAPIs(napis))

		isThreaded := name == threaded[0] || name == threaded[1]
		wantNAPIs := len(dev.RxQueues)
		if name == plain {
			wantNAPIs = 0 // veth without GRO or XDP has no NAPI
		}
		if len(napis) != wantNAPIs {
			t.Errorf("%s: %d NAPIs, want %d (one per rx queue with GRO on)", name, len(napis), wantNAPIs)
		}
		// PIDs against /proc: the napi/DEV-<id> kthreads.
		procPIDs, err := netnstest.NAPIThreads(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		var nlPIDs []int
		for _, n := range napis {
			if n.PID == 0 {
				continue
			}
			nlPIDs = append(nlPIDs, n.PID)
			comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", n.PID))
			if err != nil {
				t.Errorf("%s: NAPI %d: pid %d: %v", name, n.ID, n.PID, err)
				continue
			}
			if got, want := strings.TrimSpace(string(comm)), fmt.Sprintf("napi/%s-%d", name, n.ID); got != want {
				t.Errorf("%s: NAPI %d: pid %d is %q, want %q", name, n.ID, n.PID, got, want)
			}
			if n.Config.Threaded != nil && *n.Config.Threaded != 1 {
				t.Errorf("%s: NAPI %d has a pid but threaded=%d", name, n.ID, *n.Config.Threaded)
			}
		}
		sort.Ints(nlPIDs)
		if fmt.Sprint(nlPIDs) != fmt.Sprint(procPIDs) {
			t.Errorf("%s: napi-get pids %v, /proc napi threads %v", name, nlPIDs, procPIDs)
		}
		if isThreaded != (len(nlPIDs) > 0) {
			t.Errorf("%s: threaded=%v but %d NAPIs with a pid", name, isThreaded, len(nlPIDs))
		}
		// The snapshot: each thread tied to the device as rx, each NAPI
		// named by its device.
		for _, pid := range procPIDs {
			th := threadByPID(s, pid)
			if th == nil {
				t.Errorf("%s: thread %d not in the snapshot", name, pid)
				continue
			}
			if th.Device != name || th.IsTX() {
				t.Errorf("%s: thread %+v: want device %s, rx", name, *th, name)
			}
		}
		for _, n := range napis {
			sn := s.Netlink.NAPIByID(int(n.ID))
			if sn == nil || sn.Device != name || sn.PID != n.PID {
				t.Errorf("%s: NAPI %d in the snapshot: %+v", name, n.ID, sn)
			}
		}
	}
}

func txAsRx(tx []TxQueue) []RxQueue {
	out := make([]RxQueue, len(tx))
	for i, q := range tx {
		out[i] = RxQueue{Name: q.Name, NAPIID: q.NAPIID}
	}
	return out
}

func countNAPIIDs(qs []genetlink.Queue) int {
	n := 0
	for _, q := range qs {
		if q.NAPIID != 0 {
			n++
		}
	}
	return n
}

func describeNAPIs(ns []genetlink.NAPI) string {
	var parts []string
	for _, n := range ns {
		p := fmt.Sprintf("id %d irq %d pid %d", n.ID, n.IRQ, n.PID)
		if c := n.Config; c.DeferHardIRQs != nil && c.GROFlushTimeout != nil {
			p += fmt.Sprintf(" defer-hard-irqs %d gro-flush-timeout %d", *c.DeferHardIRQs, *c.GROFlushTimeout)
		}
		if c := n.Config; c.Threaded != nil {
			p += fmt.Sprintf(" threaded %d", *c.Threaded)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func threadByPID(s *Snapshot, pid int) *NAPIThread {
	for i := range s.NAPIThreads {
		if s.NAPIThreads[i].PID == pid {
			return &s.NAPIThreads[i]
		}
	}
	return nil
}

// TestNetlinkKernelNAPISet writes the per-NAPI knobs of napi-set
// (defer-hard-irqs, gro-flush-timeout; Linux 6.13+) on a NAPI of a veth
// in a fresh namespace, reads them back with napi-get, checks that a
// value out of the spec's range is refused with an extended ack naming
// the attribute, and puts the old values back. A kernel without napi-set
// must say "not supported" and write nothing.
func TestNetlinkKernelNAPISet(t *testing.T) {
	if netnstest.IsChild(t) {
		napiSetChild(t)
		return
	}
	testenv.Short(t, "kernel test")
	ns := netnstest.New(t, "nls")
	id := os.Getpid() % 100000
	a, b := fmt.Sprintf("ns%da", id), fmt.Sprintf("ns%db", id)
	ns.AddVeth(t, netnstest.Veth{Name: a, Peer: b, Queues: 2, Threaded: true})
	out := ns.RunChild(t, map[string]string{"NL_DEV": a})
	t.Logf("child:\n%s", out)
}

func napiSetChild(t *testing.T) {
	ctx := context.Background()
	ifi, err := net.InterfaceByName(os.Getenv("NL_DEV"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := genetlink.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nd, err := genetlink.OpenNetdev(ctx, c)
	if err != nil {
		testenv.Skipf(t, "no netdev family: %v", err)
	}
	napis, err := nd.NAPIs(ctx, uint32(ifi.Index))
	if err != nil || len(napis) == 0 {
		t.Fatalf("napi-get: %v %v", napis, err)
	}
	n := napis[0]
	if !nd.Supports("napi-set") {
		err := nd.SetNAPI(ctx, n.ID, genetlink.NAPIConfig{DeferHardIRQs: u32(1)})
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "not supported by this kernel") {
			t.Fatalf("napi-set on a kernel without it: %v", err)
		}
		testenv.Skipf(t, "kernel without napi-set: %v", err)
	}
	old := n.Config
	if old.DeferHardIRQs == nil || old.GROFlushTimeout == nil {
		t.Fatalf("napi-get reports no config on a kernel with napi-set: %+v", old)
	}
	defer func() { // before c.Close (deferred first)
		if err := nd.SetNAPI(ctx, n.ID, genetlink.NAPIConfig{DeferHardIRQs: old.DeferHardIRQs, GROFlushTimeout: old.GROFlushTimeout}); err != nil {
			t.Errorf("restore NAPI %d: %v", n.ID, err)
		}
	}()
	if err := nd.SetNAPI(ctx, n.ID, genetlink.NAPIConfig{DeferHardIRQs: u32(2), GROFlushTimeout: u64(20000)}); err != nil {
		t.Fatalf("napi-set: %v", err)
	}
	back, err := nd.NAPIs(ctx, uint32(ifi.Index))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range back {
		if m.ID != n.ID {
			continue
		}
		if *m.Config.DeferHardIRQs != 2 || *m.Config.GROFlushTimeout != 20000 {
			t.Errorf("read back defer-hard-irqs %d gro-flush-timeout %d, want 2 and 20000", *m.Config.DeferHardIRQs, *m.Config.GROFlushTimeout)
		}
		t.Logf("NAPI %d: defer-hard-irqs %d -> 2, gro-flush-timeout %d -> 20000 ns, read back %d / %d", n.ID,
			*old.DeferHardIRQs, *old.GROFlushTimeout, *m.Config.DeferHardIRQs, *m.Config.GROFlushTimeout)
	}
	// defer-hard-irqs is at most s32-max (the spec's checks): the kernel's
	// policy refuses more (ERANGE), with a message and the attribute in the
	// extended ack.
	err = nd.SetNAPI(ctx, n.ID, genetlink.NAPIConfig{DeferHardIRQs: u32(1 << 31)})
	var e *genetlink.Error
	if !errors.As(err, &e) || e.Errno != unix.ERANGE || e.Attr != 5 || e.Message == "" {
		t.Fatalf("out-of-range defer-hard-irqs: %v (%+v), want ERANGE with a message naming attribute 5", err, e)
	}
	t.Logf("out of range: %v", err)
	// A NAPI id that does not exist.
	if err := nd.SetNAPI(ctx, 1<<31-1, genetlink.NAPIConfig{DeferHardIRQs: u32(1)}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("napi-set on a missing NAPI: %v, want ENOENT", err)
	}

	// SetNAPIKnobs: apply, the snapshot shows it, roll back.
	before, err := SetNAPIKnobs(ctx, int(n.ID), NAPIKnobs{DeferHardIRQs: 3, GROFlushTimeoutNS: 50000})
	if err != nil {
		t.Fatalf("SetNAPIKnobs: %v", err)
	}
	if before != (NAPIKnobs{DeferHardIRQs: 2, GROFlushTimeoutNS: 20000}) {
		t.Errorf("SetNAPIKnobs replaced %+v, want the 2/20000 written above", before)
	}
	knobs := func() NAPIKnobs {
		s, err := Read(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		v := s.Netlink.NAPIByID(int(n.ID))
		if v == nil || v.DeferHardIRQs == nil || v.GROFlushTimeoutNS == nil {
			t.Fatalf("snapshot NAPI %d: %+v", n.ID, v)
		}
		return NAPIKnobs{DeferHardIRQs: *v.DeferHardIRQs, GROFlushTimeoutNS: *v.GROFlushTimeoutNS}
	}
	if got := knobs(); got != (NAPIKnobs{DeferHardIRQs: 3, GROFlushTimeoutNS: 50000}) {
		t.Errorf("snapshot after SetNAPIKnobs: %+v", got)
	}
	if _, err := SetNAPIKnobs(ctx, int(n.ID), before); err != nil {
		t.Fatalf("roll back: %v", err)
	}
	if got := knobs(); got != before {
		t.Errorf("snapshot after the rollback: %+v, want %+v", got, before)
	}
	for _, bad := range []struct {
		id int
		k  NAPIKnobs
	}{{0, NAPIKnobs{}}, {int(n.ID), NAPIKnobs{DeferHardIRQs: 1 << 31}}} {
		if _, err := SetNAPIKnobs(ctx, bad.id, bad.k); err == nil {
			t.Errorf("SetNAPIKnobs(%d, %+v) accepted", bad.id, bad.k)
		}
	}
	if _, err := SetNAPIKnobs(ctx, 1<<31-1, NAPIKnobs{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SetNAPIKnobs on a missing NAPI: %v, want not-exist", err)
	}
}

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }
