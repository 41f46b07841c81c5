package adaptive

import (
	"slices"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// The engine's adaptive state and what status shows of it.

// MoveRecord is one move as status shows it: when, what, and how the
// apply went.
type MoveRecord struct {
	_    outline.NoCompare
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
	// Units are the per-queue loads of the last full interval, each
	// with the measure it comes from.
	Units []UnitLoad `json:"units,omitempty"`
	Error string     `json:"error,omitempty"`
}

// Status is the adaptive part of Status: the loop's effective
// options with their sources, the deviations from the auto plan with their
// reasons, the recent moves (newest last, bounded), deviations the plan
// dropped (their queue or CPU is gone) and the loop's state.
type Status struct {
	Config     []Option     `json:"config"`
	Deviations []Deviation  `json:"deviations"`
	Moves      []MoveRecord `json:"moves"`
	Dropped    []DroppedDev `json:"dropped,omitempty"`
	// StateFile says what became of the runtime state file
	// (StateFile) when it could not be used; "" when it could.
	StateFile string          `json:"state_file,omitempty"`
	Sampling  *SamplingStatus `json:"sampling,omitempty"`
}

// DroppedDev is a deviation the adaptive plan no longer lays over the auto
// plan, and why (its queue or CPU is gone, or it equals the auto
// placement now).
type DroppedDev struct {
	_ outline.NoCompare
	Deviation
	Why  string    `json:"why"`
	Time time.Time `json:"time"`
}

// maxMoveHistory bounds the moves kept for status (and in the state
// file); maxDropped the dropped deviations.
const (
	maxMoveHistory = 16
	maxDropped     = 16
)

// Deviations returns the current deviations from the auto plan.
func (s *State) Deviations() []Deviation {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked()
	return slices.Clone(s.devs)
}

// Settings returns the adaptive loop's configuration as the last
// apply in mode adaptive resolved it from the `config adaptive` section
// (ResolveConfig), the defaults before one.
func (s *State) Settings() Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cfgSet {
		return Settings{Config: DefaultConfig()}
	}
	return s.cfg
}

// noteSampling records the loop's state for status; nil: not running.
func (s *State) noteSampling(st *SamplingStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == nil {
		if s.sampling != nil {
			s.sampling.Running = false
		}
		return
	}
	c := *st
	c.Loads, c.Units = slices.Clone(st.Loads), slices.Clone(st.Units)
	s.sampling = &c
}

// Status is the Status part for the adaptive mode, with snap (the
// engine's view) to resolve the loop's options before an apply did.
func (s *State) Status(snap *platform.Snapshot) *Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked()
	st := &Status{Deviations: slices.Clone(s.devs), Moves: slices.Clone(s.moves),
		Dropped: slices.Clone(s.dropped), StateFile: s.note}
	if s.cfgSet {
		st.Config = slices.Clone(s.cfg.Options)
	} else {
		st.Config = ResolveConfig(snap).Options
	}
	if st.Config == nil {
		st.Config = []Option{}
	}
	if st.Deviations == nil {
		st.Deviations = []Deviation{}
	}
	if st.Moves == nil {
		st.Moves = []MoveRecord{}
	}
	if s.sampling != nil {
		c := *s.sampling
		st.Sampling = &c
	}
	return st
}
