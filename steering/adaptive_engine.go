package steering

import (
	"errors"
	"slices"
	"strings"
	"time"
)

// The engine's half of the adaptive mode: it keeps the deviations from the
// auto plan, lays them over every plan made in adaptive mode (so that a
// hotplug apply or a reload keeps them), applies moves with the usual
// locking and rollback, reads the load samples, and reports all of it in
// Status and Queues.

// errNoAdaptive is what a build without the adaptive mode (the plain router
// build, see adaptive_stub.go) answers when asked for it.
var errNoAdaptive = errors.New("the adaptive mode is not in this build (it is in the packet-steering-tune package)")

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

// AdaptiveStatus is the adaptive part of Status: the deviations from the
// auto plan with their reasons, the recent moves (newest last, bounded),
// and the loop's state.
type AdaptiveStatus struct {
	Deviations []Deviation     `json:"deviations"`
	Moves      []MoveRecord    `json:"moves"`
	Sampling   *SamplingStatus `json:"sampling,omitempty"`
}

// adaptiveState is guarded by Engine.mu.
type adaptiveState struct {
	devs     []Deviation
	moves    []MoveRecord
	sampling *SamplingStatus
}

// maxMoveHistory bounds the moves kept for status.
const maxMoveHistory = 16

func (e *Engine) clearDeviations() {
	e.mu.Lock()
	e.adaptive.devs = nil
	e.mu.Unlock()
}

// Deviations returns the current deviations from the auto plan.
func (e *Engine) Deviations() []Deviation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.adaptive.devs)
}

// AdaptReason is the apply reason of a set of moves, as logged and sent
// with packet_steering.applied.
func AdaptReason(moves []Move) string {
	parts := make([]string, len(moves))
	for i, m := range moves {
		parts[i] = m.String()
	}
	return "adaptive: " + strings.Join(parts, "; ")
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
func (e *Engine) adaptiveStatus() *AdaptiveStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := &AdaptiveStatus{Deviations: slices.Clone(e.adaptive.devs), Moves: slices.Clone(e.adaptive.moves)}
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
