package daemon

import (
	"context"
	"errors"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// The daemon runs the adaptive mode's control loop (steering.Engine.
// RunAdaptive) only while the effective mode is adaptive: every apply and
// set_mode reports the mode it applied, and the loop is started or stopped
// accordingly. In any other mode no loop runs and no timer is armed.

// AdaptiveLoop is what the daemon needs to run the loop;
// *steering.Engine implements it.
type AdaptiveLoop interface {
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
	log    *Logger

	mu     outline.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	cfg    adaptive.Config // of the running loop
	seq    uint64          // the latest apply synced (steering.Result.Seq)
}

// sync starts the loop in mode adaptive (restarting it when the
// configuration changed) and stops it in any other mode. seq is the
// apply's steering.Result.Seq: two calls finish their applies in lock
// order but may reach sync in the other order (a start apply and an early
// set_mode did, under an emulator), and the mode of an older apply than
// one already synced is not the mode in effect, so it is ignored. 0: no
// order known, always followed.
func (r *adaptiveRunner) sync(m plan.Mode, seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq != 0 {
		if seq < r.seq {
			return
		}
		r.seq = seq
	}
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

// stop ends the loop and waits for it.
func (r *adaptiveRunner) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		r.stopLocked()
	}
}

//go:noinline
func (r *adaptiveRunner) stopLocked() {
	r.cancel()
	<-r.done
	r.cancel, r.done = nil, nil
}
