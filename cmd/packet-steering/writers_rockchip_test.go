package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/steering"
)

// status on the rockchip presets (whose roots carry the target's
// 40-net-smp-affinity): taken over on the R4S, whose A72 IRQs the plan
// places as the hook does; left to it on the R2S's equal cores.
func TestStatusRockchipHook(t *testing.T) {
	for _, tt := range []struct {
		preset, state string
		pinned, left  []int
		human         string
	}{
		{"r4s", plan.WriterTakenOver, []int{24, 88}, nil, "40-net-smp-affinity: taken-over: /etc/hotplug.d/net/40-net-smp-affinity pins irq 24 eth0 to CPU4"},
		{"r2s", plan.WriterDeferred, nil, []int{24, 25}, "40-net-smp-affinity: deferred: "},
	} {
		t.Run(tt.preset, func(t *testing.T) {
			root := planRoot(t, tt.preset)
			code, out, errs := runCLI(t, "status", "--root", root, "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var st steering.Status
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("--json: %v\n%s", err, out)
			}
			i := slices.IndexFunc(st.Writers, func(w plan.WriterStatus) bool { return w.Name == platform.WriterRockchipIRQs })
			if i < 0 {
				t.Fatalf("no %s among %+v", platform.WriterRockchipIRQs, st.Writers)
			}
			w := st.Writers[i]
			if w.State != tt.state || !slices.Equal(w.Pinned, tt.pinned) || !slices.Equal(w.IRQs, tt.left) {
				t.Errorf("%+v, want state %s pinned %v left %v", w, tt.state, tt.pinned, tt.left)
			}
			code, out, _ = runCLI(t, "status", "--root", root)
			if code != 0 || !strings.Contains(out, tt.human) {
				t.Errorf("status output lacks %q:\n%s", tt.human, out)
			}
		})
	}
}
