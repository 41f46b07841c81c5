package steering

import (
	"context"
	"reflect"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture"
)

// Status, Queues and Apply read only the decision's inputs
// (platform.Reader.ReadInputs). This holds only while nothing decided from
// a snapshot looks at the fields that read leaves out: for every preset and
// every mode, the plan, the queue views, the offload and in_sync of a full
// read equal those of an inputs-only read.
func TestInputsDecideAsFullRead(t *testing.T) {
	flows := 32
	for _, name := range fixture.PresetNames() {
		t.Run(name, func(t *testing.T) {
			spec, _ := fixture.Preset(name)
			root := t.TempDir()
			if err := fixture.Build(root, spec); err != nil {
				t.Fatal(err)
			}
			r := platform.NewReader()
			full, err := r.Read(context.Background(), root)
			if err != nil {
				t.Fatal(err)
			}
			in, err := r.ReadInputs(context.Background(), root)
			if err != nil {
				t.Fatal(err)
			}
			if reflect.DeepEqual(full, in) && hasDescriptive(full) {
				t.Fatal("inputs-only read left nothing out")
			}
			for _, m := range plan.Modes {
				for _, fl := range []*int{nil, &flows} {
					pf, errF := plan.NewPlan(full, plan.PlanRequest{Mode: m, Flows: fl})
					pi, errI := plan.NewPlan(in, plan.PlanRequest{Mode: m, Flows: fl})
					if (errF == nil) != (errI == nil) {
						t.Fatalf("mode %s: errors %v / %v", m, errF, errI)
					}
					if errF != nil {
						continue
					}
					if d := testenv.Diff(pf, pi); d != "" {
						t.Errorf("mode %s flows %v: plans differ (-full +inputs):\n%s", m, fl, d)
					}
					if inSync(pf) != inSync(pi) {
						t.Errorf("mode %s: in_sync differs", m)
					}
					if !reflect.DeepEqual(QueueViews(full, pf, ""), QueueViews(in, pi, "")) {
						t.Errorf("mode %s: queue views differ", m)
					}
				}
			}
			if plan.Offload(full) != plan.Offload(in) {
				t.Errorf("offload %s / %s", plan.Offload(full), plan.Offload(in))
			}
		})
	}
}

// hasDescriptive reports whether s holds any field ReadInputs leaves out.
func hasDescriptive(s *platform.Snapshot) bool {
	for _, d := range s.Devices {
		if d.Ifindex != 0 || d.OperState != "" {
			return true
		}
		for _, q := range d.TxQueues {
			if q.XPSRxQs != "" {
				return true
			}
		}
	}
	return false
}
