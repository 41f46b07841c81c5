package steering

import (
	"context"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// TestStockModeUnpinsAutoOnlyThreads: on the 4-queue virtio-net guest, auto
// pins each tx thread (napi/eth0-0) to its queue's CPU; a switch to a stock
// mode, which places only rx threads, puts them back on every CPU (where a
// reboot in that mode finds them), so the knobs follow the settings, not
// the modes before them. In sync afterwards; the rx threads as the stock
// mode places them.
func TestStockModeUnpinsAutoOnlyThreads(t *testing.T) {
	for _, m := range []plan.Mode{plan.ModeAll, plan.ModeLegacy, plan.ModeOff} {
		t.Run(string(m), func(t *testing.T) {
			ctx := context.Background()
			e := NewEngine(fixturetest.Root(t, "virtio-4q", nil))
			if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAuto}); err != nil {
				t.Fatal(err)
			}
			txCPUs := func() []string {
				qs, err := e.Queues(ctx, "eth0")
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, tx := range qs[0].Tx {
					if tx.NAPI == nil || tx.NAPI.Thread != "napi/eth0-0" {
						t.Fatalf("%s: thread %+v", tx.Queue, tx.NAPI)
					}
					out = append(out, tx.NAPI.CPUs)
				}
				return out
			}
			pinned := txCPUs()
			if pinned[0] == "0-3" {
				t.Fatalf("auto left the tx threads on every CPU (%v): nothing to test", pinned)
			}
			res, err := e.SetMode(ctx, SetModeRequest{Mode: m})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range txCPUs() {
				if c != "0-3" {
					t.Errorf("mode %s after auto: tx-%d thread on %q (auto put it on %q), want 0-3", m, i, c, pinned[i])
				}
			}
			if len(res.Failed) > 0 {
				t.Errorf("failed: %+v", res.Failed)
			}
			st, err := e.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !st.InSync {
				t.Errorf("mode %s: not in sync after the apply", m)
			}
			// A second apply has nothing more to do for the threads.
			_, p, err := e.Plan(ctx, plan.PlanRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range p.Actions {
				if a.Kind == plan.KindNAPIAffinity && a.Thread == "napi/eth0-0" && !plan.SameValue(a.Kind, a.Current, a.Value) {
					t.Errorf("still planned: %+v", a)
				}
			}
		})
	}
}
