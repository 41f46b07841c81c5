package plan

import (
	"fmt"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// IRQs that cannot move, or that the plan leaves where the kernel put
// them, and queues RSS leaves idle.
//
// An IRQ the kernel refused to move (platform.IRQ.Refused, recorded by an
// earlier apply: irq_refused.go) is never planned again, in any mode, and
// a hint says where it stays. In auto, a device without NAPI threads does
// its receive work in the softirq of the CPU its IRQ fires on, so that CPU
// is its NAPI CPU: the stock script keeps a device's RPS off its NAPI CPU
// (get_next_cpu(rx_weight, dev.napi_cpu) in packet-steering.uc) but only
// knows the NAPI CPU of threaded devices; for the others auto takes it
// from where the IRQ runs (irqRunsOn: effective_affinity_list, else the
// per-CPU counts: the Raspberry Pi 5's RP1 leaves effective_affinity_list
// empty, raspberrypi/linux#7101) and moves the RPS target off it.
//
// Skewed RSS: where a device's per-queue rx packets (netlink qstats-get,
// where the kernel and driver keep them), else its per-queue IRQ counts,
// else its rx NAPI threads' CPU time, show one rx queue with at least
// skewShare of them, RSS is not spreading its traffic (one
// PPPoE session or a few flows hash to one queue: openwrt/openwrt#13493,
// X540/I350 with all WAN load on one queue, r8125 all on eth0-0), so
// "RPS off, the hardware spreads" is wrong for that queue: it gets RPS to
// the preferred CPUs but its own IRQ and NAPI CPUs, or a hint says why not.
// qstats count the traffic itself, so they also show the skew of devices
// whose IRQs are shared or absent (virtio_net with one vector for all
// queues; veth keeps no qstats); which measure was used is in the hint.

const (
	// skewShare is the share of a device's rx work one queue must carry.
	skewShare = 0.8
	// skewMinIRQs is the count below which the counts say nothing.
	skewMinIRQs = 10000
	// skewMinPackets is the same for qstats rx packets (NAPI takes up to
	// 64 packets per interrupt, so a packet count needs more to say as
	// much: 50000 full-size packets are 75 MB).
	skewMinPackets = 50000
	// skewMinTicks is the same for rx thread CPU time (clock ticks: 10 s
	// of CPU at USER_HZ 100).
	skewMinTicks = 1000
)

// skewedQueue returns the rx queue with at least skewShare of counts (one
// per rx queue), and its share in percent; -1 when none does or the total
// is below min.
//
//go:noinline
func skewedQueue(counts []uint64, min uint64) (int, float64) {
	var total, top uint64
	topQ := -1
	for i, n := range counts {
		total += n
		if n > top {
			top, topQ = n, i
		}
	}
	if topQ < 0 || total < min || float64(top) < skewShare*float64(total) {
		return -1, 0
	}
	return topQ, 100 * float64(top) / float64(total)
}

// dropRefusedIRQs removes the plan's writes of IRQs the kernel refused and
// says where they stay. Every mode.
func dropRefusedIRQs(b *builder, s *platform.Snapshot) {
	for i := range s.IRQs {
		q := &s.IRQs[i]
		if q.Refused == "" {
			continue
		}
		delete(b.acts, actionKey{kind: KindIRQAffinity, irq: q.Number})
		b.hints = append(b.hints, Hint{ID: HintIRQFixed, Device: q.Device,
			Text: fmt.Sprintf("IRQ %d (%s) cannot be moved: the kernel refused its smp_affinity (%s), as the Raspberry Pi 5's RP1 does (raspberrypi/linux#6077). It stays on %s; the plan leaves it there and places the rest around it.",
				q.Number, q.Name, q.Refused, cpuWord(b.irqRunsOn(q)))})
	}
}

// planAroundIRQs moves the single-CPU RPS target of a device without NAPI
// threads off the CPUs its unplaced (or unmovable) IRQ runs on.
func planAroundIRQs(b *builder, s *platform.Snapshot, _ int) (string, []Hint) {
	pair := b.pairing()
	pic := newPicture(b, s, nil)
	var moved []string
	for _, d := range sortedDevices(s) {
		if d.BusDevice == "" || len(d.Lowers) > 0 || pair.HasThreads(d.Name) || len(d.RxQueues) != 1 {
			continue
		}
		// The pairing is by name: a snapshot naming two devices alike
		// (hostile input) pairs one of them only.
		pd := pair.Device(d.Name)
		if len(pd.Rx) != 1 || pd.Rx[0].IRQ == nil {
			continue
		}
		q := pd.Rx[0].IRQ
		runs := b.irqRunsOn(q)
		c := b.plannedRPS(d.Name, d.RxQueues[0].Name)
		if runs.IsEmpty() || runs.Len() == len(pic.ids) || c < 0 || !runs.Has(c) {
			continue
		}
		to := pic.pick(loadRPS, runs)
		if to < 0 {
			continue
		}
		pic.add(to, loadRPS)
		pic.add(c, -loadRPS)
		b.rps(d, d.RxQueues[0], cpuset.Of(to))
		why := "where the kernel put it"
		if q.Refused != "" {
			why = "unmovable"
		}
		moved = append(moved, fmt.Sprintf("%s rx-0 RPS from CPU%d to CPU%d (irq %d %s runs on %s, %s)", d.Name, c, to, q.Number, q.Name, cpuWord(runs), why))
	}
	if len(moved) == 0 {
		return "", nil
	}
	return "RPS off the CPU that already receives (the stock script keeps RPS off a device's NAPI CPU; without NAPI threads that is the IRQ's CPU, effective_affinity_list or its counts): " + strings.Join(moved, "; ") + ".", nil
}

// spreadSkewed spreads an rx queue that carries most of its device's
// interrupts, or says why it cannot.
func spreadSkewed(b *builder, s *platform.Snapshot, _ int) (string, []Hint) {
	pair := b.pairing()
	pic := newPicture(b, s, nil)
	var ev []string
	var hints []Hint
	for _, d := range sortedDevices(s) {
		if len(d.RxQueues) < 2 {
			continue
		}
		dp := pair.Device(d.Name)
		rc := DeviceRxCounts(d, dp)
		what := rc.Unit()
		topQ, share := -1, 0.0
		switch rc.Source {
		case CountQstats:
			// The traffic itself: no fallback when it is even.
			topQ, share = skewedQueue(rc.Counts, skewMinPackets)
		case CountIRQ:
			topQ, share = skewedQueue(rc.Counts, skewMinIRQs)
		}
		if topQ < 0 && rc.Source != CountQstats {
			// Threaded NAPI without per-queue counts: the rx
			// threads' CPU time says the same.
			what = "rx NAPI CPU time"
			ticks := make([]uint64, len(dp.Rx))
			for i, qp := range dp.Rx {
				if qp.Thread != nil {
					ticks[i] = qp.Thread.CPUTicks
				}
			}
			topQ, share = skewedQueue(ticks, skewMinTicks)
		}
		if topQ < 0 {
			continue
		}
		rq := d.RxQueues[topQ]
		k := actionKey{kind: KindRPSCPUs, device: d.Name, queue: rq.Name}
		if _, ok := b.planned(k); !ok {
			hints = append(hints, Hint{ID: HintRSSSkew, Device: d.Name,
				Text: fmt.Sprintf("%s %s carried %.0f%% of the device's %s: RSS puts almost all its traffic on one queue (one PPPoE session or a few flows; openwrt/openwrt#13493). This mode does not manage the device, so its RPS is left alone.", d.Name, rq.Name, share, what)})
			continue
		}
		var exclude cpuset.Set
		if q := dp.Rx[topQ].IRQ; q != nil {
			exclude = b.irqRunsOn(q)
		}
		if t := dp.Rx[topQ].Thread; t != nil {
			exclude = exclude.Union(b.plannedCPUs(actionKey{kind: KindNAPIAffinity, pid: t.PID}))
		}
		if exclude.Len() == len(pic.ids) {
			exclude = cpuset.Set{} // unplaced: nothing to keep off
		}
		base := pic.big
		if base.IsEmpty() {
			base = pic.all
		}
		targets := base
		for _, c := range exclude.CPUs() {
			targets = targets.Remove(c)
		}
		// One CPU left (a 2-CPU board): RPS over both, the receiving CPU
		// included, rather than moving all of the stack's work to the
		// other one. The skewed-RSS bed on 2 CPUs (docs/platforms.md "Test
		// beds"), two sweeps: both CPUs 92 and 63 Mbit/s (medians of 5)
		// against 55-59 and 49-52 with the other CPU alone; lantiq's two
		// VPEs the same way (openwrt/openwrt#2553: all-CPU masks over
		// the non-IRQ CPU).
		if targets.Len() == 1 && base.Len() == 2 {
			targets = base
		}
		if targets.IsEmpty() {
			hints = append(hints, Hint{ID: HintRSSSkew, Device: d.Name,
				Text: fmt.Sprintf("%s %s carried %.0f%% of the device's %s (openwrt/openwrt#13493), but no CPU is free of its own IRQ and NAPI work, so there is nowhere to spread it.", d.Name, rq.Name, share, what)})
			continue
		}
		b.rps(d, rq, targets)
		hints = append(hints, Hint{ID: HintRSSSkew, Device: d.Name,
			Text: fmt.Sprintf("%s %s carried %.0f%% of the device's %s: RSS puts almost all its traffic on one queue (openwrt/openwrt#13493), so its RPS spreads it to %s instead of relying on RSS.", d.Name, rq.Name, share, what, cpuWord(targets))})
		ev = append(ev, fmt.Sprintf("%s %s (%.0f%% of its %s) RPS to %s", d.Name, rq.Name, share, what, cpuWord(targets)))
	}
	outline.SortStrings(ev)
	if len(ev) == 0 {
		return "", hints
	}
	return "Skewed RSS (per-queue rx packets from qstats, else IRQ counts, else NAPI thread time; openwrt/openwrt#13493): " + strings.Join(ev, "; ") + ".", hints
}
