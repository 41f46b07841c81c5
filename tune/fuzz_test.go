package tune

import (
	"math"
	"strings"
	"testing"
)

// FuzzParseCandidates: any text either fails or gives candidates whose
// canonical names parse back to the same list.
func FuzzParseCandidates(f *testing.F) {
	for _, s := range []string{"off;auto", "eth0:2/br-lan:0", "eth0:1,00000000 all", ":", "a:b/c", ";;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := parseCandidates(s)
		if err != nil {
			return
		}
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = c.Name
		}
		again, err := parseCandidates(strings.Join(names, ";"))
		if err != nil {
			t.Fatalf("canonical names %q do not parse: %v", names, err)
		}
		if len(again) != len(cs) {
			t.Fatalf("round trip changed the count: %d != %d", len(again), len(cs))
		}
	})
}

// FuzzParseLoadOutput: a load's output (iperf3 JSON or anything else)
// never panics, and a number it returns is finite.
func FuzzParseLoadOutput(f *testing.F) {
	// Small iperf3-shaped seeds: the fuzzer mutates them faster than the
	// full captures in testdata (which TestParseIperf covers).
	f.Add([]byte(`{"start":{"connecting_to":{"host":"198.18.0.2"},"test_start":{"protocol":"TCP"}},"end":{"sum_sent":{"bits_per_second":2,"retransmits":3},"sum_received":{"bits_per_second":1}}}`))
	f.Add([]byte(`{"start":{"test_start":{"protocol":"UDP"}},"end":{"sum_received":{"bits_per_second":1,"lost_percent":2},"sum_received_bidir_reverse":{"bits_per_second":1,"lost_packets":1,"packets":4}}}`))
	f.Add([]byte(`{"error":"unable to connect"}`))
	for _, s := range []string{`{"bps": 1e9}`, `{"value": -1}`, "x\n12.5 Mbit/s\n", `{"end": {"sum_received": []}}`, `{"start":{"test_start":{"protocol":"UDP"}},"end":{"sum":{"packets":0,"lost_packets":1}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseLoadOutput(b)
		if err != nil {
			return
		}
		if math.IsNaN(m.Throughput) || math.IsInf(m.Throughput, 0) {
			t.Fatalf("non-finite throughput %v from %q", m.Throughput, b)
		}
	})
}
