package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/table"
	"github.com/packet-steering/packet-steering/plan"
)

func TestPrintPhyThreads(t *testing.T) {
	var b bytes.Buffer
	tw := table.New(&b, 0)
	printPhyThreads(tw, []plan.PhyThread{
		{PID: 1292, Thread: "napi/phy0-9", Role: "rx-data", Share: 71, CPUs: "0-3", WantCPUs: "1"},
		{PID: 1296, Thread: "mt76-tx phy0", Role: "tx-worker", CPUs: "3", WantCPUs: "3"},
	})
	printPhyThreads(tw, nil)
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"PHY THREAD", "napi/phy0-9 [1292]", "rx-data (71% of rx CPU time)", "0-3 -> 1", "mt76-tx phy0 [1296]", "tx-worker"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "3 -> 3") || strings.Count(got, "PHY THREAD") != 1 {
		t.Errorf("unexpected output:\n%s", got)
	}
}
