package steering

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"golang.org/x/sys/unix"
)

// faultWriter fails the writes of one path with EPERM (a failure: the
// device is rolled back) and refuses those of another with EINVAL (an IRQ
// the kernel will not move: recorded, not failed), while on.
type faultWriter struct {
	Writer
	fail, refuse string
	on           bool
}

func (w *faultWriter) WriteKnob(rel, value string) error {
	switch {
	case w.on && rel == w.fail:
		return &fs.PathError{Op: "write", Path: rel, Err: unix.EPERM}
	case w.on && rel == w.refuse:
		return &fs.PathError{Op: "write", Path: rel, Err: unix.EINVAL}
	}
	return w.Writer.WriteKnob(rel, value)
}

// knobPath is the file an action of a queue or an IRQ writes.
func knobPath(a plan.Action) string {
	if a.Kind == plan.KindIRQAffinity {
		return "proc/irq/" + strconv.Itoa(a.IRQ) + "/smp_affinity"
	}
	return "sys/class/net/" + a.Device + "/queues/" + a.Queue + "/" + string(a.Kind)
}

// The totals add up every apply since the engine was made: applies,
// knobs changed, failed writes, refused IRQs and rolled-back devices;
// dry runs count nothing.
func TestTotals(t *testing.T) {
	ctx := context.Background()
	root := deviceTestRoot(t, "r6s", plan.ModeAuto)
	start := time.Unix(1800000000, 0)
	w := &faultWriter{Writer: NewFSWriter(root)}
	e := NewEngine(root, WithWriter(w), WithClock(func() time.Time { return start }))

	st, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Totals == nil || *st.Totals != (Totals{Since: start}) {
		t.Fatalf("totals before any apply: %+v, want zero since %v", st.Totals, start)
	}

	// Pick the faults from what an apply would change: a queue knob of a
	// device written after another knob of that device (so that its
	// failure undoes something), and an IRQ of another device.
	dry, err := e.Apply(ctx, ApplyRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := e.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pair := plan.PairQueues(snap)
	seen := map[string]int{}
	failDev := ""
	for _, a := range dry.Changed {
		u := pair.Unit(a)
		seen[u]++
		if a.Kind == plan.KindRPSCPUs || a.Kind == plan.KindXPSCPUs {
			if seen[u] > 1 && w.fail == "" {
				w.fail, failDev = knobPath(a), u
			}
		}
	}
	for _, a := range dry.Changed {
		if a.Kind == plan.KindIRQAffinity && pair.Unit(a) != failDev && w.refuse == "" {
			w.refuse = knobPath(a)
		}
	}
	if w.fail == "" || w.refuse == "" {
		t.Fatalf("r6s: no fault to inject in %d changes (fail %q, refuse %q)", len(dry.Changed), w.fail, w.refuse)
	}
	if st, _ := e.Status(ctx); st.Totals.Applies != 0 {
		t.Fatalf("a dry run was counted: %+v", st.Totals)
	}

	w.on = true
	first, err := e.Apply(ctx, ApplyRequest{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Failed) != 1 || len(first.Refused) != 1 || first.RolledBack != 1 || len(first.Changed) == 0 {
		t.Fatalf("faulty apply: changed %d failed %+v refused %+v rolled back %d", len(first.Changed), first.Failed, first.Refused, first.RolledBack)
	}
	w.on = false
	second, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Changed) == 0 || len(second.Failed) != 0 {
		t.Fatalf("second apply: changed %d failed %+v", len(second.Changed), second.Failed)
	}
	st, err = e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Totals{Since: start, Applies: 2, Changed: uint64(len(first.Changed) + len(second.Changed)),
		Failed: 1, IRQsRefused: 1, Rollbacks: 1}
	if *st.Totals != want {
		t.Errorf("totals %+v, want %+v", *st.Totals, want)
	}
	// StatusQueues reports the same.
	sq, _, err := e.StatusQueues(ctx)
	if err != nil || *sq.Totals != want {
		t.Errorf("StatusQueues totals %+v (%v), want %+v", sq.Totals, err, want)
	}
}

// Engines that live for one call (the rpcd plugin) share the totals
// through the totals file beside the state file; a broken file is an
// empty record, never an error.
func TestTotalsStateFile(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	state := filepath.Join(root, StateFile)
	t0 := time.Unix(1800000000, 0)
	engine := func(at time.Time) *Engine {
		return NewEngine(root, WithStateFile(state), WithClock(func() time.Time { return at }))
	}
	first, err := engine(t0).Apply(ctx, ApplyRequest{Reason: "start"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine(t0.Add(time.Minute)).Apply(ctx, ApplyRequest{Reason: "hotplug"}); err != nil {
		t.Fatal(err)
	}
	st, err := engine(t0.Add(2 * time.Minute)).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Totals{Applies: 2, Changed: uint64(len(first.Changed))}
	if got := *st.Totals; !got.Since.Equal(t0) || got.Applies != want.Applies || got.Changed != want.Changed || got.Failed != 0 {
		t.Errorf("totals %+v, want %+v since %v", got, want, t0)
	}

	for _, bad := range []string{"", "garbage\n", "1 2 3\n", "1 2 3 4 5 6 -7\n"} {
		if err := os.WriteFile(filepath.Join(root, TotalsFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		at := t0.Add(time.Hour)
		st, err := engine(at).Status(ctx)
		if err != nil {
			t.Fatalf("totals file %q: %v", bad, err)
		}
		if *st.Totals != (Totals{Since: at}) {
			t.Errorf("totals file %q: %+v, want zero since the engine was made", bad, *st.Totals)
		}
	}
}

// The adaptive mode's moves count once applied without a failed write; a
// move whose apply failed (and was rolled back) counts as a rollback.
func TestTotalsAdaptiveMoves(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	w := &failingWriter{Writer: NewFSWriter(root), fail: plan.KindIRQAffinity}
	e := NewEngine(root, WithWriter(w))
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAdaptive}); err != nil {
		t.Fatal(err)
	}
	move := adaptive.Move{Device: "eth0", Queue: "rx-1", Kind: adaptive.UnitNAPI, From: 1, To: 0, Home: 1, Reason: "test"}
	if _, err := e.Adapt(ctx, []adaptive.Move{move}); err != nil {
		t.Fatal(err)
	}
	w.on = true
	res, err := e.Adapt(ctx, []adaptive.Move{{Device: "eth0", Queue: "rx-2", Kind: adaptive.UnitNAPI, From: 2, To: 3, Home: 2, Reason: "test"}})
	if err != nil || len(res.Failed) == 0 {
		t.Fatalf("failing move: %+v, %v", res, err)
	}
	st, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Totals; got.AdaptiveMoves != 1 || got.Applies != 3 || got.Rollbacks != 1 || got.Failed != uint64(len(res.Failed)) {
		t.Errorf("totals %+v, want 1 adaptive move, 3 applies, 1 rollback, %d failed", *got, len(res.Failed))
	}
}
