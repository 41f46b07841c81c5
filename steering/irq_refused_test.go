package steering

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// An IRQ the kernel will not move (EINVAL, EIO) is reported, not failed:
// the device's other writes stay, nothing is rolled back.
func TestApplyRefusedIRQIsAFact(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EINVAL, unix.EIO} {
		snap, w, acts := twoDeviceMachine()
		w.failWrite["proc/irq/60/smp_affinity"] = errno
		res := ApplyPlan(context.Background(), w, snap, acts, false)
		if len(res.Failed) != 0 {
			t.Errorf("%v: failed %+v, want none", errno, res.Failed)
		}
		if len(res.Refused) != 1 || res.Refused[0].Action.IRQ != 60 {
			t.Errorf("%v: refused %+v, want irq 60", errno, res.Refused)
		}
		for _, s := range res.Skipped {
			t.Errorf("%v: skipped %s: %s", errno, s.Action.Target(), s.Reason)
		}
		if w.files["sys/class/net/eth0/queues/tx-0/xps_cpus"] != "1" || w.threads[301] != "1" {
			t.Errorf("%v: eth0's other knobs were not written or were rolled back", errno)
		}
	}
	// Any other error still fails the device as before.
	snap, w, acts := twoDeviceMachine()
	w.failWrite["proc/irq/60/smp_affinity"] = unix.EPERM
	if res := ApplyPlan(context.Background(), w, snap, acts, false); len(res.Failed) == 0 || len(res.Refused) != 0 {
		t.Errorf("EPERM: failed %+v refused %+v, want a failure", res.Failed, res.Refused)
	}
}

func TestRecordRefusedIRQs(t *testing.T) {
	root := t.TempDir()
	f := func(irq int, name string) Failure {
		return Failure{Action: plan.Action{Kind: plan.KindIRQAffinity, IRQ: irq, Name: name}, Error: "write proc/irq/x/smp_affinity: invalid argument"}
	}
	if err := RecordRefusedIRQs(root, []Failure{f(106, "eth0")}); err != nil {
		t.Fatal(err)
	}
	if err := RecordRefusedIRQs(root, []Failure{f(131, "xhci-hcd:usb1"), {Action: plan.Action{Kind: plan.KindRPSCPUs}}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, platform.RefusedIRQsFile))
	if err != nil {
		t.Fatal(err)
	}
	rec := platform.ParseRefusedIRQs(b)
	if len(rec) != 2 || rec[106][0] != "eth0" || rec[131][0] != "xhci-hcd:usb1" {
		t.Errorf("record %v, want irqs 106 and 131", rec)
	}
}

// refusingWriter is the fixture writer with one IRQ the kernel will not
// move, counting the attempts.
type refusingWriter struct {
	Writer
	path     string
	attempts int
}

func (w *refusingWriter) WriteKnob(rel, value string) error {
	if rel == w.path {
		w.attempts++
		return &fs.PathError{Op: "write", Path: rel, Err: unix.EINVAL}
	}
	return w.Writer.WriteKnob(rel, value)
}

// Through the engine: the first apply reports the refusal and records it;
// the next plan leaves the IRQ alone, says so, and the next apply does not
// try again.
func TestEngineRefusedIRQRecorded(t *testing.T) {
	root := deviceTestRoot(t, "r6s", plan.ModeAuto)
	w := &refusingWriter{Writer: NewFSWriter(root), path: "proc/irq/130/smp_affinity"}
	e := NewEngine(root, WithWriter(w))
	ctx := context.Background()
	res, err := e.Apply(ctx, ApplyRequest{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 0 || len(res.Refused) != 1 || res.Refused[0].Action.IRQ != 130 {
		t.Fatalf("failed %+v refused %+v, want irq 130 refused only", res.Failed, res.Refused)
	}
	if len(res.Changed) == 0 {
		t.Fatalf("nothing else was applied")
	}
	_, p, err := e.Plan(ctx, plan.PlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if a.Kind == plan.KindIRQAffinity && a.IRQ == 130 {
			t.Errorf("after the refusal the plan still moves irq 130: %s %s", a.Target(), a.Value)
		}
	}
	fixedHint := false
	for _, h := range p.Hints {
		fixedHint = fixedHint || h.ID == plan.HintIRQFixed
	}
	if !fixedHint {
		t.Errorf("after the refusal the plan lacks the %s hint (%+v)", plan.HintIRQFixed, p.Hints)
	}
	res, err = e.Apply(ctx, ApplyRequest{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if w.attempts != 1 || len(res.Refused) != 0 || len(res.Failed) != 0 {
		t.Errorf("second apply: %d attempts on the refused IRQ, refused %+v, failed %+v", w.attempts, res.Refused, res.Failed)
	}
}
