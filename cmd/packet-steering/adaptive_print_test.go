package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/adaptive"
)

// The loop's per-unit loads are printed with their source, and the qstats
// rate where the sample had it.
func TestPrintAdaptiveUnits(t *testing.T) {
	pps := 4500.0
	st := &adaptive.Status{Sampling: &adaptive.SamplingStatus{Running: true, IntervalMS: 2000, Active: true, PPS: 5000,
		Units: []adaptive.UnitLoad{
			{Device: "eth0", Queue: "rx-0", Kind: adaptive.UnitRPS, CPU: 1, Load: 0.54, Source: adaptive.LoadQstatsShare, PPS: &pps},
			{Device: "eth0", Queue: "rx-1", Kind: adaptive.UnitNAPI, CPU: 2, Load: 0.2, Source: adaptive.LoadNAPITime},
		}}}
	var b bytes.Buffer
	printAdaptive(&b, st)
	for _, want := range []string{
		"eth0/rx-0 rps on cpu1: load  54% (softirq-by-qstats-packets, 4500 rx packets/s (qstats))",
		"eth0/rx-1 napi on cpu2: load  20% (napi-thread-time)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}
