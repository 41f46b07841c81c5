package adaptive

import (
	"context"
	"time"
)

// Hook is the steering engine as the control loop reaches it: it reads
// load samples and applies moves (an apply of the adaptive plan under the
// engine's locks). Move reports the number of writes that failed.
type Hook interface {
	Sample(ctx context.Context, full bool) (Sample, error)
	Move(ctx context.Context, moves []Move) (failed int, err error)
}

// Run is the adaptive mode's control loop. It samples at the controller's
// pace (quick samples while there is no traffic, backing off to
// cfg.MaxIdleInterval; no timer at all once ctx is done), and hands each
// decision's moves to h.Move. A move whose apply fails is held for ten
// dwell times. The loop's state goes to st, which status shows, and the
// deviations st holds from before (a restart, the state file) keep their
// dwell time. It returns when ctx is done.
func Run(ctx context.Context, cfg Config, st *State, h Hook) error {
	ctl, err := NewController(cfg)
	if err != nil {
		return err
	}
	for _, d := range st.Deviations() {
		ctl.Moved(d.Key(), d.Since)
	}
	ss := &SamplingStatus{Running: true, IntervalMS: cfg.Interval.Milliseconds()}
	st.noteSampling(ss)
	defer st.noteSampling(nil)
	timer := time.NewTimer(0)
	defer timer.Stop()
	full := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		ss.Wakeups++
		s, err := h.Sample(ctx, full)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// A transient read error: try again at the idle pace.
			ss.Error = err.Error()
			st.noteSampling(ss)
			timer.Reset(cfg.MaxIdleInterval)
			full = true
			continue
		}
		ss.Error = ""
		if s.Full {
			ss.Full++
		}
		d := ctl.Step(s)
		if len(d.Moves) > 0 {
			failed, err := h.Move(ctx, d.Moves)
			if err != nil || failed > 0 {
				for _, m := range d.Moves {
					ctl.Hold(m.Key(), s.Time.Add(10*cfg.MinDwell))
				}
				if err != nil {
					ss.Error = err.Error()
				}
			}
		}
		ss.IntervalMS, ss.Active, ss.PPS, ss.Last = d.Next.Milliseconds(), d.Active, d.PPS, s.Time
		if d.Loads != nil {
			ss.Loads, ss.Units = d.Loads, d.Units
		}
		st.noteSampling(ss)
		full = d.WantFull
		timer.Reset(d.Next)
	}
}
