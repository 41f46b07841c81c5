package adaptive

import (
	"fmt"
	"github.com/packet-steering/packet-steering/platform"
	"strings"
	"testing"
	"time"
)

// simUnit is a queue in the simulated machine: its load (fraction of one
// CPU) at each step.
type simUnit struct {
	queue string
	home  int
	kind  string
	load  func(step int) float64
}

// simWorld turns per-step loads into cumulative counters, feeds them to a
// controller, and carries the moves out as the engine would.
type simWorld struct {
	cpus    int
	units   []simUnit
	where   map[string]int
	ticks   map[string]float64
	waits   map[string]float64 // nanoseconds
	cpuTick []struct{ total, idle, softirq, squeeze, dropped, processed float64 }
	// other is the non-network busy fraction per CPU; squeeze and drop
	// rates per CPU (per second) at a step; pps the packet rate.
	other   func(step, cpu int) float64
	squeeze func(step, cpu int) float64
	drops   func(step, cpu int) float64
	pps     func(step int) float64
	// quick: take a quick sample when the controller does not want a
	// full one.
	quick bool
}

type simMove struct {
	step int
	Move
}

func constant(v float64) func(int) float64 { return func(int) float64 { return v } }

// phases returns a load that is v in steps [from, to) and 0 elsewhere.
func phases(v float64, spans ...[2]int) func(int) float64 {
	return func(s int) float64 {
		for _, sp := range spans {
			if s >= sp[0] && s < sp[1] {
				return v
			}
		}
		return 0
	}
}

func (w *simWorld) run(t *testing.T, cfg Config, steps int) ([]simMove, []Decision) {
	t.Helper()
	c, err := NewController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.where = map[string]int{}
	w.ticks = map[string]float64{}
	w.waits = map[string]float64{}
	for _, u := range w.units {
		w.where[u.queue] = u.home
	}
	w.cpuTick = make([]struct{ total, idle, softirq, squeeze, dropped, processed float64 }, w.cpus)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var moves []simMove
	var decs []Decision
	last := map[string]time.Time{}
	full := true
	for step := 0; step < steps; step++ {
		dt := cfg.Interval
		if step > 0 {
			dt = decs[len(decs)-1].Next
		}
		now = now.Add(dt)
		secs := dt.Seconds()
		// Threads on one CPU share it: when their demand is above 1,
		// each runs its share and waits for the rest.
		demand := make([]float64, w.cpus)
		for _, u := range w.units {
			demand[w.where[u.queue]] += u.load(step)
		}
		net := make([]float64, w.cpus)
		for _, u := range w.units {
			l, d := u.load(step), demand[w.where[u.queue]]
			run := l
			if d > 1 {
				run = l / d
			}
			w.ticks[u.queue] += run * secs * platform.UserHZ
			w.waits[u.queue] += (l - run) * secs * 1e9
			net[w.where[u.queue]] += run
		}
		pps := 50000.0
		if w.pps != nil {
			pps = w.pps(step)
		}
		for cpu := range w.cpus {
			busy := net[cpu]
			if w.other != nil {
				busy += w.other(step, cpu)
			}
			if busy > 1 {
				busy = 1
			}
			ct := &w.cpuTick[cpu]
			ct.total += secs * platform.UserHZ
			ct.idle += (1 - busy) * secs * platform.UserHZ
			ct.processed += pps * secs / float64(w.cpus)
			if w.squeeze != nil {
				ct.squeeze += w.squeeze(step, cpu) * secs
			}
			if w.drops != nil {
				ct.dropped += w.drops(step, cpu) * secs
			}
		}
		s := Sample{Time: now, Full: full || !w.quick}
		for cpu, ct := range w.cpuTick {
			cc := CPUCounters{CPU: cpu, Processed: uint64(ct.processed), Dropped: uint64(ct.dropped), TimeSqueeze: uint64(ct.squeeze)}
			if s.Full {
				cc.Total, cc.Idle, cc.Softirq = uint64(ct.total), uint64(ct.idle), uint64(ct.softirq)
			}
			s.CPUs = append(s.CPUs, cc)
		}
		if s.Full {
			for i, u := range w.units {
				kind := u.kind
				if kind == "" {
					kind = UnitNAPI
				}
				s.Units = append(s.Units, UnitCounters{
					Unit:  Unit{Device: "eth0", Queue: u.queue, Kind: kind, PID: 100 + i, Home: u.home, CPU: w.where[u.queue]},
					Ticks: uint64(w.ticks[u.queue]), HasTicks: true, WaitNS: uint64(w.waits[u.queue]), HasWait: true,
				})
			}
		}
		d := c.Step(s)
		decs = append(decs, d)
		if len(d.Moves) > cfg.MaxMoves {
			t.Fatalf("step %d: %d moves, bound %d", step, len(d.Moves), cfg.MaxMoves)
		}
		for _, m := range d.Moves {
			if m.From != w.where[m.Queue] {
				t.Fatalf("step %d: move %s from cpu%d, but it is on cpu%d", step, m.Key(), m.From, w.where[m.Queue])
			}
			if m.To < 0 || m.To >= w.cpus || m.To == m.From {
				t.Fatalf("step %d: move %s to cpu%d", step, m.Key(), m.To)
			}
			if at, ok := last[m.Queue]; ok && now.Sub(at) < cfg.MinDwell {
				t.Fatalf("step %d: %s moved again after %s, dwell %s", step, m.Key(), now.Sub(at), cfg.MinDwell)
			}
			last[m.Queue] = now
			w.where[m.Queue] = m.To
			moves = append(moves, simMove{step: step, Move: m})
		}
		full = d.WantFull
	}
	return moves, decs
}

func fmtMoves(ms []simMove) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%d:%s:%d->%d ", m.step, m.Queue, m.From, m.To)
	}
	return strings.TrimSpace(b.String())
}

func TestAdaptiveController(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MinDwell = 10 * time.Second // five active intervals
	tests := []struct {
		name  string
		world simWorld
		steps int
		cfg   func(*Config)
		// want is the moves as "step:queue:from->to", in order.
		want string
		// reason, when set, must be in the first move's reason.
		reason string
	}{
		{
			name: "steady and balanced: nothing moves",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0.6)},
				{queue: "rx-1", home: 1, load: constant(0.55)},
				{queue: "rx-2", home: 0, load: constant(0.02)},
				{queue: "rx-3", home: 1, load: constant(0.03)},
			}},
			steps: 40,
		},
		{
			name: "saturated but balanced: nothing moves (the target is saturated too)",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0.5)},
				{queue: "rx-1", home: 1, load: constant(0.5)},
				{queue: "rx-2", home: 0, load: constant(0.45)},
				{queue: "rx-3", home: 1, load: constant(0.45)},
			}},
			steps: 40,
		},
		{
			name: "two flows collide on cpu0: the lighter queue moves once, after two hot intervals",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0.5)},
				{queue: "rx-1", home: 1, load: constant(0.02)},
				{queue: "rx-2", home: 0, load: constant(0.45)},
				{queue: "rx-3", home: 1, load: constant(0.0)},
			}},
			steps:  40,
			want:   "2:rx-2:0->1",
			reason: "cpu0 saturated (net load 95%",
		},
		{
			name: "two threads want more than their CPU: their wait shows the demand",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0.7)},
				{queue: "rx-2", home: 0, load: constant(0.6)},
				{queue: "rx-1", home: 1, load: constant(0.1)},
			}},
			steps:  10,
			want:   "2:rx-2:0->1",
			reason: "cpu0 saturated (net load 130% (softirq 0% + NAPI threads 130%, of which waiting for the CPU 30%)",
		},
		{
			name: "one queue fills its CPU alone: moving it helps nothing",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0.97)},
				{queue: "rx-1", home: 1, load: constant(0.1)},
			}},
			steps: 30,
		},
		{
			name: "load shifts: phase 1 collides on cpu0, phase 2 on cpu1; the moved queue goes back once its CPU has room",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: phases(0.5, [2]int{0, 15})},
				{queue: "rx-2", home: 0, load: phases(0.45, [2]int{0, 15})},
				{queue: "rx-1", home: 1, load: phases(0.5, [2]int{15, 30})},
				{queue: "rx-3", home: 1, load: phases(0.45, [2]int{15, 30})},
			}},
			steps: 30,
			// rx-2 goes to cpu1; at 15 the load moves to cpu1, where rx-2
			// sits idle; rx-3 (cpu1) moves to cpu0 after two hot
			// intervals; rx-2 goes home once dwell and three cool
			// intervals have passed.
			want: "2:rx-2:0->1 16:rx-3:1->0 17:rx-2:1->0",
		},
		{
			name: "time_squeeze rising marks a saturated CPU",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0.35)},
				{queue: "rx-2", home: 0, load: constant(0.3)},
				{queue: "rx-1", home: 1, load: constant(0.05)},
			}, squeeze: func(_, cpu int) float64 {
				if cpu == 0 {
					return 200
				}
				return 0
			}},
			steps:  10,
			want:   "2:rx-2:0->1",
			reason: "cpu0 saturated (time_squeeze 200/s)",
		},
		{
			name: "a CPU busy with user space: net load over half counts",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0.3)},
				{queue: "rx-2", home: 0, load: constant(0.3)},
				{queue: "rx-1", home: 1, load: constant(0.05)},
			}, other: func(_, cpu int) float64 {
				if cpu == 0 {
					return 0.4
				}
				return 0
			}},
			steps:  10,
			want:   "2:rx-0:0->1",
			reason: "busy 100% with net load 60%",
		},
		{
			name: "a process fills the CPU of a lone queue: the queue moves, and goes back only once the process is gone",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0.2)},
				{queue: "rx-1", home: 1, load: constant(0.05)},
			}, other: func(s, cpu int) float64 {
				if cpu == 0 && s < 20 {
					return 0.9
				}
				return 0
			}},
			cfg:   func(c *Config) { c.BusyNet = 0.1 },
			steps: 30,
			// Hot from step 1, moved at 2; while the process runs cpu0
			// has no room (busy 90% + the queue's 20%); from step 20
			// three cool intervals.
			want:   "2:rx-0:0->1 22:rx-0:1->0",
			reason: "cpu0 saturated (busy 100% with net load 20%)",
		},
		{
			name: "traffic stops: the deviation goes back after the dwell, then sampling backs off",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: phases(0.5, [2]int{0, 6})},
				{queue: "rx-2", home: 0, load: phases(0.45, [2]int{0, 6})},
			}, pps: func(s int) float64 {
				if s < 6 {
					return 50000
				}
				return 10
			}, quick: true},
			steps:  20,
			want:   "2:rx-2:0->1 7:rx-2:1->0",
			reason: "cpu0 saturated",
		},
		{
			name: "dwell bounds flapping: the collision changes CPU every two intervals",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: func(s int) float64 { return 0.5 * float64(1-(s/2)%2) }},
				{queue: "rx-2", home: 0, load: func(s int) float64 { return 0.45 * float64(1-(s/2)%2) }},
				{queue: "rx-1", home: 1, load: func(s int) float64 { return 0.5 * float64((s/2)%2) }},
				{queue: "rx-3", home: 1, load: func(s int) float64 { return 0.45 * float64((s/2)%2) }},
			}},
			steps: 40,
			// Every queue moves at most once per MinDwell (checked for
			// every case by run). Two moves find a placement where
			// neither phase collides, and then nothing moves again.
			want: "3:rx-3:1->0 5:rx-2:0->1",
		},
		{
			name: "at most MaxMoves per interval: three hot CPUs, one idle",
			world: simWorld{cpus: 4, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0.5)},
				{queue: "rx-4", home: 0, load: constant(0.45)},
				{queue: "rx-1", home: 1, load: constant(0.5)},
				{queue: "rx-5", home: 1, load: constant(0.48)},
				{queue: "rx-2", home: 2, load: constant(0.5)},
				{queue: "rx-6", home: 2, load: constant(0.47)},
			}},
			steps: 12,
			// One move per interval, from the most loaded CPU (cpu1,
			// 98%); after it cpu0 and cpu2 are still hot, but cpu3 holds
			// 50%: 0.5+0.45 > 0.95-0.15, so nothing more can help.
			want: "2:rx-1:1->3",
		},
		{
			name: "no traffic: no moves, sampling backs off to the maximum",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, load: constant(0)},
			}, pps: constant(0), quick: true},
			steps: 12,
		},
		{
			name: "RPS units: load is the softirq share",
			world: simWorld{cpus: 2, units: []simUnit{
				{queue: "rx-0", home: 0, kind: UnitRPS, load: constant(0)},
				{queue: "rx-1", home: 0, kind: UnitRPS, load: constant(0)},
			}},
			steps: 10,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			w := tc.world
			moves, decs := w.run(t, c, tc.steps)
			if got := fmtMoves(moves); got != tc.want {
				t.Errorf("moves\n got %q\nwant %q", got, tc.want)
				for i, d := range decs {
					t.Logf("step %d: next %s full %v active %v loads %+v moves %+v", i, d.Next, d.WantFull, d.Active, d.Loads, d.Moves)
				}
			}
			if tc.reason != "" && (len(moves) == 0 || !strings.Contains(moves[0].Reason, tc.reason)) {
				t.Errorf("first move's reason: want %q in %+v", tc.reason, moves)
			}
		})
	}
}

func TestAdaptiveIdleBackoff(t *testing.T) {
	cfg := DefaultConfig()
	w := simWorld{cpus: 2, units: []simUnit{{queue: "rx-0", home: 0, load: constant(0)}}, pps: constant(5), quick: true}
	_, decs := w.run(t, cfg, 10)
	var got []string
	fulls := 0
	for i, d := range decs {
		got = append(got, d.Next.String())
		if d.WantFull && i > 0 {
			fulls++
		}
	}
	want := "2s 4s 8s 16s 32s 32s 32s 32s 32s 32s"
	if strings.Join(got, " ") != want {
		t.Errorf("intervals %v, want %s", got, want)
	}
	if fulls != 0 {
		t.Errorf("%d full samples asked for without traffic, want 0", fulls)
	}
}

func TestAdaptiveConfigCheck(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"zero interval", func(c *Config) { c.Interval = 0 }, false},
		{"idle below active", func(c *Config) { c.MaxIdleInterval = time.Second }, false},
		{"low above high", func(c *Config) { c.LowLoad = 0.9 }, false},
		{"high above 1", func(c *Config) { c.HighLoad = 1.5 }, false},
		{"no moves", func(c *Config) { c.MaxMoves = 0 }, false},
		{"negative margin", func(c *Config) { c.Margin = -1 }, false},
	}
	for _, tc := range tests {
		c := DefaultConfig()
		tc.mod(&c)
		_, err := NewController(c)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
