package steering

import (
	"slices"
	"time"

	"github.com/packet-steering/packet-steering/platform"
)

// The engine's adaptive state and what status shows of it.

// MoveRecord is one move as status shows it: when, what, and how the
// apply went.
type MoveRecord struct {
	Time time.Time `json:"time"`
	Move
	Changed int    `json:"changed"`
	Failed  int    `json:"failed"`
	Error   string `json:"error,omitempty"`
}

// SamplingStatus is the control loop's state.
type SamplingStatus struct {
	Running bool `json:"running"`
	// IntervalMS is the current sampling interval; Active whether the
	// last sample saw traffic (PPS packets per second, all CPUs).
	IntervalMS int64   `json:"interval_ms"`
	Active     bool    `json:"active"`
	PPS        float64 `json:"pps"`
	// Wakeups counts the loop's samples since it started, Full the full
	// ones (a quick sample reads only softnet_stat).
	Wakeups uint64    `json:"wakeups"`
	Full    uint64    `json:"full_samples"`
	Last    time.Time `json:"last_sample"`
	// Loads are the per-CPU loads of the last full interval.
	Loads []CPULoad `json:"loads,omitempty"`
	Error string    `json:"error,omitempty"`
}

// AdaptiveStatus is the adaptive part of Status: the loop's effective
// options with their sources, the deviations from the auto plan with their
// reasons, the recent moves (newest last, bounded), deviations the plan
// dropped (their queue or CPU is gone) and the loop's state.
type AdaptiveStatus struct {
	Config     []AdaptiveOption `json:"config"`
	Deviations []Deviation      `json:"deviations"`
	Moves      []MoveRecord     `json:"moves"`
	Dropped    []DroppedDev     `json:"dropped,omitempty"`
	// StateFile says what became of the runtime state file
	// (AdaptiveStateFile) when it could not be used; "" when it could.
	StateFile string          `json:"state_file,omitempty"`
	Sampling  *SamplingStatus `json:"sampling,omitempty"`
}

// DroppedDev is a deviation the adaptive plan no longer lays over the auto
// plan, and why (its queue or CPU is gone, or it equals the auto
// placement now).
type DroppedDev struct {
	Deviation
	Why  string    `json:"why"`
	Time time.Time `json:"time"`
}

// adaptiveState is guarded by Engine.mu.
type adaptiveState struct {
	devs     []Deviation
	moves    []MoveRecord
	sampling *SamplingStatus
	dropped  []DroppedDev
	// cfg is the loop's configuration as the last apply in mode adaptive
	// resolved it (cfgSet); before one, status resolves it from the view.
	cfg    AdaptiveSettings
	cfgSet bool
	// loaded: the state file was read (once per engine); written is what
	// was last written to it ("" none); note says why the file was not
	// used.
	loaded  bool
	written string
	note    string
}

// maxMoveHistory bounds the moves kept for status (and in the state
// file); maxDropped the dropped deviations.
const (
	maxMoveHistory = 16
	maxDropped     = 16
)

// Deviations returns the current deviations from the auto plan.
func (e *Engine) Deviations() []Deviation {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loadAdaptiveLocked()
	return slices.Clone(e.adaptive.devs)
}

// AdaptiveSettings returns the adaptive loop's configuration as the last
// apply in mode adaptive resolved it from the `config adaptive` section
// (ResolveAdaptiveConfig), the defaults before one.
func (e *Engine) AdaptiveSettings() AdaptiveSettings {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.adaptive.cfgSet {
		return AdaptiveSettings{Config: DefaultAdaptiveConfig()}
	}
	return e.adaptive.cfg
}

// noteSampling records the loop's state for status; nil: not running.
func (e *Engine) noteSampling(st *SamplingStatus) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st == nil {
		if e.adaptive.sampling != nil {
			e.adaptive.sampling.Running = false
		}
		return
	}
	c := *st
	c.Loads = slices.Clone(st.Loads)
	e.adaptive.sampling = &c
}

// adaptiveStatus is the Status part for the adaptive mode.
func (e *Engine) adaptiveStatus(snap *platform.Snapshot) *AdaptiveStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loadAdaptiveLocked()
	st := &AdaptiveStatus{Deviations: slices.Clone(e.adaptive.devs), Moves: slices.Clone(e.adaptive.moves),
		Dropped: slices.Clone(e.adaptive.dropped), StateFile: e.adaptive.note}
	if e.adaptive.cfgSet {
		st.Config = slices.Clone(e.adaptive.cfg.Options)
	} else {
		st.Config = resolveAdaptiveConfig(snap).Options
	}
	if st.Config == nil {
		st.Config = []AdaptiveOption{}
	}
	if st.Deviations == nil {
		st.Deviations = []Deviation{}
	}
	if st.Moves == nil {
		st.Moves = []MoveRecord{}
	}
	if e.adaptive.sampling != nil {
		c := *e.adaptive.sampling
		st.Sampling = &c
	}
	return st
}
