package steering

import (
	"context"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// get_queues (Engine.Queues) lists a wifi device's mt76 phy threads with
// their roles and the CPUs the plan wants for each (plan.PhyThreads over
// the queue view's wanted values); a device without a phy lists none.
func TestQueuesPhyThreads(t *testing.T) {
	ctx := context.Background()
	e := NewEngine(deviceTestRoot(t, "bpi-r4", plan.ModeAuto))
	qs, err := e.Queues(ctx, "phy0-ap1")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 {
		t.Fatalf("phy0-ap1: %d views", len(qs))
	}
	roles := map[string]string{}
	for _, th := range qs[0].Threads {
		roles[th.Thread] = th.Role
		if th.WantCPUs == "" {
			t.Errorf("%s: no wanted CPUs", th.Thread)
		}
	}
	for name, role := range map[string]string{"napi/phy0-9": "rx-data", "napi/phy0-11": "rx", "mt76-tx phy0": "tx-worker"} {
		if roles[name] != role {
			t.Errorf("%s: role %q, want %q (all: %v)", name, roles[name], role, roles)
		}
	}
	all, err := e.Queues(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all {
		if d.Kind != platform.KindWifi && len(d.Threads) != 0 {
			t.Errorf("%s (%s): phy threads %+v", d.Name, d.Kind, d.Threads)
		}
	}
}
