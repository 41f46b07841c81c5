package ubusobj

import (
	"testing"

	"github.com/packet-steering/packet-steering/platform/fixture"
	"github.com/packet-steering/packet-steering/steering"
)

// TestGetQueuesSources: get_queues says how each queue's thread and IRQ
// are known. The virtio-4q fixture has no netlink map (a fixture root asks
// no kernel): rx threads by NAPI id order, tx threads by tx thread order,
// IRQs by their names.
func TestGetQueuesSources(t *testing.T) {
	spec, _ := fixture.Preset("virtio-4q")
	root := t.TempDir()
	if err := fixture.Build(root, spec); err != nil {
		t.Fatal(err)
	}
	_, _, c := serve(t, steering.NewEngine(root))
	q, err := call(t, c, "get_queues", `{"device":"eth0"}`)
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := q["devices"].([]any)
	if len(devs) != 1 {
		t.Fatalf("devices %v", q)
	}
	dev := devs[0].(map[string]any)
	source := func(q any, obj string) any {
		m, _ := q.(map[string]any)[obj].(map[string]any)
		return m["source"]
	}
	for dir, want := range map[string]string{"rx": "napi-id-order", "tx": "tx-thread-order"} {
		qs, _ := dev[dir].([]any)
		if len(qs) != 4 {
			t.Fatalf("%s: %d queues", dir, len(qs))
		}
		for i, q := range qs {
			if got := source(q, "napi"); got != want {
				t.Errorf("%s-%d napi source %v, want %s", dir, i, got, want)
			}
			if got := source(q, "irq"); got != "irq-name" {
				t.Errorf("%s-%d irq source %v, want irq-name", dir, i, got)
			}
		}
	}
}
