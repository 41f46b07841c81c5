package vmtest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/plan"
)

// checkPhaseQstats checks a traffic phase's per-queue rx counts as the
// product counts them (plan.DeviceRxCounts, which the skewed-RSS rule,
// tune and the adaptive controller use) on the snapshots the guest took
// before and after it: on a guest whose kernel answers netlink (6.12,
// 7.2: virtio_net keeps qstats) the device counts by qstats, and the rx
// queue the phase loaded (phase i loads rx-i: the host's tap replies into
// the queue pair the flow came from) received at least 80% of the
// device's packets during the phase, as one flow on one queue must. It
// returns a description of the phase's counts.
func checkPhaseQstats(c *checker, g *guest, ph phaseLine, before, after counters) string {
	dev := ph.dev
	b, a := before.snap.Device(dev), after.snap.Device(dev)
	if b == nil || a == nil || len(a.RxQueues) < 2 {
		return ""
	}
	cb := plan.DeviceRxCounts(b, plan.PairQueues(&before.snap).Device(dev))
	ca := plan.DeviceRxCounts(a, plan.PairQueues(&after.snap).Device(dev))
	if g.wantNetlink == "ok" && (ca.Source != plan.CountQstats || cb.Source != plan.CountQstats) {
		c.errorf("%s: %s counts its rx queues by %q/%q, want qstats (the kernel answers netlink)", ph.name, dev, cb.Source, ca.Source)
		return ""
	}
	if ca.Source == "" || ca.Source != cb.Source || len(ca.Counts) != len(cb.Counts) {
		return fmt.Sprintf("%s: %s no per-queue counts (%q)", ph.name, dev, ca.Source)
	}
	rxq, err := strconv.Atoi(strings.TrimPrefix(ph.txq, "tx-"))
	if err != nil || rxq >= len(ca.Counts) {
		c.errorf("%s: tx queue %q names no rx queue of %s", ph.name, ph.txq, dev)
		return ""
	}
	var total uint64
	deltas := make([]string, len(ca.Counts))
	for i := range ca.Counts {
		d := uint64(0)
		if ca.Counts[i] >= cb.Counts[i] {
			d = ca.Counts[i] - cb.Counts[i]
		}
		total += d
		deltas[i] = strconv.FormatUint(d, 10)
		if i == rxq {
			deltas[i] = "*" + deltas[i]
		}
	}
	line := fmt.Sprintf("%s: %s %s %s", ph.name, dev, ca.Unit(), strings.Join(deltas, "/"))
	if ca.Source != plan.CountQstats {
		return line
	}
	got := ca.Counts[rxq] - min(cb.Counts[rxq], ca.Counts[rxq])
	if total == 0 || float64(got) < 0.8*float64(total) {
		c.errorf("%s: one flow into rx-%d, but qstats counted %d of the device's %d rx packets there (%s)", ph.name, rxq, got, total, line)
	}
	return line
}
