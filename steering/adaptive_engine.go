package steering

import (
	"context"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// The engine's half of the adaptive mode (package adaptive has the
// controller, its options and its state): the engine keeps an
// adaptive.State, lays its deviations over every plan made in adaptive mode
// (so that a hotplug apply or a reload keeps them), applies moves with the
// usual locking and rollback, reads the load samples, and reports all of it
// in Status and Queues. The control loop reaches the engine through
// adaptive.Hook (RunAdaptive).

// Adapt applies moves: the deviations change and the adaptive plan is
// applied like any other, under the locks, a failed device rolled back.
// When the apply fails or reports failed writes the deviations are put
// back as they were. It refuses (ErrInvalid) unless the effective mode is
// adaptive, and moves to CPUs that are not online.
func (e *Engine) Adapt(ctx context.Context, moves []adaptive.Move) (*Result, error) {
	if len(moves) == 0 {
		return nil, outline.Errorf("%w: no moves", plan.ErrInvalid)
	}
	unlock, err := e.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	snap, eff, err := e.state(ctx)
	if err != nil {
		return nil, err
	}
	if eff.Mode != plan.ModeAdaptive {
		return nil, outline.Errorf("%w: mode is %s, not adaptive", plan.ErrInvalid, eff.Mode)
	}
	online := adaptive.OnlineSet(snap)
	for _, m := range moves {
		if !online.Has(m.To) {
			return nil, outline.Errorf("%w: move %s to cpu%d: not an online CPU", plan.ErrInvalid, m.Key(), m.To)
		}
	}
	now := e.now()
	before := e.adaptive.Begin(moves, now)
	res, err := e.applyLocked(ctx, ApplyRequest{Reason: adaptive.Reason(moves)}, snap, eff)
	changed, failed, first := 0, 0, ""
	if err == nil {
		changed, failed = len(res.Changed), len(res.Failed)
		if failed > 0 {
			first = res.Failed[0].Error
		}
	}
	restored := e.adaptive.End(moves, now, before, changed, failed, first, err)
	e.mu.Lock()
	if restored {
		e.dropView()
	} else {
		e.totals.AdaptiveMoves += uint64(len(moves))
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return res, nil
}

// AdaptiveSample reads a load sample: only the softnet counters (quick),
// or (full) also the units of the adaptive plan, proc/stat, proc/softirqs,
// the units' NAPI thread times and their queues' qstats rx packets (from
// the snapshot's read, where the kernel has them).
func (e *Engine) AdaptiveSample(ctx context.Context, full bool) (adaptive.Sample, error) {
	s := adaptive.Sample{Time: e.now(), Full: full}
	if !full {
		sn, err := platform.ReadSoftnet(e.root)
		if err != nil {
			return s, err
		}
		for _, n := range sn {
			s.CPUs = append(s.CPUs, adaptive.CPUCounters{CPU: n.CPU, Processed: n.Processed, Dropped: n.Dropped, TimeSqueeze: n.TimeSqueeze})
		}
		return s, nil
	}
	snap, set, err := e.state(ctx)
	if err != nil {
		return s, err
	}
	flows := set.Flows
	base, err := plan.NewPlan(snap, plan.PlanRequest{Mode: plan.ModeAuto, Flows: &flows})
	if err != nil {
		return s, outline.Errorf("plan auto: %w", err)
	}
	units := adaptive.Units(snap, base)
	devs := map[string]adaptive.Deviation{}
	for _, d := range e.Deviations() {
		devs[d.Key()] = d
	}
	var pids []int
	for i := range units {
		if d, ok := devs[units[i].Key()]; ok && d.Kind == units[i].Kind {
			units[i].CPU = d.CPU
		}
		if units[i].PID > 0 {
			pids = append(pids, units[i].PID)
		}
	}
	lc, err := platform.ReadLoad(ctx, e.root, pids)
	if err != nil {
		return s, err
	}
	s.Time = e.now()
	times := map[int]platform.CPUTime{}
	for _, c := range lc.CPUs {
		times[c.CPU] = c
	}
	for _, n := range lc.Softnet {
		t := times[n.CPU]
		s.CPUs = append(s.CPUs, adaptive.CPUCounters{CPU: n.CPU, Processed: n.Processed, Dropped: n.Dropped, TimeSqueeze: n.TimeSqueeze,
			NetRX: lc.NetRX[n.CPU], Total: t.Total, Idle: t.Idle, Softirq: t.Softirq})
	}
	threads := map[int]platform.ThreadTime{}
	for _, t := range lc.Threads {
		threads[t.PID] = t
	}
	for _, u := range units {
		tt, ok := threads[u.PID]
		ok = ok && u.PID > 0
		uc := adaptive.UnitCounters{Unit: u, Ticks: tt.Ticks, HasTicks: ok, WaitNS: tt.WaitNS, HasWait: ok && tt.HasWait}
		// The queue's qstats rx packets, which the read took from
		// netlink where the kernel and driver keep them.
		if st := rxStats(snap, u.Device, u.Queue); st != nil {
			uc.Packets, uc.HasPackets = st.Packets, true
		}
		s.Units = append(s.Units, uc)
	}
	return s, nil
}

// rxStats is the qstats counters of a device's rx queue in snap, nil
// without them.
func rxStats(snap *platform.Snapshot, dev, queue string) *platform.QueueStats {
	if d := snap.Device(dev); d != nil {
		for _, q := range d.RxQueues {
			if q.Name == queue {
				return q.Stats
			}
		}
	}
	return nil
}

// RunAdaptive runs the adaptive control loop (adaptive.Run) over this
// engine: samples from AdaptiveSample, moves through apply (Adapt when
// nil), the loop's state in the engine's adaptive state, which Status
// shows. apply is Engine.Adapt or the daemon's wrapper of it that logs
// and announces each apply. It returns when ctx is done.
func (e *Engine) RunAdaptive(ctx context.Context, cfg adaptive.Config, apply func(context.Context, []adaptive.Move) (*Result, error)) error {
	if apply == nil {
		apply = e.Adapt
	}
	return adaptive.Run(ctx, cfg, e.adaptive, adaptiveHook{e: e, apply: apply})
}

// adaptiveHook is the engine as adaptive.Run reaches it.
type adaptiveHook struct {
	e     *Engine
	apply func(context.Context, []adaptive.Move) (*Result, error)
}

func (h adaptiveHook) Sample(ctx context.Context, full bool) (adaptive.Sample, error) {
	return h.e.AdaptiveSample(ctx, full)
}

func (h adaptiveHook) Move(ctx context.Context, moves []adaptive.Move) (int, error) {
	res, err := h.apply(ctx, moves)
	if err != nil {
		return 0, err
	}
	if res == nil {
		return 0, nil
	}
	return len(res.Failed), nil
}

// Deviations returns the current deviations from the auto plan.
//
//go:noinline
func (e *Engine) Deviations() []adaptive.Deviation { return e.adaptive.Deviations() }

// AdaptiveSettings returns the adaptive loop's configuration as the last
// apply in mode adaptive resolved it from the `config adaptive` section
// (adaptive.ResolveConfig), the defaults before one.
func (e *Engine) AdaptiveSettings() adaptive.Settings { return e.adaptive.Settings() }
