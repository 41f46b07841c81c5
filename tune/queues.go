package tune

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// Per-queue load: what each rx queue of a multi-queue device received
// during a run, by the best measure the machine has (plan.DeviceRxCounts):
// rx packets from netlink qstats-get (Linux 6.9+, drivers that keep them;
// not veth), else each queue's own IRQ's interrupts from /proc/interrupts.
// A device with neither (one IRQ for all queues and no qstats) has no
// per-queue load; the per-CPU counters still count its work.

// QueueCounters is one rx queue's cumulative count and its measure
// (plan.CountQstats or plan.CountIRQ).
type QueueCounters struct {
	_      outline.NoCompare
	Device string
	Queue  string
	Count  uint64
	Source string
}

// ReadQueueCounters reads the rx queue counts of every device with more
// than one rx queue below root (a Read of the machine: netlink where root
// is "/", the files otherwise), in device and queue order.
func ReadQueueCounters(ctx context.Context, r *platform.Reader, root string) ([]QueueCounters, error) {
	s, err := r.Read(ctx, root)
	if err != nil {
		return nil, outline.Errorf("read queue counters: %w", err)
	}
	return queueCounters(s), nil
}

// queueCounters is the rx queue counts of s's devices with more than one
// rx queue.
func queueCounters(s *platform.Snapshot) []QueueCounters {
	counts := plan.RxCountsOf(s)
	var out []QueueCounters
	for _, d := range s.Devices {
		c, ok := counts[d.Name]
		if !ok || len(d.RxQueues) < 2 {
			continue
		}
		for i, q := range d.RxQueues {
			out = append(out, QueueCounters{Device: d.Name, Queue: q.Name, Count: c.Counts[i], Source: c.Source})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out
}

// QueueDelta is what one run added to an rx queue's count: packets
// (Source "qstats") or interrupts ("irq").
type QueueDelta struct {
	_      outline.NoCompare
	Device string `json:"device"`
	Queue  string `json:"queue"`
	Count  uint64 `json:"count"`
	Source string `json:"source"`
}

// QueueDeltas subtracts before from after per queue. A queue only in
// after, or whose measure changed, is left out; a count that went back
// (qstats count since the queue's last reconfiguration) counts from zero.
// The lists are short (the rx queues of a router's multi-queue devices),
// so they are searched rather than indexed.
func QueueDeltas(before, after []QueueCounters) []QueueDelta {
	var out []QueueDelta
	for _, a := range after {
		for _, b := range before {
			if b.Device != a.Device || b.Queue != a.Queue || b.Source != a.Source {
				continue
			}
			n := a.Count
			if n >= b.Count {
				n -= b.Count
			}
			out = append(out, QueueDelta{Device: a.Device, Queue: a.Queue, Count: n, Source: a.Source})
			break
		}
	}
	return out
}

// queueCounting is a load driver that reads the rx queue counts before
// and after each run of the load it wraps and records their deltas in the
// run's measurement. The counts are optional: a read that fails leaves
// the run without them (QueueError says why).
type queueCounting struct {
	loadDriver
	read func(ctx context.Context) ([]QueueCounters, error)
}

// Run runs the wrapped load between two reads of the queue counts.
func (q *queueCounting) Run(ctx context.Context, run int) (measurement, error) {
	before, berr := q.read(ctx)
	m, err := q.loadDriver.Run(ctx, run)
	if err != nil {
		return m, err
	}
	after, aerr := q.read(ctx)
	if berr != nil || aerr != nil {
		e := berr
		if e == nil {
			e = aerr
		}
		m.QueueError = e.Error()
		return m, nil
	}
	m.Queues = QueueDeltas(before, after)
	return m, nil
}

// Estimate is the wrapped load's (two reads of the machine add a few
// milliseconds).
func (q *queueCounting) Estimate() time.Duration { return q.loadDriver.Estimate() }

// queueSummary is one rx queue's per-run deltas over the runs.
type queueSummary struct {
	_      outline.NoCompare
	Device string  `json:"device"`
	Queue  string  `json:"queue"`
	Source string  `json:"source"`
	Count  summary `json:"count"`
}

// summarizeQueues summarises the runs' queue deltas per queue, in the
// order they first appear.
func summarizeQueues(runs []run) []queueSummary {
	var out []queueSummary
	var xs [][]float64
	for _, r := range runs {
	next:
		for _, q := range r.Queues {
			for i, o := range out {
				if o.Device == q.Device && o.Queue == q.Queue && o.Source == q.Source {
					xs[i] = append(xs[i], float64(q.Count))
					continue next
				}
			}
			out = append(out, queueSummary{Device: q.Device, Queue: q.Queue, Source: q.Source})
			xs = append(xs, []float64{float64(q.Count)})
		}
	}
	for i := range out {
		out[i].Count = summarize(xs[i])
	}
	return out
}

// queueShares is the table cell of a result's rx queues: per device, each
// queue's share of the device's median counts in percent and the measure,
// "eth0 97/1/1/1% qstats"; "-" without any.
func queueShares(qs []queueSummary) string {
	var parts []string
	for i := 0; i < len(qs); {
		j := i
		var total float64
		for j < len(qs) && qs[j].Device == qs[i].Device && qs[j].Source == qs[i].Source {
			total += qs[j].Count.Median
			j++
		}
		if total > 0 {
			var pct []string
			for _, q := range qs[i:j] {
				pct = append(pct, outline.FormatFloat(100*q.Count.Median/total, 'f', 0, 64))
			}
			parts = append(parts, qs[i].Device+" "+strings.Join(pct, "/")+"% "+qs[i].Source)
		}
		i = j
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
