package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/platform"
)

// twoQueues is a snapshot with eth0 (2 rx queues) and eth1 (1 rx queue):
// eth0's queues carry qstats rx packets when pkts is not nil and have
// IRQs of their own with counts irqs (none when nil).
func twoQueues(pkts, irqs []uint64) *platform.Snapshot {
	s := &platform.Snapshot{Devices: []platform.Device{
		{Name: "eth0", RxQueues: []platform.RxQueue{{Name: "rx-0", Index: 0}, {Name: "rx-1", Index: 1}}},
		{Name: "eth1", RxQueues: []platform.RxQueue{{Name: "rx-0", Index: 0, Stats: &platform.QueueStats{Packets: 5}}}},
	}}
	for i := range pkts {
		s.Devices[0].RxQueues[i].Stats = &platform.QueueStats{Packets: pkts[i], HWDrops: -1}
	}
	for i, n := range irqs {
		s.IRQs = append(s.IRQs, platform.IRQ{Number: 40 + i, Name: fmt.Sprintf("eth0-rx-%d", i), Device: "eth0",
			Queue: i, Direction: platform.DirRX, Counts: []uint64{n, 0}})
	}
	return s
}

func TestQueueCounters(t *testing.T) {
	tests := []struct {
		name string
		snap *platform.Snapshot
		want string
	}{
		{"qstats", twoQueues([]uint64{100, 7}, nil), "eth0/rx-0 100 qstats, eth0/rx-1 7 qstats"},
		{"qstats win over irqs", twoQueues([]uint64{100, 7}, []uint64{3, 4}), "eth0/rx-0 100 qstats, eth0/rx-1 7 qstats"},
		{"irqs only", twoQueues(nil, []uint64{3, 4}), "eth0/rx-0 3 irq, eth0/rx-1 4 irq"},
		{"qstats on one queue: irqs", twoQueues([]uint64{100}, []uint64{3, 4}), "eth0/rx-0 3 irq, eth0/rx-1 4 irq"},
		{"neither", twoQueues(nil, nil), ""},
	}
	for _, tt := range tests {
		var got []string
		for _, q := range queueCounters(tt.snap) {
			got = append(got, fmt.Sprintf("%s/%s %d %s", q.Device, q.Queue, q.Count, q.Source))
		}
		if strings.Join(got, ", ") != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, strings.Join(got, ", "), tt.want)
		}
	}
}

func TestQueueDeltas(t *testing.T) {
	qc := func(dev, q string, n uint64, src string) QueueCounters {
		return QueueCounters{Device: dev, Queue: q, Count: n, Source: src}
	}
	tests := []struct {
		name          string
		before, after []QueueCounters
		want          string
	}{
		{"packets", []QueueCounters{qc("eth0", "rx-0", 10, "qstats"), qc("eth0", "rx-1", 5, "qstats")},
			[]QueueCounters{qc("eth0", "rx-0", 110, "qstats"), qc("eth0", "rx-1", 6, "qstats")}, "eth0/rx-0 100 qstats, eth0/rx-1 1 qstats"},
		{"reset counts from zero", []QueueCounters{qc("eth0", "rx-0", 1000, "qstats"), qc("eth0", "rx-1", 5, "qstats")},
			[]QueueCounters{qc("eth0", "rx-0", 40, "qstats"), qc("eth0", "rx-1", 6, "qstats")}, "eth0/rx-0 40 qstats, eth0/rx-1 1 qstats"},
		{"measure changed: left out", []QueueCounters{qc("eth0", "rx-0", 10, "irq")},
			[]QueueCounters{qc("eth0", "rx-0", 110, "qstats")}, ""},
		{"new queue: left out", nil, []QueueCounters{qc("eth0", "rx-0", 110, "qstats")}, ""},
		{"idle device: zero", []QueueCounters{qc("eth0", "rx-0", 10, "irq"), qc("eth1", "rx-0", 3, "irq")},
			[]QueueCounters{qc("eth0", "rx-0", 10, "irq"), qc("eth1", "rx-0", 9, "irq")}, "eth0/rx-0 0 irq, eth1/rx-0 6 irq"},
	}
	for _, tt := range tests {
		var got []string
		for _, q := range QueueDeltas(tt.before, tt.after) {
			got = append(got, fmt.Sprintf("%s/%s %d %s", q.Device, q.Queue, q.Count, q.Source))
		}
		if strings.Join(got, ", ") != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, strings.Join(got, ", "), tt.want)
		}
	}
}

// queueLoad is a load driver whose runs add packets to eth0's queues of a
// counter snapshot.
type queueLoad struct {
	snap *platform.Snapshot
	add  []uint64
	err  error
}

func (l *queueLoad) Run(ctx context.Context, run int) (measurement, error) {
	if l.err != nil {
		return measurement{}, l.err
	}
	for i, n := range l.add {
		if st := l.snap.Devices[0].RxQueues[i].Stats; st != nil {
			st.Packets += n
		}
	}
	for i, n := range l.add {
		if i < len(l.snap.IRQs) {
			l.snap.IRQs[i].Counts[0] += n / 10
		}
	}
	return measurement{Throughput: 1e6, Unit: unitBPS}, nil
}
func (l *queueLoad) Estimate() time.Duration { return time.Second }
func (l *queueLoad) String() string          { return "queue load" }

// queueCounting records each run's per-queue deltas, by qstats where the
// snapshot has them and by IRQs otherwise; a failed read leaves the run
// without them and says why; a failed load is the run's error.
func TestQueueCounting(t *testing.T) {
	tests := []struct {
		name    string
		snap    *platform.Snapshot
		readErr error
		loadErr error
		want    string
		share   string
	}{
		{"qstats", twoQueues([]uint64{10, 10}, []uint64{1, 1}), nil, nil, "eth0/rx-0 970 qstats, eth0/rx-1 30 qstats", "eth0 97/3% qstats"},
		{"irqs", twoQueues(nil, []uint64{1, 1}), nil, nil, "eth0/rx-0 97 irq, eth0/rx-1 3 irq", "eth0 97/3% irq"},
		{"neither", twoQueues(nil, nil), nil, nil, "", "-"},
		{"read fails", twoQueues([]uint64{10, 10}, nil), errors.New("netlink: boom"), nil, "error netlink: boom", "-"},
		{"load fails", twoQueues([]uint64{10, 10}, nil), nil, errors.New("iperf3: refused"), "run error iperf3: refused", "-"},
	}
	for _, tt := range tests {
		load := &queueLoad{snap: tt.snap, add: []uint64{970, 30}, err: tt.loadErr}
		q := &queueCounting{loadDriver: load, read: func(ctx context.Context) ([]QueueCounters, error) {
			if tt.readErr != nil {
				return nil, tt.readErr
			}
			return queueCounters(tt.snap), nil
		}}
		m, err := q.Run(context.Background(), 0)
		var got []string
		switch {
		case err != nil:
			got = []string{"run error " + err.Error()}
		case m.QueueError != "":
			got = []string{"error " + m.QueueError}
		}
		for _, d := range m.Queues {
			got = append(got, fmt.Sprintf("%s/%s %d %s", d.Device, d.Queue, d.Count, d.Source))
		}
		if strings.Join(got, ", ") != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, strings.Join(got, ", "), tt.want)
		}
		if q.String() != "queue load" || q.Estimate() != time.Second {
			t.Errorf("%s: the wrapper does not describe the load: %q %v", tt.name, q.String(), q.Estimate())
		}
		if sh := queueShares(summarizeQueues([]run{{measurement: m}})); sh != tt.share {
			t.Errorf("%s: shares %q, want %q", tt.name, sh, tt.share)
		}
	}
}

// The table gets an "rx queues" column only when some run has per-queue
// counts, with each queue's share of the median counts and the measure.
func TestReportRxQueues(t *testing.T) {
	mk := func(counts ...uint64) run {
		m := measurement{Throughput: 1e8, Unit: unitBPS}
		for i, n := range counts {
			m.Queues = append(m.Queues, QueueDelta{Device: "eth0", Queue: fmt.Sprintf("rx-%d", i), Count: n, Source: "qstats"})
		}
		return run{measurement: m}
	}
	tests := []struct {
		name string
		runs [][]run
		want string // "" no column
	}{
		{"skewed then spread", [][]run{{mk(900, 100), mk(1100, 100)}, {mk(500, 500), mk(600, 400)}}, "eth0 91/9% qstats|eth0 55/45% qstats"},
		{"no queue counts", [][]run{{mk(), mk()}, {mk(), mk()}}, ""},
	}
	for _, tt := range tests {
		rep := &report{Load: "x", Runs: 2, Metric: metricThroughput}
		for i, rs := range tt.runs {
			rep.Results = append(rep.Results, result{Candidate: candidate{Name: fmt.Sprintf("c%d", i)}, Runs: rs})
		}
		rep.finish()
		var b bytes.Buffer
		if err := rep.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		head := strings.SplitN(out, "\n", 2)[0]
		if tt.want == "" {
			if strings.Contains(head, "rx queues") {
				t.Errorf("%s: an rx queues column without counts:\n%s", tt.name, out)
			}
			continue
		}
		for _, cell := range strings.Split(tt.want, "|") {
			if !strings.Contains(out, cell) {
				t.Errorf("%s: no %q in\n%s", tt.name, cell, out)
			}
		}
		if !strings.Contains(head, "rx queues") {
			t.Errorf("%s: no rx queues column:\n%s", tt.name, out)
		}
	}
}
