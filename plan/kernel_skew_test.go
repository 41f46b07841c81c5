package plan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/genetlink"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/platform"
	"golang.org/x/sys/unix"
)

// skewFlowPackets is how many datagrams the one flow of
// TestKernelSkewVeth sends: more than skewMinPackets.
const skewFlowPackets = 60000

// TestKernelSkewVeth runs the skewed-RSS rule on what the running kernel
// reports for a 4-queue veth with threaded NAPI in a fresh namespace, after
// one UDP flow from the peer's namespace (one tx queue of the peer, so one
// rx queue of the device carries everything). It checks what qstats-get
// answers for the device first:
//
//   - where the kernel keeps per-queue counters for veth, the read records
//     them on every rx queue, one queue carries at least 80% of the
//     packets, and the auto plan's rss-skew hint says it counted qstats
//     rx packets;
//   - where it does not (veth on 6.18: the driver has no netdev_stat_ops),
//     qstats-get for the device's ifindex fails with EOPNOTSUPP, the dump
//     of all devices still succeeds (netlink status ok, no gap), the read
//     records no counters, and no hint claims qstats.
//
// A kernel without qstats-get (before 6.9) skips.
func TestKernelSkewVeth(t *testing.T) {
	if netnstest.IsChild(t) {
		kernelSkewChild(t)
		return
	}
	testenv.Short(t, "kernel test")
	router := netnstest.New(t, "skr")
	sender := netnstest.New(t, "sks")
	id := os.Getpid() % 100000
	dev, peer := fmt.Sprintf("sk%da", id), fmt.Sprintf("sk%db", id)
	router.AddVeth(t, netnstest.Veth{Name: dev, Peer: peer, PeerNS: sender, Queues: 4, Threaded: true,
		Addr: "198.18.7.1/30", PeerAddr: "198.18.7.2/30"})
	// veth hands a packet to the receiver's NAPI (its rx queue's thread)
	// only when it is eligible for GRO: the sender without TSO, or the
	// receiver with UDP GRO forwarding (veth_skb_is_eligible_for_gro);
	// else it goes to the backlog of the sending CPU, with no queue.
	sender.MustExec(t, "ethtool", "-K", peer, "tso", "off")
	// One flow: one socket, one port pair, so the peer sends on one tx
	// queue and veth hands every packet to the same rx queue of dev.
	err := sender.Do(func() error {
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(198, 18, 7, 2), Port: 40001}, &net.UDPAddr{IP: net.IPv4(198, 18, 7, 1), Port: 40002})
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 64)
		// A write that reports the port's ICMP unreachable sent nothing:
		// count the datagrams that went out.
		for sent, tries := 0, 0; sent < skewFlowPackets; tries++ {
			_, err := c.Write(buf)
			switch {
			case err == nil:
				sent++
				if sent%64 == 0 {
					// Paced: veth drops what its NAPI ring
					// (256 entries) cannot take.
					time.Sleep(100 * time.Microsecond)
				}
			case !errors.Is(err, unix.ECONNREFUSED) || tries > 2*skewFlowPackets:
				return fmt.Errorf("datagram %d: %w", sent, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("flow: %v", err)
	}
	out := router.RunChild(t, map[string]string{"SK_DEV": dev})
	t.Logf("child:\n%s", out)
}

func kernelSkewChild(t *testing.T) {
	name := os.Getenv("SK_DEV")
	ctx := context.Background()
	s, err := platform.Read(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if s.Netlink == nil || s.Netlink.Status != "ok" {
		testenv.Skipf(t, "kernel without the netlink map: %+v", s.Netlink)
	}
	hasOp := false
	for _, op := range s.Netlink.Ops {
		hasOp = hasOp || op == "qstats-get"
	}
	if !hasOp {
		testenv.Skipf(t, "kernel without qstats-get (Linux before 6.9): ops %v", s.Netlink.Ops)
	}
	for _, g := range s.Gaps {
		if strings.HasPrefix(g.Path, "netlink") {
			t.Errorf("netlink gap: %s: %s", g.Path, g.Error)
		}
	}
	d := s.Device(name)
	if d == nil || len(d.RxQueues) != 4 {
		t.Fatalf("device %s: %+v", name, d)
	}
	// The flow arrived, on one rx queue: the device's rx_packets, and its
	// rx NAPI threads' run time (schedstat, ns; finer than CPUTicks).
	b, err := os.ReadFile("/sys/class/net/" + name + "/statistics/rx_packets")
	if err != nil {
		t.Fatal(err)
	}
	// veth drops what its NAPI ring (256) cannot take; most must arrive.
	if n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); n < skewFlowPackets*9/10 {
		t.Fatalf("%s received %d packets of %d sent, want at least 90%%", name, n, skewFlowPackets)
	} else {
		t.Logf("%s received %d packets of %d sent", name, n, skewFlowPackets)
	}
	var runNS []uint64
	var total, top uint64
	for _, qp := range PairQueues(s).Device(name).Rx {
		var ns uint64
		if qp.Thread != nil {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(qp.Thread.PID) + "/schedstat"); err == nil {
				ns, _ = strconv.ParseUint(strings.Fields(string(b) + " 0")[0], 10, 64)
			}
		}
		runNS = append(runNS, ns)
		total += ns
		top = max(top, ns)
	}
	t.Logf("%s rx NAPI threads' run time (ns, queue order): %v", name, runNS)
	if total == 0 || float64(top) < skewShare*float64(total) {
		t.Errorf("one flow, but no rx thread of %s ran 80%% of the time: %v", name, runNS)
	}
	// What the kernel answers for this device alone.
	c, err := genetlink.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nd, err := genetlink.OpenNetdev(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	st, qerr := nd.QStats(ctx, uint32(d.Ifindex))
	t.Logf("qstats-get ifindex %d (%s): %d answers, %v", d.Ifindex, name, len(st), qerr)

	var stats []string
	withStats := 0
	for _, q := range d.RxQueues {
		if q.Stats != nil {
			withStats++
			stats = append(stats, q.Name+" "+strconv.FormatUint(q.Stats.Packets, 10))
		}
	}
	t.Logf("snapshot: %s rx qstats: %v", name, stats)
	p, err := NewPlan(s, PlanRequest{Mode: ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	var hint string
	for _, h := range p.Hints {
		if h.ID == HintRSSSkew && h.Device == name {
			hint = h.Text
		}
	}
	t.Logf("rss-skew hint: %q", hint)
	rc := DeviceRxCounts(d, PairQueues(s).Device(name))

	if qerr != nil {
		// The driver keeps no per-queue counters.
		if !errors.Is(qerr, unix.EOPNOTSUPP) {
			t.Fatalf("qstats-get for %s: %v, want EOPNOTSUPP or answers", name, qerr)
		}
		if withStats != 0 || rc.Source == CountQstats {
			t.Errorf("the read records qstats the kernel refused: %v (counts by %q)", stats, rc.Source)
		}
		if strings.Contains(hint, "qstats") {
			t.Errorf("a hint claims qstats: %s", hint)
		}
		t.Logf("veth keeps no qstats on this kernel: the rule counts %s by %q (falls back to NAPI thread time, which one short flow does not fill)", name, rc.Source)
		return
	}
	// The driver keeps them: the skew must show from them.
	if withStats != len(d.RxQueues) || rc.Source != CountQstats {
		t.Fatalf("qstats-get answered %d entries but the read records %d of %d rx queues (counts by %q)", len(st), withStats, len(d.RxQueues), rc.Source)
	}
	q, share := skewedQueue(rc.Counts, skewMinPackets)
	if q < 0 {
		t.Fatalf("one flow of %d datagrams, but no rx queue of %s carries 80%%: %v", skewFlowPackets, name, rc.Counts)
	}
	if !strings.Contains(hint, "rx packets (qstats)") || !strings.Contains(hint, d.RxQueues[q].Name) {
		t.Errorf("rx-%d carries %.0f%% by qstats, but the hint is %q", q, share, hint)
	}
}
