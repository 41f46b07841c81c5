package ubusobj

import (
	"fmt"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"testing"

	"github.com/packet-steering/packet-steering/steering"
)

// TestGetQueuesVirtio: get_queues over the bus on the 4-queue virtio-net
// guest (the real engine on the fixture): rx-i carries its rx thread
// napi/eth0-(8193+i) and virtio0-input.i, tx-i its tx thread (a
// napi/eth0-0) and virtio0-output.i. This is the reply the LuCI map draws.
func TestGetQueuesVirtio(t *testing.T) {
	root := fixturetest.Root(t, "virtio-4q", nil)
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
	rx, _ := dev["rx"].([]any)
	tx, _ := dev["tx"].([]any)
	if len(rx) != 4 || len(tx) != 4 {
		t.Fatalf("rx %d tx %d queues", len(rx), len(tx))
	}
	field := func(q any, obj, key string) any {
		m, _ := q.(map[string]any)[obj].(map[string]any)
		return m[key]
	}
	for i := 0; i < 4; i++ {
		if got := field(rx[i], "napi", "thread"); got != fmt.Sprintf("napi/eth0-%d", 8193+i) {
			t.Errorf("rx-%d napi thread %v", i, got)
		}
		if got := field(rx[i], "irq", "name"); got != fmt.Sprintf("virtio0-input.%d", i) {
			t.Errorf("rx-%d irq %v", i, got)
		}
		if got := field(tx[i], "napi", "thread"); got != "napi/eth0-0" {
			t.Errorf("tx-%d napi thread %v", i, got)
		}
		if got := field(tx[i], "napi", "pid"); got != int64(406-2*i) {
			t.Errorf("tx-%d napi pid %v (%T)", i, got, got)
		}
		if got := field(tx[i], "irq", "name"); got != fmt.Sprintf("virtio0-output.%d", i) {
			t.Errorf("tx-%d irq %v", i, got)
		}
		if got := field(tx[i], "napi", "want_cpus"); got != fmt.Sprint(i) {
			t.Errorf("tx-%d napi want_cpus %v", i, got)
		}
	}
}
