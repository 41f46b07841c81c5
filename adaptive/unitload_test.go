package adaptive

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// unitSample is one unit's counters for twoSamples: cumulative qstats
// packets at the second sample (the first has 0), or no counts (-1).
type unitSample struct {
	queue   string
	kind    string
	cpu     int
	packets int64
}

// twoSamples steps a controller over two full samples 2 s apart: CPU0's
// softirq time is soft0 of the interval, CPU1 idle; every NAPI unit's
// thread ran 20% of the interval.
func twoSamples(t *testing.T, cfg Config, soft0 float64, units []unitSample) Decision {
	t.Helper()
	c, err := NewController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(at time.Time, second bool) Sample {
		s := Sample{Time: at, Full: true}
		for cpu := 0; cpu < 2; cpu++ {
			cc := CPUCounters{CPU: cpu}
			if second {
				cc.Processed, cc.Total, cc.Idle = 100000, 200, 200
				if cpu == 0 {
					cc.Softirq = uint64(soft0 * 200)
					cc.Idle = 200 - cc.Softirq
				}
			}
			s.CPUs = append(s.CPUs, cc)
		}
		for i, u := range units {
			uc := UnitCounters{Unit: Unit{Device: "eth0", Queue: u.queue, Kind: u.kind, Home: u.cpu, CPU: u.cpu}}
			if u.kind == UnitNAPI {
				uc.Unit.PID = 100 + i
				uc.HasTicks = true
				if second {
					uc.Ticks = 40
				}
			}
			if u.packets >= 0 {
				uc.HasPackets = true
				if second {
					uc.Packets = uint64(u.packets)
				}
			}
			s.Units = append(s.Units, uc)
		}
		return s
	}
	c.Step(mk(t0, false))
	return c.Step(mk(t0.Add(2*time.Second), true))
}

func fmtUnits(us []UnitLoad) string {
	var parts []string
	for _, u := range us {
		p := fmt.Sprintf("%s %.0f%% %s", u.Queue, u.Load*100, u.Source)
		if u.PPS != nil {
			p += fmt.Sprintf(" %.0fpps", *u.PPS)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// An RPS unit's load is its share of its CPU's softirq time: by qstats
// packets where every RPS unit on the CPU has them, else even.
func TestUnitLoadSources(t *testing.T) {
	cfg := DefaultConfig()
	tests := []struct {
		name  string
		units []unitSample
		want  string
	}{
		{"qstats on both", []unitSample{{"rx-0", UnitRPS, 0, 9000}, {"rx-1", UnitRPS, 0, 1000}},
			"rx-0 54% softirq-by-qstats-packets 4500pps, rx-1 6% softirq-by-qstats-packets 500pps"},
		{"no qstats", []unitSample{{"rx-0", UnitRPS, 0, -1}, {"rx-1", UnitRPS, 0, -1}},
			"rx-0 30% softirq-even-share, rx-1 30% softirq-even-share"},
		{"qstats on one of two", []unitSample{{"rx-0", UnitRPS, 0, 9000}, {"rx-1", UnitRPS, 0, -1}},
			"rx-0 30% softirq-even-share 4500pps, rx-1 30% softirq-even-share"},
		{"qstats but no packets", []unitSample{{"rx-0", UnitRPS, 0, 0}, {"rx-1", UnitRPS, 0, 0}},
			"rx-0 30% softirq-even-share 0pps, rx-1 30% softirq-even-share 0pps"},
		{"per CPU: qstats on cpu0, none on cpu1", []unitSample{{"rx-0", UnitRPS, 0, 3000}, {"rx-1", UnitRPS, 0, 1000}, {"rx-2", UnitRPS, 1, -1}},
			"rx-0 45% softirq-by-qstats-packets 1500pps, rx-1 15% softirq-by-qstats-packets 500pps, rx-2 0% softirq-even-share"},
		{"napi units keep their thread time", []unitSample{{"rx-0", UnitNAPI, 0, 5000}, {"rx-1", UnitNAPI, 1, -1}},
			"rx-0 20% napi-thread-time 2500pps, rx-1 20% napi-thread-time"},
	}
	for _, tt := range tests {
		d := twoSamples(t, cfg, 0.6, tt.units)
		if got := fmtUnits(d.Units); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// With qstats the controller sees that rx-0 fills cpu0 by itself (moving
// it would not help) and moves the light rx-1; with an even share it
// cannot tell them apart and moves the first.
func TestUnitLoadMoves(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HotIntervals = 1
	tests := []struct {
		name   string
		units  []unitSample
		queue  string
		reason string
	}{
		{"qstats", []unitSample{{"rx-0", UnitRPS, 0, 90000}, {"rx-1", UnitRPS, 0, 10000}}, "rx-1", "queue load 9% (softirq-by-qstats-packets)"},
		{"no qstats", []unitSample{{"rx-0", UnitRPS, 0, -1}, {"rx-1", UnitRPS, 0, -1}}, "rx-0", "queue load 45% (softirq-even-share)"},
	}
	for _, tt := range tests {
		d := twoSamples(t, cfg, 0.9, tt.units)
		if len(d.Moves) != 1 {
			t.Errorf("%s: moves %v, want one (units %s)", tt.name, d.Moves, fmtUnits(d.Units))
			continue
		}
		m := d.Moves[0]
		if m.Queue != tt.queue || m.To != 1 || !strings.Contains(m.Reason, tt.reason) {
			t.Errorf("%s: move %s, want %s to cpu1 with %q", tt.name, m, tt.queue, tt.reason)
		}
	}
}
