package steering

import (
	"context"
	"errors"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"golang.org/x/sys/unix"
)

// Names that may become part of a knob path. A device name must also exist in
// the snapshot, a queue name in that device; these checks
// (plan.ValidDeviceName, validQueueName) keep '/', ".." and white space out
// whatever the snapshot says. (Written out rather than as regular
// expressions: package regexp would add 130-330 KB to the router binary.)

// validQueueName reports whether name is prefix ("rx-" or "tx-") followed
// by one or more decimal digits and nothing else.
func validQueueName(name, prefix string) bool {
	digits, ok := strings.CutPrefix(name, prefix)
	if !ok || digits == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// sysctlPaths maps the sysctl keys a plan may hold to their procfs files.
// Nothing else under proc/sys is ever written.
var sysctlPaths = map[string]string{
	"net.core.rps_sock_flow_entries": "proc/sys/net/core/rps_sock_flow_entries",
}

// knob is one validated action: where it lives and how to compare values.
type knob struct {
	_      outline.NoCompare
	act    plan.Action
	path   string // file knobs: path below the root; "" for a thread
	thread bool
	// napi is the netlink attribute of a per-NAPI knob
	// (platform.NAPIKnob*), written through a NAPIWriter; "" otherwise.
	napi string
}

// knobIndex is what resolveKnob checks names against: the snapshot's
// devices with their queues, NAPI threads and IRQs, indexed once per apply.
type knobIndex struct {
	rx, tx  map[string]bool // "dev/queue"
	devices map[string]bool // device names
	threads map[int]string  // pid -> thread name
	irqs    map[int]bool    // IRQ numbers
	napis   map[int]string  // NAPI id -> device (netlink napi-get)
	pair    *plan.Pairing   // which device a thread or IRQ serves
}

func newKnobIndex(snap *platform.Snapshot) *knobIndex {
	x := &knobIndex{rx: map[string]bool{}, tx: map[string]bool{}, devices: map[string]bool{},
		threads: map[int]string{}, irqs: map[int]bool{}, napis: map[int]string{}, pair: plan.PairQueues(snap)}
	if snap.Netlink != nil {
		for _, n := range snap.Netlink.NAPIs {
			x.napis[n.ID] = n.Device
		}
	}
	for i := range snap.Devices {
		d := &snap.Devices[i]
		x.devices[d.Name] = true
		for _, q := range d.RxQueues {
			x.rx[d.Name+"/"+q.Name] = true
		}
		for _, q := range d.TxQueues {
			x.tx[d.Name+"/"+q.Name] = true
		}
	}
	for _, t := range snap.NAPIThreads {
		x.threads[t.PID] = t.Name
	}
	for _, t := range snap.Workers {
		x.threads[t.PID] = t.Name
	}
	for _, q := range snap.IRQs {
		x.irqs[q.Number] = true
	}
	return x
}

// resolveKnob validates an action against the snapshot and derives its
// target. The path is built only from names that match the patterns above
// and exist in the snapshot.
func (x *knobIndex) resolveKnob(a plan.Action) (knob, error) {
	k := knob{act: a}
	queue := func(known map[string]bool, what string) error {
		if !plan.ValidDeviceName(a.Device) {
			return outline.Errorf("device name %q: %w", a.Device, plan.ErrInvalid)
		}
		if !x.devices[a.Device] {
			return outline.Errorf("device %q not in the snapshot: %w", a.Device, plan.ErrInvalid)
		}
		if !validQueueName(a.Queue, what+"-") || !known[a.Device+"/"+a.Queue] {
			return outline.Errorf("%s has no %s queue %q: %w", a.Device, what, a.Queue, plan.ErrInvalid)
		}
		return nil
	}
	switch a.Kind {
	case plan.KindRPSCPUs, plan.KindRPSFlowCnt:
		if err := queue(x.rx, "rx"); err != nil {
			return k, err
		}
		k.path = "sys/class/net/" + a.Device + "/queues/" + a.Queue + "/" + string(a.Kind)
	case plan.KindXPSCPUs:
		if err := queue(x.tx, "tx"); err != nil {
			return k, err
		}
		k.path = "sys/class/net/" + a.Device + "/queues/" + a.Queue + "/xps_cpus"
	case plan.KindNAPIAffinity:
		if name, ok := x.threads[a.PID]; !ok || name != a.Thread {
			return k, outline.Errorf("no NAPI thread %d %q in the snapshot: %w", a.PID, a.Thread, plan.ErrInvalid)
		}
		k.thread = true
	case plan.KindIRQAffinity:
		if a.IRQ < 0 || !x.irqs[a.IRQ] {
			return k, outline.Errorf("no IRQ %d in the snapshot: %w", a.IRQ, plan.ErrInvalid)
		}
		k.path = "proc/irq/" + outline.Itoa(a.IRQ) + "/smp_affinity"
	case plan.KindNAPIDeferHardIRQs, plan.KindNAPIGROFlushTimeout, plan.KindNAPIThreaded:
		if dev, ok := x.napis[a.NAPIID]; !ok || a.NAPIID <= 0 || dev != a.Device || dev == "" {
			return k, outline.Errorf("no NAPI %d of %q in the snapshot: %w", a.NAPIID, a.Device, plan.ErrInvalid)
		}
		if _, err := plan.ParseNAPIKnob(a.Kind, a.Value); err != nil {
			return k, outline.Errorf("%s %q: %v: %w", a.Kind, a.Value, err, plan.ErrInvalid)
		}
		k.napi = plan.NAPIKnobName(a.Kind)
	case plan.KindSysctl:
		p, ok := sysctlPaths[a.Key]
		if !ok {
			return k, outline.Errorf("sysctl %q is not managed: %w", a.Key, plan.ErrInvalid)
		}
		k.path = p
	default:
		return k, outline.Errorf("unknown action kind %q: %w", a.Kind, plan.ErrInvalid)
	}
	return k, nil
}

// applyRank orders a device's writes: thread and IRQ placement first, then the
// queue masks and flow counts, then system-wide sysctls.
func applyRank(kind plan.ActionKind) int {
	switch kind {
	case plan.KindNAPIAffinity, plan.KindIRQAffinity:
		return 0
	case plan.KindSysctl:
		return 2
	default:
		return 1
	}
}

// vanished reports whether err says the target is gone (device removed,
// thread exited), which makes an action skipped rather than failed.
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT) ||
		errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ESRCH) ||
		errors.Is(err, ErrNotKernelThread)
}

// changedDevices names every device a change touched, through its queues
// or through a NAPI thread or IRQ the pairing ties to it, in name order.
func changedDevices(x *knobIndex, changed []plan.Action) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range changed {
		if d := x.pair.ActionDevice(a); d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	outline.SortStrings(out)
	return out
}

// ApplyPlan makes the machine hold the actions' values. Each knob is read
// once and written at most once (only when its live value differs). Actions
// are applied device by device (a NAPI thread or IRQ with the device it
// serves), thread and IRQ placement first, the sysctl last. When a write for
// a device fails, that device's writes of this apply are undone in reverse
// order and its remaining actions are not attempted, while the other devices
// still proceed. A knob whose target vanished is skipped, not failed. With
// dryRun nothing is written and Changed lists what would change.
//
// ApplyPlan does not lock; callers serialise applies (Engine does).
func ApplyPlan(ctx context.Context, w Writer, snap *platform.Snapshot, actions []plan.Action, dryRun bool) *Result {
	return applyPlan(ctx, w, snap, actions, dryRun, false, nil)
}

// applyPlan is ApplyPlan. With fresh, the snapshot was read under the lock
// this apply holds, so an action's Current (which NewPlan took from it) is
// the knob's live value, read once already: the knob is not read again, and
// only knobs that differ are touched (the write path still re-checks a
// thread right before moving it). Without fresh every knob is read before
// it is compared. before, when not nil, is called before each knob written
// (the engine writes its apply marker before the first).
func applyPlan(ctx context.Context, w Writer, snap *platform.Snapshot, actions []plan.Action, dryRun, fresh bool, before func()) *Result {
	start := time.Now()
	res := &Result{Changed: []plan.Action{}, Failed: []Failure{}}

	// Group into units in plan order, sysctls last.
	x := newKnobIndex(snap)
	var order []string
	units := map[string][]plan.Action{}
	for _, a := range actions {
		u := x.pair.Unit(a)
		if _, ok := units[u]; !ok {
			order = append(order, u)
		}
		units[u] = append(units[u], a)
	}
	// sort.SliceStable, not slices.SortStableFunc: each instantiation of
	// the generic stable sort costs the router binary about 4 KB.
	sort.SliceStable(order, func(i, j int) bool {
		return cmpBool(strings.HasPrefix(order[i], "\xff"), strings.HasPrefix(order[j], "\xff")) < 0
	})

	for _, u := range order {
		acts := units[u]
		sort.SliceStable(acts, func(i, j int) bool { return applyRank(acts[i].Kind) < applyRank(acts[j].Kind) })
		if err := ctx.Err(); err != nil {
			for _, a := range acts {
				res.Skipped = append(res.Skipped, Skip{Action: a, Reason: "not attempted: " + err.Error()})
			}
			continue
		}
		applyUnit(w, x, strings.TrimPrefix(u, "\xff"), acts, dryRun, fresh, before, res)
	}
	res.Devices = changedDevices(x, res.Changed)
	res.DurationUS = time.Since(start).Microseconds()
	return res
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// written is one write of this apply, kept to undo it.
type written struct {
	k    knob
	prev string
}

// applyUnit applies one device's actions (already ordered) into res; unit
// names the device (or the lone thread, IRQ or sysctl) in reports.
func applyUnit(w Writer, x *knobIndex, unit string, acts []plan.Action, dryRun, fresh bool, before func(), res *Result) {
	var done []written
	for i, a := range acts {
		k, err := x.resolveKnob(a)
		if err != nil {
			failUnit(w, unit, acts[i+1:], done, Failure{Action: a, Error: err.Error()}, res)
			return
		}
		live, err := a.Current, error(nil)
		if !fresh || live == "" {
			live, err = readKnob(w, k)
		}
		if err != nil {
			if vanished(err) {
				res.Skipped = append(res.Skipped, Skip{Action: a, Reason: "vanished: " + err.Error()})
				continue
			}
			failUnit(w, unit, acts[i+1:], done, Failure{Action: a, Error: "read: " + err.Error()}, res)
			return
		}
		a.Current = live
		k.act = a
		if plan.SameValue(a.Kind, live, a.Value) {
			res.Unchanged++
			continue
		}
		if dryRun {
			res.Changed = append(res.Changed, a)
			continue
		}
		if before != nil {
			before()
		}
		err = writeKnob(w, k, a.Value)
		if err == nil && k.napi != "" {
			// A per-NAPI knob is read back: napi-set acks what it
			// parsed, napi-get says what the NAPI now holds. One that
			// does not hold is a failure, undone with the device's
			// other writes (itself included).
			if err = verifyKnob(w, k, a.Value); err != nil {
				failUnit(w, unit, acts[i+1:], append(done, written{k: k, prev: live}), Failure{Action: a, Error: err.Error()}, res)
				return
			}
		}
		if err != nil {
			if vanished(err) {
				res.Skipped = append(res.Skipped, Skip{Action: a, Reason: "vanished: " + err.Error()})
				continue
			}
			if refusedIRQ(a, err) { // irq_refused.go: a fact, not a failure
				res.Refused = append(res.Refused, Failure{Action: a, Error: err.Error()})
				continue
			}
			failUnit(w, unit, acts[i+1:], done, Failure{Action: a, Error: err.Error()}, res)
			return
		}
		done = append(done, written{k: k, prev: live})
	}
	for _, d := range done {
		res.Changed = append(res.Changed, d.k.act)
	}
}

// failUnit records a device's failure, undoes its writes of this apply in
// reverse order and marks its remaining actions as not attempted.
func failUnit(w Writer, unit string, rest []plan.Action, done []written, f Failure, res *Result) {
	res.Failed = append(res.Failed, f)
	if len(done) > 0 {
		res.RolledBack++
	}
	what := string(f.Action.Kind) + " on " + unit
	for i := len(done) - 1; i >= 0; i-- {
		d := done[i]
		if err := writeKnob(w, d.k, d.prev); err != nil && !vanished(err) {
			undo := d.k.act
			undo.Value, undo.Current = d.prev, d.k.act.Value
			res.Failed = append(res.Failed, Failure{Action: undo, Error: "rollback: " + err.Error()})
			continue
		}
		res.Skipped = append(res.Skipped, Skip{Action: d.k.act, Reason: "rolled back: " + what + " failed"})
	}
	for _, a := range rest {
		res.Skipped = append(res.Skipped, Skip{Action: a, Reason: "not attempted: " + what + " failed"})
	}
}

// verifyKnob reads a knob back after writing value.
func verifyKnob(w Writer, k knob, value string) error {
	got, err := readKnob(w, k)
	if err != nil {
		return outline.Errorf("verify: %w", err)
	}
	if !plan.SameValue(k.act.Kind, got, value) {
		return outline.Errorf("verify: wrote %s, the kernel holds %s", value, got)
	}
	return nil
}

func readKnob(w Writer, k knob) (string, error) {
	if k.napi != "" {
		nw, ok := w.(NAPIWriter)
		if !ok {
			return "", outline.Errorf("%w (this writer has no netlink)", platform.ErrNAPIKnobsUnsupported)
		}
		return nw.NAPIKnob(k.act.NAPIID, k.napi)
	}
	if k.thread {
		return w.ThreadAffinity(k.act.PID, k.act.Thread)
	}
	return w.ReadKnob(k.path)
}

func writeKnob(w Writer, k knob, value string) error {
	if k.napi != "" {
		nw, ok := w.(NAPIWriter)
		if !ok {
			return outline.Errorf("%w (this writer has no netlink)", platform.ErrNAPIKnobsUnsupported)
		}
		return nw.SetNAPIKnob(k.act.NAPIID, k.napi, value)
	}
	if k.thread {
		return w.SetThreadAffinity(k.act.PID, k.act.Thread, value)
	}
	return w.WriteKnob(k.path, value)
}
