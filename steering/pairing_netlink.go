//go:build !router || tune

package steering

import "github.com/packet-steering/packet-steering/platform"

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
	byID := map[int]*platform.NAPIThread{}
	for _, ts := range [][]*platform.NAPIThread{dp.RxThreads, dp.TxThreads} {
		for _, t := range ts {
			if t.NAPIID > 0 {
				byID[t.NAPIID] = t
			}
		}
	}
	changed := false
	claimed := map[*platform.NAPIThread]bool{}
	for i, q := range d.RxQueues {
		if t := byID[q.NAPIID]; q.NAPIID > 0 && t != nil && i < len(dp.Rx) {
			changed = changed || dp.Rx[i].Thread != t
			dp.Rx[i].Thread, dp.Rx[i].ThreadSource = t, platform.SourceNetlink
			claimed[t] = true
		}
	}
	if changed {
		// The rx queues netlink says nothing about take the threads it
		// did not claim, still in NAPI id order.
		var rest []*platform.NAPIThread
		for _, t := range dp.RxThreads {
			if !claimed[t] {
				rest = append(rest, t)
			}
		}
		for i := range dp.Rx {
			if dp.Rx[i].ThreadSource == platform.SourceNetlink {
				continue
			}
			dp.Rx[i].Thread, dp.Rx[i].ThreadSource = nil, ""
			if len(rest) > 0 {
				dp.Rx[i].Thread, dp.Rx[i].ThreadSource = rest[0], platform.SourceNAPIOrder
				rest = rest[1:]
			}
		}
	}
	for i, q := range d.TxQueues {
		if t := byID[q.NAPIID]; q.NAPIID > 0 && t != nil && i < len(dp.Tx) {
			dp.Tx[i].Thread, dp.Tx[i].ThreadSource = t, platform.SourceNetlink
		}
	}
	if !changed {
		return
	}
	ordered := make([]*platform.NAPIThread, 0, len(dp.RxThreads))
	seen := map[*platform.NAPIThread]bool{}
	for _, p := range dp.Rx {
		if p.Thread != nil && !seen[p.Thread] && !p.Thread.IsTX() {
			seen[p.Thread] = true
			ordered = append(ordered, p.Thread)
		}
	}
	for _, t := range dp.RxThreads {
		if !seen[t] {
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
