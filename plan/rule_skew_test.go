package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// withStats returns s with dev's rx queues carrying qstats rx packets
// (nil: none), the device and its queues copied.
func withStats(s *platform.Snapshot, dev string, packets []uint64) *platform.Snapshot {
	c := copySnap(s)
	for i := range c.Devices {
		d := &c.Devices[i]
		if d.Name != dev {
			continue
		}
		d.RxQueues = append([]platform.RxQueue(nil), d.RxQueues...)
		for j := range d.RxQueues {
			d.RxQueues[j].Stats = nil
			if j < len(packets) {
				d.RxQueues[j].Stats = &platform.QueueStats{Packets: packets[j], Bytes: 1500 * packets[j], HWDrops: -1}
			}
		}
	}
	return c
}

// withoutIRQs drops dev's IRQs from s (as veth, or a virtio_net whose
// queues share one vector the snapshot cannot tie to a queue).
func withoutIRQs(s *platform.Snapshot, dev string) *platform.Snapshot {
	c := copySnap(s)
	c.IRQs = c.IRQs[:0:0]
	for _, q := range s.IRQs {
		if q.Device != dev {
			c.IRQs = append(c.IRQs, q)
		}
	}
	return c
}

// The skewed-RSS rule counts qstats rx packets where every rx queue has
// them, and the IRQ counts otherwise; the hint says which.
func TestRuleSkewQstats(t *testing.T) {
	skew := []uint64{950000, 20000, 20000, 10000}
	even := []uint64{250000, 250000, 250000, 250000}
	tests := []struct {
		name string
		snap *platform.Snapshot
		hint string // "" no rss-skew hint; else a word of its text
		mask string // eth0 rx-0 RPS in auto
	}{
		// r6s: eth0's per-queue IRQ counts are even.
		{"irq even, no stats", presetSnapshot(t, "r6s"), "", "20"},
		{"irq even, qstats skewed", withStats(presetSnapshot(t, "r6s"), "eth0", skew), "rx packets (qstats)", "e0"},
		{"irq even, qstats even", withStats(presetSnapshot(t, "r6s"), "eth0", even), "", "20"},
		{"qstats skewed but too few packets", withStats(presetSnapshot(t, "r6s"), "eth0", []uint64{9500, 200, 200, 100}), "", "20"},
		// r6s-skew: eth0-0 carries all of eth0's interrupts.
		{"irq skewed, no stats", presetSnapshot(t, "r6s-skew"), "rx interrupts", "e0"},
		{"irq skewed, qstats even", withStats(presetSnapshot(t, "r6s-skew"), "eth0", even), "", "20"},
		// One queue without qstats: the device counts by IRQs.
		{"irq skewed, qstats on 3 of 4 queues", withStats(presetSnapshot(t, "r6s-skew"), "eth0", even[:3]), "rx interrupts", "e0"},
		{"irq even, qstats skewed on 3 of 4 queues", withStats(presetSnapshot(t, "r6s"), "eth0", skew[:3]), "", "20"},
		// No IRQs at all: qstats alone show it.
		{"no irqs, qstats skewed", withStats(withoutIRQs(presetSnapshot(t, "r6s"), "eth0"), "eth0", skew), "rx packets (qstats)", "f0"},
		// Without either, auto's RPS for a device without per-queue
		// IRQs (one CPU per queue), no hint.
		{"no irqs, no stats", withoutIRQs(presetSnapshot(t, "r6s"), "eth0"), "", "10"},
	}
	for _, tt := range tests {
		p := mustPlan(t, tt.snap, ModeAuto)
		var text string
		for _, h := range p.Hints {
			if h.ID == HintRSSSkew && h.Device == "eth0" {
				text = h.Text
			}
		}
		switch {
		case tt.hint == "" && text != "":
			t.Errorf("%s: unexpected hint %q", tt.name, text)
		case tt.hint != "" && !strings.Contains(text, tt.hint):
			t.Errorf("%s: hint %q, want one saying %q", tt.name, text, tt.hint)
		}
		if tt.hint != "" && !strings.Contains(p.Evidence, "eth0 rx-0 (") {
			t.Errorf("%s: the evidence does not name eth0 rx-0: %s", tt.name, p.Evidence)
		}
		v, _ := value(p, KindRPSCPUs, "eth0/rx-0")
		if !cpuset.SameMask(v, tt.mask) {
			t.Errorf("%s: eth0 rx-0 RPS %q, want %s", tt.name, v, tt.mask)
		}
	}
}

func TestDeviceRxCounts(t *testing.T) {
	irq := func(n int, name string, queue int, counts ...uint64) platform.IRQ {
		return platform.IRQ{Number: n, Name: name, Device: "eth0", Queue: queue, Direction: platform.DirRX, Counts: counts}
	}
	q := func(name string, stats *platform.QueueStats) platform.RxQueue {
		return platform.RxQueue{Name: name, Index: int(name[len(name)-1] - '0'), Stats: stats}
	}
	st := func(n uint64) *platform.QueueStats { return &platform.QueueStats{Packets: n, HWDrops: -1} }
	tests := []struct {
		name   string
		queues []platform.RxQueue
		irqs   []platform.IRQ
		source string
		counts []uint64
	}{
		{"qstats", []platform.RxQueue{q("rx-0", st(7)), q("rx-1", st(3))}, nil, CountQstats, []uint64{7, 3}},
		{"qstats win over irqs", []platform.RxQueue{q("rx-0", st(7)), q("rx-1", st(3))},
			[]platform.IRQ{irq(30, "eth0-0", 0, 1, 1), irq(31, "eth0-1", 1, 50, 50)}, CountQstats, []uint64{7, 3}},
		{"irqs", []platform.RxQueue{q("rx-0", nil), q("rx-1", nil)},
			[]platform.IRQ{irq(30, "eth0-0", 0, 1, 1), irq(31, "eth0-1", 1, 50, 50)}, CountIRQ, []uint64{2, 100}},
		{"irqs, stats on one queue", []platform.RxQueue{q("rx-0", st(7)), q("rx-1", nil)},
			[]platform.IRQ{irq(30, "eth0-0", 0, 1, 1), irq(31, "eth0-1", 1, 50, 50)}, CountIRQ, []uint64{2, 100}},
		{"one irq for the device", []platform.RxQueue{q("rx-0", nil), q("rx-1", nil)},
			[]platform.IRQ{irq(30, "eth0", -1, 9, 9)}, "", nil},
		{"nothing", []platform.RxQueue{q("rx-0", nil), q("rx-1", nil)}, nil, "", nil},
	}
	for _, tt := range tests {
		s := &platform.Snapshot{Devices: []platform.Device{{Name: "eth0", RxQueues: tt.queues}}, IRQs: tt.irqs}
		got := RxCountsOf(s)["eth0"]
		if got.Source != tt.source || fmt.Sprint(got.Counts) != fmt.Sprint(tt.counts) {
			t.Errorf("%s: %q %v, want %q %v", tt.name, got.Source, got.Counts, tt.source, tt.counts)
		}
	}
}
