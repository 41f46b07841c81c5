package steering

import (
	"context"
	"fmt"
	"github.com/packet-steering/packet-steering/plan"
	"slices"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/platform"
)

// The engine's adaptive loop and moves (see adaptive_engine.go).
// adaptPlan lays the deviations over p and forgets those that no longer
// apply.
// The state file is read first (once per engine); the dropped deviations
// are listed for status and leave the file at the next apply.
func (e *Engine) adaptPlan(snap *platform.Snapshot, p *plan.Plan) *plan.Plan {
	e.mu.Lock()
	e.loadAdaptiveLocked()
	devs := e.adaptive.devs
	e.mu.Unlock()
	if len(devs) == 0 {
		return p
	}
	out, kept, dropped := layDeviations(snap, p, devs)
	if len(dropped) > 0 {
		e.mu.Lock()
		// Only if no move changed them meanwhile.
		if slices.Equal(e.adaptive.devs, devs) {
			e.adaptive.devs = kept
			now := e.now()
			for _, d := range dropped {
				d.Time = now
				e.noteDroppedLocked(d)
			}
		}
		e.mu.Unlock()
	}
	return out
}

// withMoves returns devs after the moves: a move to the auto CPU removes
// the queue's deviation, any other sets it.
func withMoves(devs []Deviation, moves []Move, now time.Time) []Deviation {
	out := slices.Clone(devs)
	for _, m := range moves {
		out = slices.DeleteFunc(out, func(d Deviation) bool { return d.Key() == m.Key() })
		if m.To != m.Home {
			out = append(out, Deviation{Device: m.Device, Queue: m.Queue, Kind: m.Kind, Home: m.Home, CPU: m.To, Reason: m.Reason, Since: now})
		}
	}
	slices.SortFunc(out, func(a, b Deviation) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// Adapt applies moves: the deviations change and the adaptive plan is
// applied like any other, under the locks, a failed device rolled back.
// When the apply fails or reports failed writes the deviations are put
// back as they were. It refuses (ErrInvalid) unless the effective mode is
// adaptive, and moves to CPUs that are not online.
func (e *Engine) Adapt(ctx context.Context, moves []Move) (*Result, error) {
	if len(moves) == 0 {
		return nil, fmt.Errorf("%w: no moves", plan.ErrInvalid)
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
		return nil, fmt.Errorf("%w: mode is %s, not adaptive", plan.ErrInvalid, eff.Mode)
	}
	online := onlineSet(snap)
	for _, m := range moves {
		if !online.Has(m.To) {
			return nil, fmt.Errorf("%w: move %s to cpu%d: not an online CPU", plan.ErrInvalid, m.Key(), m.To)
		}
	}
	now := e.now()
	e.mu.Lock()
	old := e.adaptive.devs
	e.adaptive.devs = withMoves(old, moves, now)
	e.mu.Unlock()
	res, err := e.applyLocked(ctx, ApplyRequest{Reason: AdaptReason(moves)}, snap, eff)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil || len(res.Failed) > 0 {
		e.adaptive.devs = old
		e.dropView()
	}
	for _, m := range moves {
		r := MoveRecord{Time: now, Move: m}
		switch {
		case err != nil:
			r.Error = err.Error()
		default:
			r.Changed, r.Failed = len(res.Changed), len(res.Failed)
			if len(res.Failed) > 0 {
				r.Error = res.Failed[0].Error
			}
		}
		e.adaptive.moves = append(e.adaptive.moves, r)
	}
	if n := len(e.adaptive.moves) - maxMoveHistory; n > 0 {
		e.adaptive.moves = slices.Delete(e.adaptive.moves, 0, n)
	}
	// The apply saved the new deviations; the record of the moves (and a
	// rollback) goes to the state file here.
	_ = e.saveAdaptiveLocked()
	if err != nil {
		return nil, err
	}
	return res, nil
}

// AdaptiveSample reads a load sample: only the softnet counters (quick),
// or (full) also the units of the adaptive plan, proc/stat, proc/softirqs
// and the units' NAPI thread times.
func (e *Engine) AdaptiveSample(ctx context.Context, full bool) (LoadSample, error) {
	s := LoadSample{Time: e.now(), Full: full}
	if !full {
		sn, err := platform.ReadSoftnet(e.root)
		if err != nil {
			return s, err
		}
		for _, n := range sn {
			s.CPUs = append(s.CPUs, CPUCounters{CPU: n.CPU, Processed: n.Processed, Dropped: n.Dropped, TimeSqueeze: n.TimeSqueeze})
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
		return s, fmt.Errorf("plan auto: %w", err)
	}
	units := AdaptiveUnits(snap, base)
	devs := map[string]Deviation{}
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
		s.CPUs = append(s.CPUs, CPUCounters{CPU: n.CPU, Processed: n.Processed, Dropped: n.Dropped, TimeSqueeze: n.TimeSqueeze,
			NetRX: lc.NetRX[n.CPU], Total: t.Total, Idle: t.Idle, Softirq: t.Softirq})
	}
	threads := map[int]platform.ThreadTime{}
	for _, t := range lc.Threads {
		threads[t.PID] = t
	}
	for _, u := range units {
		tt, ok := threads[u.PID]
		ok = ok && u.PID > 0
		s.Units = append(s.Units, UnitCounters{Unit: u, Ticks: tt.Ticks, HasTicks: ok, WaitNS: tt.WaitNS, HasWait: ok && tt.HasWait})
	}
	return s, nil
}

// RunAdaptive is the adaptive mode's control loop. It samples at the
// controller's pace (quick samples while there is no traffic, backing off
// to cfg.MaxIdleInterval; no timer at all once ctx is done), and hands
// each decision's moves to apply (the daemon logs and announces them;
// Engine.Adapt by default). A move whose apply fails is held for ten
// dwell times. It returns when ctx is done.
func (e *Engine) RunAdaptive(ctx context.Context, cfg AdaptiveConfig, apply func(context.Context, []Move) (*Result, error)) error {
	ctl, err := NewAdaptiveController(cfg)
	if err != nil {
		return err
	}
	if apply == nil {
		apply = e.Adapt
	}
	// Deviations kept from before (a restart, the state file) keep their
	// dwell time.
	for _, d := range e.Deviations() {
		ctl.Moved(d.Key(), d.Since)
	}
	st := &SamplingStatus{Running: true, IntervalMS: cfg.Interval.Milliseconds()}
	e.noteSampling(st)
	defer e.noteSampling(nil)
	timer := time.NewTimer(0)
	defer timer.Stop()
	full := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		st.Wakeups++
		s, err := e.AdaptiveSample(ctx, full)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// A transient read error: try again at the idle pace.
			st.Error = err.Error()
			e.noteSampling(st)
			timer.Reset(cfg.MaxIdleInterval)
			full = true
			continue
		}
		st.Error = ""
		if s.Full {
			st.Full++
		}
		d := ctl.Step(s)
		if len(d.Moves) > 0 {
			res, err := apply(ctx, d.Moves)
			if err != nil || (res != nil && len(res.Failed) > 0) {
				for _, m := range d.Moves {
					ctl.Hold(m.Key(), s.Time.Add(10*cfg.MinDwell))
				}
				if err != nil {
					st.Error = err.Error()
				}
			}
		}
		st.IntervalMS, st.Active, st.PPS, st.Last = d.Next.Milliseconds(), d.Active, d.PPS, s.Time
		if d.Loads != nil {
			st.Loads = d.Loads
		}
		e.noteSampling(st)
		full = d.WantFull
		timer.Reset(d.Next)
	}
}
