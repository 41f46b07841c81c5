package steering

import (
	"context"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// TestQueueViewsSources: the queue views carry how each queue's thread and
// IRQ are known, netlink where the snapshot's map names the queue's NAPI
// and the inference rule elsewhere (plan/pairing_netlink.go).
func TestQueueViewsSources(t *testing.T) {
	s, err := platform.Read(context.Background(), fixturetest.Root(t, "x86-8-threaded", nil))
	if err != nil {
		t.Fatal(err)
	}
	var d *platform.Device
	for i := range s.Devices {
		if s.Devices[i].Name == "eth0" {
			d = &s.Devices[i]
		}
	}
	if d == nil || len(d.RxQueues) != 8 {
		t.Fatalf("eth0: %+v", d)
	}
	inferred := plan.PairQueues(s).Device("eth0")
	n := len(d.RxQueues)
	// The kernel names rx-1..rx-7's NAPIs (reversed), not rx-0's.
	for i := 1; i < n; i++ {
		d.RxQueues[i].NAPIID = inferred.Rx[n-1-i].Thread.NAPIID
	}
	views := QueueViews(s, nil, "eth0")
	if len(views) != 1 || len(views[0].Rx) != n {
		t.Fatalf("views %+v", views)
	}
	for i, rx := range views[0].Rx {
		want := platform.SourceNetlink
		if i == 0 {
			want = platform.SourceNAPIOrder
		}
		if rx.NAPI == nil || rx.NAPI.Source != want {
			t.Errorf("%s: NAPI %+v, want source %s", rx.Queue, rx.NAPI, want)
		}
	}
	if irq := views[0].Rx[0].IRQ; irq == nil || irq.Source != platform.SourceIRQName {
		t.Errorf("rx-0 IRQ %+v, want source %s", irq, platform.SourceIRQName)
	}
}
