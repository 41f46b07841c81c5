// Package adaptive is the adaptive mode (experimental). The plan is the
// auto plan; a control loop (Run, which reaches the steering engine
// through Hook) samples the per-CPU load while traffic flows and,
// when a CPU cannot keep up, moves single queues' receive work to the least
// loaded CPU, and back to the auto placement when the load is gone. Each
// move is a Deviation laid over the auto plan (AdaptPlan) and written by an
// ordinary apply.
//
// This file and controller.go are the pure half: which queues can move
// (Units), how a deviation changes the plan (AdaptPlan), and the
// decisions (Controller.Step: a series of samples in, moves out).
// They do no I/O and read no clock: sample times come with the samples.
// config.go reads the loop's options, state.go keeps the deviations (and
// their state file), status.go is what status shows, loop.go the loop.
//
// A unit is one rx queue whose work the auto plan puts on exactly one CPU:
//
//	rps   the queue's RPS mask holds one CPU: the RPS target moves
//	napi  RPS is off and the queue's threaded-NAPI thread is pinned to one
//	      CPU: the thread moves, and the queue's IRQ with it when the plan
//	      pins that IRQ to the same CPU
//
// Queues spread over several CPUs, and queues without a NAPI thread or RPS
// target, are left as auto plans them.
package adaptive

import (
	"fmt"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
)

// Unit kinds.
const (
	UnitRPS  = "rps"
	UnitNAPI = "napi"
)

// Unit is one movable rx queue: its kind, the CPU the auto plan
// gives it (Home) and the CPU it is planned on now (CPU; Home unless
// deviated). PID is its NAPI thread (0 if none).
type Unit struct {
	_      outline.NoCompare
	Device string `json:"device"`
	Queue  string `json:"queue"`
	Kind   string `json:"kind"`
	PID    int    `json:"pid,omitempty"`
	Home   int    `json:"auto_cpu"`
	CPU    int    `json:"cpu"`
}

// Key names the unit: "eth0/rx-2".
func (u Unit) Key() string { return u.Device + "/" + u.Queue }

// Deviation is a queue the adaptive loop placed away from the auto plan.
type Deviation struct {
	Device string    `json:"device"`
	Queue  string    `json:"queue"`
	Kind   string    `json:"kind"`
	Home   int       `json:"auto_cpu"`
	CPU    int       `json:"cpu"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// Key names the deviated queue: "eth0/rx-2".
func (d Deviation) Key() string { return d.Device + "/" + d.Queue }

// Move is one decision of the controller: put a unit's work on CPU To.
// To == Home is a move back to the auto placement.
type Move struct {
	_      outline.NoCompare
	Device string `json:"device"`
	Queue  string `json:"queue"`
	Kind   string `json:"kind"`
	From   int    `json:"from"`
	To     int    `json:"to"`
	Home   int    `json:"auto_cpu"`
	// Reason says which CPU was saturated and by which measure (or why
	// the queue goes back).
	Reason string `json:"reason"`
}

// Key names the moved queue: "eth0/rx-2".
func (m Move) Key() string { return m.Device + "/" + m.Queue }

// String is the move for logs and the event's reason.
func (m Move) String() string {
	return fmt.Sprintf("%s %s cpu%d->cpu%d: %s", m.Key(), m.Kind, m.From, m.To, m.Reason)
}

// Config tunes the controller. DefaultConfig gives the
// daemon's values.
type Config struct {
	// Interval is the sampling interval while traffic flows.
	Interval time.Duration
	// MaxIdleInterval bounds the back-off without traffic: the interval
	// doubles from Interval up to it while the packet rate stays below
	// IdlePPS.
	MaxIdleInterval time.Duration
	// IdlePPS: below this many packets per second (softnet processed, all
	// CPUs) there is no traffic worth steering.
	IdlePPS float64
	// HighLoad: a CPU whose network load reaches it is saturated. The
	// network load is softirq time plus the demand of the unit NAPI
	// threads on the CPU (their CPU time plus the time they waited
	// runnable for it), as a fraction of the interval: a thread that waits
	// for its CPU has work the CPU does not get to.
	HighLoad float64
	// BusyLoad with BusyNet: a CPU busy at least BusyLoad (all non-idle
	// time) whose network load is at least BusyNet is saturated too: the
	// network work cannot get more of it.
	BusyLoad, BusyNet float64
	// LowLoad: a deviated queue goes back once its auto CPU's network load
	// plus the queue's own stays at or below it.
	LowLoad float64
	// SqueezeRate and DropRate (per second, per CPU): time_squeeze and
	// dropped rising this fast mark a saturated CPU.
	SqueezeRate, DropRate float64
	// Margin: a move must lower the busier CPU's load by at least this
	// much compared with the target's load after the move.
	Margin float64
	// MinUnitLoad: queues with less load are not worth moving.
	MinUnitLoad float64
	// HotIntervals: consecutive saturated intervals before a move.
	HotIntervals int
	// CoolIntervals: consecutive intervals with room on the auto CPU
	// before a move back.
	CoolIntervals int
	// MinDwell: a queue stays at least this long where it was put.
	MinDwell time.Duration
	// MaxMoves bounds the moves per interval.
	MaxMoves int
	// MaxHistory bounds the recent moves kept for status.
	MaxHistory int
}

// DefaultConfig is the daemon's configuration.
func DefaultConfig() Config {
	return Config{
		Interval:        2 * time.Second,
		MaxIdleInterval: 32 * time.Second,
		IdlePPS:         2000,
		HighLoad:        0.85,
		BusyLoad:        0.95,
		BusyNet:         0.50,
		LowLoad:         0.50,
		SqueezeRate:     20,
		DropRate:        1,
		Margin:          0.15,
		MinUnitLoad:     0.05,
		HotIntervals:    2,
		CoolIntervals:   3,
		MinDwell:        20 * time.Second,
		MaxMoves:        1,
		MaxHistory:      16,
	}
}

// Option is one effective option of the adaptive loop as status
// shows it: its value (in the form the `config adaptive` section takes) and
// where it comes from (SourcePacketSteering or SourceDefault).
type Option struct {
	_      outline.NoCompare
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// Settings is the adaptive loop's effective configuration
// (ResolveConfig), each option with its source, and the problems
// of the configured values (each of which fell back to its default).
type Settings struct {
	Config   Config
	Options  []Option
	Problems []string
}

// Check reports a configuration the controller cannot work with.
func (c Config) Check() error {
	var bad []string
	if c.Interval <= 0 || c.MaxIdleInterval < c.Interval {
		bad = append(bad, "intervals: need 0 < Interval <= MaxIdleInterval")
	}
	if c.LowLoad <= 0 || c.LowLoad >= c.HighLoad || c.HighLoad > 1 {
		bad = append(bad, "loads: need 0 < LowLoad < HighLoad <= 1")
	}
	if c.Margin < 0 || c.MinUnitLoad < 0 || c.IdlePPS < 0 {
		bad = append(bad, "Margin, MinUnitLoad and IdlePPS must not be negative")
	}
	if c.HotIntervals < 1 || c.CoolIntervals < 1 || c.MaxMoves < 1 || c.MaxHistory < 1 {
		bad = append(bad, "HotIntervals, CoolIntervals, MaxMoves and MaxHistory must be at least 1")
	}
	if len(bad) > 0 {
		return outline.Errorf("%w: adaptive config: %s", plan.ErrInvalid, strings.Join(bad, "; "))
	}
	return nil
}

// Sample is one reading of the counters the controller decides on.
// A quick sample (Full false) has only the softnet counters and no units:
// it is what an idle loop reads.
type Sample struct {
	Time  time.Time
	Full  bool
	CPUs  []CPUCounters
	Units []UnitCounters
}

// CPUCounters are one CPU's cumulative counters: softnet_stat (Processed,
// Dropped, TimeSqueeze), /proc/softirqs NET_RX, and /proc/stat time in
// clock ticks (Total of all columns, Idle = idle + iowait, Softirq).
type CPUCounters struct {
	CPU         int
	Processed   uint64
	Dropped     uint64
	TimeSqueeze uint64
	NetRX       uint64
	Total       uint64
	Idle        uint64
	Softirq     uint64
}

// UnitCounters is a unit with its NAPI thread's cumulative CPU time (utime
// + stime, clock ticks; HasTicks false when the unit has no thread or it
// could not be read), the time it waited runnable for its CPU
// (nanoseconds; HasWait false where the kernel does not report it) and
// its queue's received packets from netlink qstats-get (HasPackets false
// where the kernel or driver keeps none: before Linux 6.9, veth).
type UnitCounters struct {
	_          outline.NoCompare
	Unit       Unit
	Ticks      uint64
	HasTicks   bool
	WaitNS     uint64
	HasWait    bool
	Packets    uint64
	HasPackets bool
}

// Sources of a unit's load (UnitLoad.Source).
const (
	// LoadNAPITime: the unit's NAPI thread's CPU time (and wait).
	LoadNAPITime = "napi-thread-time"
	// LoadQstatsShare: its share, by qstats rx packets over the interval,
	// of its CPU's softirq time among the RPS units there.
	LoadQstatsShare = "softirq-by-qstats-packets"
	// LoadEvenShare: an even share of its CPU's softirq time among the
	// RPS units there (some unit there has no qstats).
	LoadEvenShare = "softirq-even-share"
)

// UnitLoad is one unit's load over the last full interval, as the
// controller saw it: a fraction of the interval, with the measure it
// comes from (Source, Load* constants) and its queue's received packets
// per second from qstats (PPS, nil without them).
type UnitLoad struct {
	_      outline.NoCompare
	Device string   `json:"device"`
	Queue  string   `json:"queue"`
	Kind   string   `json:"kind"`
	CPU    int      `json:"cpu"`
	Load   float64  `json:"load"`
	Source string   `json:"source"`
	PPS    *float64 `json:"rx_pps,omitempty"`
}

// CPULoad is one CPU's load over the last full interval, as the
// controller saw it.
type CPULoad struct {
	_   outline.NoCompare
	CPU int `json:"cpu"`
	// Net is softirq time plus the demand (run + wait) of the unit NAPI
	// threads on the CPU; Wait is the threads' wait alone; Softirq and
	// Busy (all non-idle time) are fractions of the interval. Net can
	// exceed 1 when threads wait.
	Net     float64 `json:"net"`
	Wait    float64 `json:"napi_wait"`
	Softirq float64 `json:"softirq"`
	Busy    float64 `json:"busy"`
	// SqueezePS and DropPS are per second.
	SqueezePS float64 `json:"time_squeeze_ps"`
	DropPS    float64 `json:"dropped_ps"`
	Saturated string  `json:"saturated,omitempty"` // the measure, when saturated
}

// Reason is the apply reason of a set of moves, as logged and sent with
// packet_steering.applied.
func Reason(moves []Move) string {
	parts := make([]string, len(moves))
	for i, m := range moves {
		parts[i] = m.String()
	}
	return "adaptive: " + strings.Join(parts, "; ")
}
