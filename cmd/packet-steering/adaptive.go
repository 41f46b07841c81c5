package main

import (
	"context"
	"errors"
	"sync"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// The daemon runs the adaptive mode's control loop (steering.Engine.
// RunAdaptive) only while the effective mode is adaptive: every apply and
// set_mode reports the mode it applied, and the loop is started or stopped
// accordingly. In any other mode no loop runs and no timer is armed.

// adaptiveLooper is what the daemon needs to run the loop;
// *steering.Engine implements it.
type adaptiveLooper interface {
	RunAdaptive(ctx context.Context, cfg adaptive.Config, apply func(context.Context, []adaptive.Move) (*steering.Result, error)) error
	// AdaptiveSettings is the loop's configuration as the last apply in
	// mode adaptive resolved it from UCI.
	AdaptiveSettings() adaptive.Settings
}

// adaptiveRunner starts and stops the loop, and restarts it when its
// configuration changed (a reload after the `config adaptive` section was
// edited).
type adaptiveRunner struct {
	// run runs the loop with cfg until ctx is done.
	run func(ctx context.Context, cfg adaptive.Config) error
	// config is the configuration to run with now.
	config func() adaptive.Config
	log    *lineLogger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	cfg    adaptive.Config // of the running loop
}

// sync starts the loop in mode adaptive (restarting it when the
// configuration changed) and stops it in any other mode.
func (r *adaptiveRunner) sync(m plan.Mode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m != plan.ModeAdaptive {
		if r.cancel != nil {
			r.stopLocked()
			r.log.Info("adaptive loop stopped", "mode", string(m))
		}
		return
	}
	cfg := adaptive.DefaultConfig()
	if r.config != nil {
		cfg = r.config()
	}
	if r.cancel != nil {
		if cfg == r.cfg {
			return
		}
		r.stopLocked()
		r.log.Info("adaptive loop restarting: its options changed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.cancel, r.done, r.cfg = cancel, done, cfg
	r.log.Info("adaptive loop started", "interval", cfg.Interval.String(), "max_idle_interval", cfg.MaxIdleInterval.String(),
		"dwell", cfg.MinDwell.String(), "max_moves", cfg.MaxMoves)
	go func() {
		defer close(done)
		if err := r.run(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
			r.log.Error("adaptive loop stopped", "err", err)
		}
	}()
}

// running reports whether the loop runs.
func (r *adaptiveRunner) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cancel != nil
}

// stop ends the loop and waits for it.
func (r *adaptiveRunner) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		r.stopLocked()
	}
}

func (r *adaptiveRunner) stopLocked() {
	r.cancel()
	<-r.done
	r.cancel, r.done = nil, nil
}

// modeEngine tells the runner the mode of every apply and mode change, and
// passes the loop's moves on to the engine.
type modeEngine struct {
	ubusobj.Engine
	r *adaptiveRunner
}

func (e modeEngine) Apply(ctx context.Context, req steering.ApplyRequest) (*steering.Result, error) {
	res, err := e.Engine.Apply(ctx, req)
	if err == nil && !req.DryRun {
		e.r.sync(res.Mode)
	}
	return res, err
}

func (e modeEngine) SetMode(ctx context.Context, req steering.SetModeRequest) (*steering.Result, error) {
	res, err := e.Engine.SetMode(ctx, req)
	if err == nil {
		e.r.sync(res.Mode)
	}
	return res, err
}

// Adapt passes moves to the wrapped engine; it never syncs the runner (the
// loop itself calls it).
func (e modeEngine) Adapt(ctx context.Context, moves []adaptive.Move) (*steering.Result, error) {
	return adapt(ctx, e.Engine, moves)
}

// adapt calls the engine's Adapt when it has one.
func adapt(ctx context.Context, eng ubusobj.Engine, moves []adaptive.Move) (*steering.Result, error) {
	a, ok := eng.(ubusobj.Adapter)
	if !ok {
		return nil, errors.New("the engine cannot apply adaptive moves")
	}
	return a.Adapt(ctx, moves)
}
