package ubusobj

import (
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// TestEventDataDevices: the applied event lists every device of
// Result.Devices, also one whose only changes were NAPI thread or IRQ
// moves (no Device on those actions).
func TestEventDataDevices(t *testing.T) {
	res := &steering.Result{
		Mode: plan.ModeAuto,
		Changed: []plan.Action{
			{Kind: plan.KindNAPIAffinity, PID: 300, Thread: "napi/eth0-257", Value: "0"},
			{Kind: plan.KindIRQAffinity, IRQ: 60, Value: "1"},
			{Kind: plan.KindRPSCPUs, Device: "eth1", Queue: "rx-0", Value: "2"},
		},
		Devices: []string{"eth0", "eth1"},
	}
	for _, a := range EventData("start", res) {
		if a.Name != "devices" {
			continue
		}
		var got []string
		for _, c := range a.Children {
			got = append(got, c.Str)
		}
		if len(got) != 2 || got[0] != "eth0" || got[1] != "eth1" {
			t.Errorf("devices %v, want [eth0 eth1]", got)
		}
		return
	}
	t.Error("no devices in the event")
}
