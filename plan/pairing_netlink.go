package plan

import (
	"slices"

	"github.com/packet-steering/packet-steering/platform"
)

// pairNetlink lets the kernel's own map win over the inference of
// pairDevice (platform/netlink.go): a queue whose NAPI id netlink
// queue-get stated is served by the device's thread of that NAPI id; an
// IRQ that napi-get tied to its NAPI is marked so. Queues netlink says
// nothing about keep the inferred pairing, with the threads netlink did
// not give another queue. RxThreads is reordered into
// the queue order netlink gives (threads serving no queue after them).
func pairNetlink(d *platform.Device, dp *DevicePairing) {
	irqSources(dp)
	if !d.HasNetlink() {
		return
	}
	byID := func(id int) *platform.NAPIThread {
		for _, ts := range [][]*platform.NAPIThread{dp.RxThreads, dp.TxThreads} {
			for _, t := range ts {
				if id > 0 && t.NAPIID == id {
					return t
				}
			}
		}
		return nil
	}
	changed := false
	var claimed []*platform.NAPIThread
	for i, q := range d.RxQueues {
		if t := byID(q.NAPIID); t != nil && i < len(dp.Rx) {
			changed = changed || dp.Rx[i].Thread != t
			dp.Rx[i].Thread, dp.Rx[i].ThreadSource = t, platform.SourceNetlink
			claimed = append(claimed, t)
		}
	}
	for i, q := range d.TxQueues {
		if t := byID(q.NAPIID); t != nil && i < len(dp.Tx) {
			dp.Tx[i].Thread, dp.Tx[i].ThreadSource = t, platform.SourceNetlink
		}
	}
	if !changed {
		return
	}
	// The rx queues netlink says nothing about take the threads it did
	// not claim, still in NAPI id order; RxThreads follows queue order.
	var rest []*platform.NAPIThread
	for _, t := range dp.RxThreads {
		if !slices.Contains(claimed, t) {
			rest = append(rest, t)
		}
	}
	ordered := make([]*platform.NAPIThread, 0, len(dp.RxThreads))
	for i := range dp.Rx {
		p := &dp.Rx[i]
		if p.ThreadSource != platform.SourceNetlink {
			p.Thread, p.ThreadSource = nil, ""
			if len(rest) > 0 {
				p.Thread, p.ThreadSource, rest = rest[0], platform.SourceNAPIOrder, rest[1:]
			}
		}
		if p.Thread != nil && !p.Thread.IsTX() && !slices.Contains(ordered, p.Thread) {
			ordered = append(ordered, p.Thread)
		}
	}
	for _, t := range dp.RxThreads {
		if !slices.Contains(ordered, t) {
			ordered = append(ordered, t)
		}
	}
	dp.RxThreads = ordered
}

// irqSources names how each paired IRQ is known: netlink when napi-get
// tied it (platform.IRQ.QueueSource), else its name.
func irqSources(dp *DevicePairing) {
	for _, qs := range [][]QueuePair{dp.Rx, dp.Tx} {
		for i := range qs {
			if q := qs[i].IRQ; q != nil && qs[i].IRQSource == "" {
				qs[i].IRQSource = platform.SourceIRQName
				if q.QueueSource == platform.SourceNetlink {
					qs[i].IRQSource = platform.SourceNetlink
				}
			}
		}
	}
}

// napiOrderFix corrects the NAPI-id-order pairing of a device whose NAPI
// instances are not all threaded (per-NAPI threaded, Linux 6.17+: a
// device's idle queues stay in softirq): netlink napi-get lists every
// NAPI, threaded or not, so when it lists as many as the device has rx
// queues and the queue map says nothing, rx queue i is served by the i-th
// NAPI in id order, and by that NAPI's thread or by none. Counting only
// the threads would give rx-0 the thread of rx-1 once rx-0's NAPI left
// its thread.
func napiOrderFix(s *platform.Snapshot, d *platform.Device, dp *DevicePairing) {
	if s.Netlink == nil || d.HasNetlink() || len(dp.RxThreads) == 0 || len(dp.RxThreads) >= len(d.RxQueues) {
		return
	}
	var ids []int
	for _, n := range s.Netlink.NAPIs {
		if n.Device == d.Name && n.Device != "" {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) != len(d.RxQueues) || len(dp.Rx) != len(ids) {
		return
	}
	slices.Sort(ids)
	for _, t := range dp.RxThreads {
		if !slices.Contains(ids, t.NAPIID) {
			return // a thread netlink does not list: keep the inference
		}
	}
	for i := range dp.Rx {
		p := &dp.Rx[i]
		if p.Thread != nil && p.Thread.IsTX() {
			continue
		}
		p.Thread, p.ThreadSource = nil, ""
		for _, t := range dp.RxThreads {
			if t.NAPIID == ids[i] {
				p.Thread, p.ThreadSource = t, platform.SourceNAPIOrder
			}
		}
	}
}
