package plan

import "github.com/packet-steering/packet-steering/platform"

// Per-queue receive counts: how much of a device's traffic each rx queue
// carried, by the best measure the snapshot has. The skewed-RSS rule, tune
// and the adaptive controller all count queues this way.
//
//	qstats  rx packets per queue from netdev netlink qstats-get (Linux
//	        6.9+, drivers that keep them: virtio_net, ice, mlx5, bnxt,
//	        gve; not veth), RxQueue.Stats
//	irq     interrupts of the queue's own IRQ (/proc/interrupts), for
//	        devices with one IRQ per rx queue; a queue without its own
//	        IRQ counts 0
//
// A device counts by one measure for all its queues (shares of mixed
// measures would mean nothing): qstats when every rx queue has them, else
// IRQ counts when at least one rx queue has an IRQ of its own, else none.

// Sources of RxCounts.
const (
	// CountQstats: rx packets from netlink qstats-get.
	CountQstats = "qstats"
	// CountIRQ: interrupts of each queue's own IRQ.
	CountIRQ = "irq"
)

// RxCounts are one device's cumulative per-rx-queue counts, indexed like
// its RxQueues, and the measure they are in (CountQstats, CountIRQ; ""
// when the snapshot has no per-queue count of the device).
type RxCounts struct {
	Source string
	Counts []uint64
}

// Unit is what Source counts, for sentences: "rx packets (qstats)",
// "rx interrupts".
func (c RxCounts) Unit() string {
	switch c.Source {
	case CountQstats:
		return "rx packets (qstats)"
	case CountIRQ:
		return "rx interrupts"
	}
	return ""
}

// DeviceRxCounts returns d's per-queue counts with dp its pairing
// (Pairing.Device).
func DeviceRxCounts(d *platform.Device, dp *DevicePairing) RxCounts {
	if len(d.RxQueues) == 0 {
		return RxCounts{}
	}
	out := RxCounts{Source: CountQstats, Counts: make([]uint64, len(d.RxQueues))}
	for i, q := range d.RxQueues {
		if q.Stats == nil {
			out.Source = ""
			break
		}
		out.Counts[i] = q.Stats.Packets
	}
	if out.Source != "" {
		return out
	}
	own := false
	for i := range out.Counts {
		out.Counts[i] = 0
		if dp == nil || i >= len(dp.Rx) {
			continue
		}
		if q := dp.Rx[i].IRQ; q != nil && q.RxQueue() == i {
			out.Counts[i], own = irqTotal(q), true
		}
	}
	if !own {
		return RxCounts{}
	}
	out.Source = CountIRQ
	return out
}

// RxCountsOf is DeviceRxCounts for every device of s with rx queues, by
// device name.
func RxCountsOf(s *platform.Snapshot) map[string]RxCounts {
	pair := PairQueues(s)
	out := map[string]RxCounts{}
	for i := range s.Devices {
		d := &s.Devices[i]
		if c := DeviceRxCounts(d, pair.Device(d.Name)); c.Source != "" {
			out[d.Name] = c
		}
	}
	return out
}
