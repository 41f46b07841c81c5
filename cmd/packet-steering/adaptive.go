package main

import (
	"context"
	"errors"
	"sync"

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
	RunAdaptive(ctx context.Context, cfg steering.AdaptiveConfig, apply func(context.Context, []steering.Move) (*steering.Result, error)) error
}

// adaptiveRunner starts and stops the loop.
type adaptiveRunner struct {
	// run runs the loop until ctx is done.
	run func(ctx context.Context) error
	log *lineLogger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// sync starts the loop in mode adaptive and stops it in any other mode.
func (r *adaptiveRunner) sync(m steering.Mode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case m == steering.ModeAdaptive && r.cancel == nil:
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		r.cancel, r.done = cancel, done
		r.log.Info("adaptive loop started")
		go func() {
			defer close(done)
			if err := r.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				r.log.Error("adaptive loop stopped", "err", err)
			}
		}()
	case m != steering.ModeAdaptive && r.cancel != nil:
		r.stopLocked()
		r.log.Info("adaptive loop stopped", "mode", string(m))
	}
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
func (e modeEngine) Adapt(ctx context.Context, moves []steering.Move) (*steering.Result, error) {
	return adapt(ctx, e.Engine, moves)
}

// adapt calls the engine's Adapt when it has one.
func adapt(ctx context.Context, eng ubusobj.Engine, moves []steering.Move) (*steering.Result, error) {
	a, ok := eng.(ubusobj.Adapter)
	if !ok {
		return nil, errors.New("the engine cannot apply adaptive moves")
	}
	return a.Adapt(ctx, moves)
}
