package steering

import (
	"context"
	"slices"
	"sort"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// inSync reports whether every action's live value already equals its
// wanted value, compared as the kernel means them. A knob the snapshot could
// not read (no such file here, e.g. net.core.rps_sock_flow_entries inside a
// network namespace other than the initial one) cannot be out of sync: the
// applier skips it as vanished.
func inSync(p *plan.Plan) bool {
	for _, a := range p.Actions {
		if a.Current == "" || (a.Kind == plan.KindSysctl && a.Current == "-1") {
			continue
		}
		if !plan.SameValue(a.Kind, a.Current, a.Value) {
			return false
		}
	}
	return true
}

// Status reports the effective state: the mode in force and where it comes
// from, the policy and its evidence, whether the live knobs equal the plan,
// the last apply, the totals since the engine was made, hints and per-CPU
// softnet counters. It only reads.
func (e *Engine) Status(ctx context.Context) (*Status, error) {
	rec := e.records()
	v, err := e.viewState(ctx)
	if err != nil {
		return nil, err
	}
	return e.statusOf(v, rec), nil
}

// StatusQueues is Status and Queues(ctx, "") from one read of the machine:
// what a monitoring scrape asks for, at the cost of one of them. Both are
// as fresh as a call of either alone.
func (e *Engine) StatusQueues(ctx context.Context) (*Status, []DeviceQueues, error) {
	rec := e.records()
	v, err := e.viewState(ctx)
	if err != nil {
		return nil, nil, err
	}
	return e.statusOf(v, rec), e.queuesOf(v, ""), nil
}

// records is what Status reports from memory rather than from the machine:
// the last apply, an unfinished one found, the totals.
type records struct {
	last       *ApplyRecord
	unfinished *UnfinishedApply
	totals     *Totals
}

// records copies the engine's records. Status takes them before reading
// the machine: an apply that ends while it reads must not be reported
// together with live values from before it (finished apply, yet "out of
// sync").
func (e *Engine) records() records {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loadStateLocked()
	var r records
	if e.lastApply != nil {
		la := *e.lastApply
		r.last = &la
	}
	if e.unfinished != nil {
		u := *e.unfinished
		r.unfinished = &u
	}
	t := e.totals
	r.totals = &t
	return r
}

// statusOf builds the status of one view with the records taken before it.
func (e *Engine) statusOf(v *viewState, rec records) *Status {
	snap, s, p := v.snap, v.set, v.plan
	st := &Status{
		Mode:         p.Mode,
		Configured:   s,
		Policy:       p.Policy,
		Evidence:     p.Evidence,
		Offload:      plan.Offload(snap),
		InSync:       inSync(p),
		Hints:        slices.Clone(p.Hints),
		Writers:      slices.Clone(p.Writers),
		CPUs:         make([]CPUStat, 0, len(snap.Softnet)),
		ConfigErrors: append(slices.Clone(snap.Config.Errors), adaptive.ConfigErrors(snap)...),
		Platform: PlatformInfo{
			Board:  snap.Identity.Board,
			Model:  snap.Identity.Model,
			Target: snap.Identity.Target,
		},
	}
	if st.Hints == nil {
		st.Hints = []plan.Hint{}
	}
	for _, c := range snap.CPUs {
		if c.Online {
			st.Platform.CPUs++
		}
	}
	for _, n := range snap.Softnet {
		st.CPUs = append(st.CPUs, CPUStat{
			CPU:         n.CPU,
			Processed:   n.Processed,
			Dropped:     n.Dropped,
			TimeSqueeze: n.TimeSqueeze,
			RPSReceived: n.RPSReceived,
		})
	}
	st.LastApply = rec.last
	st.UnfinishedApply = rec.unfinished
	st.Totals = rec.totals
	if p.Mode == plan.ModeAdaptive {
		st.Adaptive = e.adaptive.Status(snap)
	}
	return st
}

// Threads lists the NAPI threads serving each netdev's queues (PairQueues),
// per device its rx threads in queue order then its tx-completion threads,
// with live and wanted CPUs; empty without threaded NAPI. It only reads.
// (The ubus status reply leaves this out: get_queues has it per queue, and
// status stays as cheap as it was.)
func (e *Engine) Threads(ctx context.Context) ([]ThreadStatus, error) {
	v, err := e.viewState(ctx)
	if err != nil {
		return nil, err
	}
	return threadStatus(v.snap, v.plan), nil
}

// threadStatus lists, per netdev in snapshot order, the rx threads in
// queue order and then the tx-completion threads, each with the queues
// PairQueues gives it.
func threadStatus(snap *platform.Snapshot, p *plan.Plan) []ThreadStatus {
	out := []ThreadStatus{}
	if len(snap.NAPIThreads) == 0 {
		return out
	}
	// The plan lists thread actions together, by PID.
	var napi []plan.Action
	for i, a := range p.Actions {
		if a.Kind == plan.KindNAPIAffinity {
			j := i
			for j < len(p.Actions) && p.Actions[j].Kind == plan.KindNAPIAffinity {
				j++
			}
			napi = p.Actions[i:j]
			break
		}
	}
	want := func(pid int) string {
		k := sort.Search(len(napi), func(k int) bool { return napi[k].PID >= pid })
		if k < len(napi) && napi[k].PID == pid {
			return napi[k].Value
		}
		return ""
	}
	pair := plan.PairQueues(snap)
	for i := range snap.Devices {
		d := &snap.Devices[i]
		if !pair.HasThreads(d.Name) {
			continue
		}
		dp := pair.Device(d.Name)
		add := func(t *platform.NAPIThread, dir string, queues []string) {
			out = append(out, ThreadStatus{Device: d.Name, Thread: t.Name, PID: t.PID, Direction: dir,
				Queues: queues, CPUs: t.CPUs, WantCPUs: want(t.PID)})
		}
		for j, t := range dp.RxThreads {
			queues := []string{}
			if j < len(d.RxQueues) {
				queues = append(queues, d.RxQueues[j].Name)
			}
			add(t, platform.DirRX, queues)
		}
		for _, t := range dp.TxThreads {
			queues := []string{}
			for _, k := range dp.TxQueuesOf(t) {
				queues = append(queues, d.TxQueues[k].Name)
			}
			add(t, platform.DirTX, queues)
		}
	}
	return out
}
