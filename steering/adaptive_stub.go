//go:build router && !tune

package steering

import (
	"context"
	"fmt"

	"github.com/packet-steering/packet-steering/platform"
)

// The plain router build has no room for the adaptive mode (make size):
// ParseMode refuses it, and a configured `adaptive` falls back to auto with
// a hint. The packet-steering-tune variant (-tags router,tune) has it.

// adaptiveBuilt reports that this build lacks the adaptive mode.
const adaptiveBuilt = false

func (e *Engine) adaptPlan(_ *platform.Snapshot, p *Plan) *Plan { return p }

// Adapt refuses: no adaptive mode in this build.
func (e *Engine) Adapt(context.Context, []Move) (*Result, error) {
	return nil, fmt.Errorf("%w: %w", ErrInvalid, errNoAdaptive)
}

// AdaptiveSample refuses: no adaptive mode in this build.
func (e *Engine) AdaptiveSample(context.Context, bool) (LoadSample, error) {
	return LoadSample{}, errNoAdaptive
}

// RunAdaptive refuses: no adaptive mode in this build.
func (e *Engine) RunAdaptive(context.Context, AdaptiveConfig, func(context.Context, []Move) (*Result, error)) error {
	return errNoAdaptive
}

func (e *Engine) loadAdaptiveLocked() {}

func (e *Engine) adaptiveApplied(*platform.Snapshot, Mode) {}

func (e *Engine) forgetAdaptive() {}

func resolveAdaptiveConfig(*platform.Snapshot) AdaptiveSettings { return AdaptiveSettings{} }

func adaptiveConfigErrors(*platform.Snapshot) []platform.Gap { return nil }

// AdaptiveStatus is empty: Status.Adaptive is never set in this build.
type AdaptiveStatus struct{}

// adaptiveState is empty: this build keeps no adaptive state.
type adaptiveState struct{}

// Deviations returns none: no adaptive mode in this build.
func (e *Engine) Deviations() []Deviation { return nil }

// AdaptiveSettings returns the defaults: no adaptive mode in this build.
func (e *Engine) AdaptiveSettings() AdaptiveSettings {
	return AdaptiveSettings{Config: DefaultAdaptiveConfig()}
}

func (e *Engine) adaptiveStatus(*platform.Snapshot) *AdaptiveStatus { return nil }
