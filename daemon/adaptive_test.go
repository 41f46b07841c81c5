package daemon

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/plan"
)

// The runner follows the mode of the latest apply, not of the last sync
// call: an older apply's sync arriving late (the start apply's, after an
// early set_mode adaptive had started the loop) leaves the loop alone.
func TestAdaptiveRunnerOrder(t *testing.T) {
	var running atomic.Int32
	r := &adaptiveRunner{log: NewLogger(io.Discard, false), run: func(ctx context.Context, _ adaptive.Config) error {
		running.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
		return nil
	}}
	defer r.stop()
	on := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.cancel != nil
	}
	for _, step := range []struct {
		mode plan.Mode
		seq  uint64
		want bool
	}{
		{plan.ModeAdaptive, 2, true}, // set_mode adaptive, the second apply
		{plan.ModeAuto, 1, true},     // the start apply's sync, late: ignored
		{plan.ModeAuto, 3, false},    // a newer apply in auto stops it
		{plan.ModeAdaptive, 3, true}, // the same apply's order again: followed
		{plan.ModeOff, 0, false},     // no order known: followed
	} {
		r.sync(step.mode, step.seq)
		if got := on(); got != step.want {
			t.Fatalf("after sync(%s, %d): loop running %v, want %v", step.mode, step.seq, got, step.want)
		}
	}
	r.stop()
	if n := running.Load(); n != 0 {
		t.Errorf("%d loops still running after stop", n)
	}
}
