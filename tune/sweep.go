package tune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// steerer is what the sweep needs from the steering engine. The real one
// (Machine in this package) plans with the steering package and writes
// through its applier; tests use fakes.
type steerer interface {
	// Prepare plans every candidate against the live machine and captures
	// the original value of every knob any of them touches. It changes
	// nothing.
	Prepare(ctx context.Context, cands []candidate) (*prepared, error)
	// Apply makes the machine hold candidate c's plan.
	Apply(ctx context.Context, c candidate) error
	// Restore writes back every knob captured by Prepare and checks that
	// the machine holds the original values again.
	Restore(ctx context.Context) (restoreResult, error)
}

// prepared describes the planned candidates for the report.
type prepared struct {
	// Devices are the devices some candidate sets an RPS mask on: the
	// configuration columns of the table.
	Devices []string
	// Masks holds, per candidate (in order) and per device, the RPS mask
	// the candidate's plan writes: one mask when every rx queue gets the
	// same, masks joined by "/" per queue otherwise, "-" when untouched.
	Masks [][]string
	// SameAs names, per candidate, an earlier candidate whose plan writes
	// exactly the same values ("" when none): measuring both shows the
	// run-to-run noise between identical configurations.
	SameAs []string
	// Knobs is how many knobs were captured for the restore.
	Knobs int
}

// restoreResult reports the final restore.
type restoreResult struct {
	_ outline.NoCompare
	// Knobs is how many knobs were written back (when they differed) or
	// found holding their original value.
	Knobs int `json:"knobs"`
	// Changed is how many had to be written.
	Changed int `json:"changed"`
	// Verified is true when a fresh read found every knob at its original
	// value.
	Verified bool `json:"verified"`
	// Error is why the restore or its check failed; "" on success.
	Error string `json:"error,omitempty"`
}

// metric names the metric the recommendation ranks by.
type metric string

// Metrics.
const (
	metricThroughput  metric = "throughput"
	metricLoss        metric = "loss"
	metricRetransmits metric = "retransmits"
)

// Direction returns which way the metric improves.
func (m metric) Direction() direction {
	if m == metricThroughput {
		return higherIsBetter
	}
	return lowerIsBetter
}

// sweep measures a list of candidates.
type sweep struct {
	Candidates []candidate
	// Runs per candidate (at least 1) and Settle, the wait after each apply.
	Runs   int
	Settle time.Duration
	// Interleave measures in rounds: each candidate applied and run once
	// per round, Runs rounds, so that a drift in the machine's own load
	// (a job starting, a thermal limit) falls on every candidate alike
	// instead of on the ones measured while it lasted. Each run then has
	// its own apply and settle.
	Interleave bool
	Load       loadDriver
	// Steerer applies candidates and restores the original state.
	Steerer steerer
	// Counters reads the per-CPU counters (ReadCounters of the root).
	Counters func() ([]CPUCounters, error)
	// Metric is what the recommendation ranks by (default throughput).
	Metric metric
	// Progress receives one line per step; nil for none.
	Progress io.Writer
	// RestoreTimeout bounds the final restore (default 30s). The restore
	// runs even when the sweep's context is cancelled.
	RestoreTimeout time.Duration
	// Sleep and Now stand in for the clock in tests; nil means real time.
	Sleep func(ctx context.Context, d time.Duration) error
	Now   func() time.Time
}

// Estimate is how long the sweep should take: for every candidate, an
// apply and settle and Runs runs of the load.
func (s *sweep) Estimate() time.Duration {
	return time.Duration(len(s.Candidates)) * s.perCandidate(s.Load.Estimate())
}

func (s *sweep) perCandidate(run time.Duration) time.Duration {
	if s.Interleave {
		return time.Duration(s.runs()) * (s.Settle + run)
	}
	return s.Settle + time.Duration(s.runs())*run
}

func (s *sweep) runs() int {
	if s.Runs < 1 {
		return 1
	}
	return s.Runs
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run performs the sweep and always restores the original state before
// it returns: after success, after an error and after ctx is cancelled.
// Once candidates were applied, the report is returned also with an
// error, holding what was measured until then (Complete false) and how the
// restore went; when nothing was applied (no candidates, Prepare failed)
// the report is nil.
func (s *sweep) Run(ctx context.Context) (rep *report, err error) {
	sleep, now := s.Sleep, s.Now
	if sleep == nil {
		sleep = sleepCtx
	}
	if now == nil {
		now = time.Now
	}
	metric := s.Metric
	if metric == "" {
		metric = metricThroughput
	}
	rep = &report{
		Load:        s.Load.String(),
		Runs:        s.runs(),
		Interleaved: s.Interleave,
		Settle:      s.Settle.String(),
		Metric:      metric,
		Notes:       metricNotes(),
		Results:     make([]result, len(s.Candidates)),
	}
	for i, c := range s.Candidates {
		rep.Results[i].Candidate = c
	}
	if len(s.Candidates) == 0 {
		return nil, errors.New("no candidates")
	}
	prep, err := s.Steerer.Prepare(ctx, s.Candidates)
	if err != nil {
		return nil, outline.Errorf("prepare: %w", err)
	}
	started := now()
	rep.Devices = prep.Devices
	for i := range rep.Results {
		if i < len(prep.Masks) {
			rep.Results[i].Masks = prep.Masks[i]
		}
		if i < len(prep.SameAs) {
			rep.Results[i].SameAs = prep.SameAs[i]
		}
	}
	defer func() {
		to := s.RestoreTimeout
		if to <= 0 {
			to = 30 * time.Second
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), to)
		defer cancel()
		s.progress("restoring the original state (%d knobs)", prep.Knobs)
		res, rerr := s.Steerer.Restore(rctx)
		if rerr != nil {
			res.Error = rerr.Error()
			err = outline.JoinErrors(err, outline.Errorf("restore: %w", rerr))
			s.progress("RESTORE FAILED: %v", rerr)
		}
		rep.Restore = res
		rep.Seconds = now().Sub(started).Seconds()
		rep.finish()
	}()

	runs := s.runs()
	steps := s.order(runs)
	var runTime time.Duration
	var runCount int
	// left is the time the steps from k on should take.
	left := func(k int) time.Duration {
		per := s.Load.Estimate()
		if runCount > 0 {
			per = runTime / time.Duration(runCount)
		}
		var d time.Duration
		for _, st := range steps[k:] {
			d += per
			if st.apply {
				d += s.Settle
			}
		}
		return d
	}
	for k, st := range steps {
		i, j, c := st.cand, st.run, s.Candidates[st.cand]
		res := &rep.Results[i]
		if res.Error != "" {
			continue // its apply failed in an earlier round
		}
		if err := ctx.Err(); err != nil {
			return rep, outline.Errorf("sweep stopped before candidate %d of %d: %w", i+1, len(s.Candidates), err)
		}
		if st.apply {
			s.progress("[%d/%d] %s: apply", i+1, len(s.Candidates), c.Name)
			if err := s.Steerer.Apply(ctx, c); err != nil {
				if ctx.Err() != nil {
					return rep, outline.Errorf("candidate %s: apply: %w", c.Name, err)
				}
				res.Error = fmt.Sprintf("apply: %v", err)
				if j > 0 {
					// Interleaved, it applied in earlier rounds: a
					// candidate that cannot be applied every time is
					// not ranked on the runs it had.
					res.Error = fmt.Sprintf("apply (round %d): %v", j+1, err)
					res.Runs = nil
				}
				s.progress("[%d/%d] %s: not measured: %v", i+1, len(s.Candidates), c.Name, err)
				continue
			}
			if err := sleep(ctx, s.Settle); err != nil {
				return rep, outline.Errorf("candidate %s: settle: %w", c.Name, err)
			}
		}
		s.progress("[%d/%d] %s: run %d/%d, about %s left", i+1, len(s.Candidates), c.Name, j+1, runs,
			left(k).Round(time.Second))
		before, err := s.Counters()
		if err != nil {
			return rep, outline.Errorf("candidate %s run %d: %w", c.Name, j+1, err)
		}
		t0 := now()
		m, err := s.Load.Run(ctx, j)
		took := now().Sub(t0)
		if err != nil {
			return rep, outline.Errorf("candidate %s run %d: %w", c.Name, j+1, err)
		}
		after, err := s.Counters()
		if err != nil {
			return rep, outline.Errorf("candidate %s run %d: %w", c.Name, j+1, err)
		}
		runTime += took
		runCount++
		res.Runs = append(res.Runs, run{measurement: m, Seconds: took.Seconds(), CPUs: Deltas(before, after)})
	}
	rep.Complete = true
	return rep, nil
}

// step is one run of one candidate, after an apply when apply is set.
type step struct {
	cand, run int
	apply     bool
}

// order is the sweep's steps: each candidate's runs in a row after one
// apply, or with Interleave round by round, an apply before every run.
func (s *sweep) order(runs int) []step {
	steps := make([]step, 0, len(s.Candidates)*runs)
	if s.Interleave {
		for j := 0; j < runs; j++ {
			for i := range s.Candidates {
				steps = append(steps, step{cand: i, run: j, apply: true})
			}
		}
		return steps
	}
	for i := range s.Candidates {
		for j := 0; j < runs; j++ {
			steps = append(steps, step{cand: i, run: j, apply: j == 0})
		}
	}
	return steps
}

//go:noinline
func (s *sweep) progress(format string, a ...any) {
	if s.Progress != nil {
		fmt.Fprintf(s.Progress, "tune: "+format+"\n", a...)
	}
}
