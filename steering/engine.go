package steering

import (
	"context"
	"errors"
	"time"

	"github.com/packet-steering/packet-steering/platform"
)

// ErrInvalid marks a request the caller got wrong (unknown mode or device,
// negative or absurd flows). Errors wrapping it map to ubus INVALID_ARGUMENT
// and CLI exit status 2; nothing has been changed when it is returned.
var ErrInvalid = errors.New("invalid argument")

// PlanRequest selects what to plan. Zero values mean "as configured".
type PlanRequest struct {
	Mode  Mode
	Flows *int
}

// ApplyRequest is one apply. Device limits it to one netdev ("" = all).
type ApplyRequest struct {
	Reason string
	Device string
	DryRun bool
}

// SetModeRequest changes the mode. With Persist the choice is written to UCI;
// without, it changes only the live state until the next restart.
type SetModeRequest struct {
	Mode    Mode
	Flows   *int
	Persist bool
	Reason  string
}

// Result reports one apply.
type Result struct {
	Mode       Mode      `json:"mode,omitempty"`
	Changed    []Action  `json:"changed"`
	Unchanged  int       `json:"unchanged"`
	Failed     []Failure `json:"failed"`
	Skipped    []Skip    `json:"skipped,omitempty"`
	DurationUS int64     `json:"duration_us"`
}

// Failure is an action that could not be written, with the kernel's error.
type Failure struct {
	Action Action `json:"action"`
	Error  string `json:"error"`
}

// Skip is an action not written because its target vanished (ENOENT, ENODEV).
type Skip struct {
	Action Action `json:"action"`
	Reason string `json:"reason"`
}

// ApplyRecord summarises the last apply for status.
type ApplyRecord struct {
	Time       time.Time `json:"time"`
	Reason     string    `json:"reason"`
	Changed    int       `json:"changed"`
	Failed     int       `json:"failed"`
	DurationUS int64     `json:"duration_us"`
}

// Settings is the effective configuration: mode and flows and where they
// came from ("packet_steering", "network", "default" or "live").
type Settings struct {
	Mode   Mode   `json:"mode"`
	Flows  int    `json:"flows"`
	Source string `json:"source"`
}

// Status is what `status` shows.
type Status struct {
	Mode       Mode         `json:"mode"`
	Configured Settings     `json:"configured"`
	Policy     string       `json:"policy"`
	Evidence   string       `json:"evidence,omitempty"`
	Platform   PlatformInfo `json:"platform"`
	Offload    string       `json:"offload"` // none, software, hardware
	InSync     bool         `json:"in_sync"`
	LastApply  *ApplyRecord `json:"last_apply,omitempty"`
	Hints      []Hint       `json:"hints"`
	CPUs       []CPUStat    `json:"cpus"`
	// ConfigErrors lists config files that do not parse (the last good
	// state is kept while they are broken).
	ConfigErrors []platform.Gap `json:"config_errors,omitempty"`
}

// PlatformInfo identifies the machine in status.
type PlatformInfo struct {
	Board  string `json:"board"`
	Model  string `json:"model"`
	Target string `json:"target"`
	CPUs   int    `json:"cpus"`
}

// CPUStat is one CPU's softnet counters.
type CPUStat struct {
	CPU         int    `json:"cpu"`
	Processed   uint64 `json:"processed"`
	Dropped     uint64 `json:"dropped"`
	TimeSqueeze uint64 `json:"time_squeeze"`
	RPSReceived uint64 `json:"rps_received"`
}

// DeviceQueues is one device in `get_queues`: live and wanted values.
type DeviceQueues struct {
	Name   string        `json:"name"`
	Driver string        `json:"driver"`
	Kind   string        `json:"kind"`
	Rx     []RxQueueView `json:"rx"`
	Tx     []TxQueueView `json:"tx"`
}

// RxQueueView is one rx queue with its NAPI thread and IRQ, live and wanted.
type RxQueueView struct {
	Queue       string    `json:"queue"`
	RPSCPUs     string    `json:"rps_cpus"`
	WantRPSCPUs string    `json:"want_rps_cpus"`
	RPSFlowCnt  int       `json:"rps_flow_cnt"`
	NAPI        *NAPIView `json:"napi,omitempty"`
	IRQ         *IRQView  `json:"irq,omitempty"`
}

// NAPIView is a NAPI thread's live and wanted CPUs (cpu lists).
type NAPIView struct {
	PID      int    `json:"pid"`
	Thread   string `json:"thread"`
	CPUs     string `json:"cpus"`
	WantCPUs string `json:"want_cpus"`
}

// IRQView is an IRQ's live and wanted CPUs (cpu lists).
type IRQView struct {
	IRQ      int    `json:"irq"`
	Name     string `json:"name"`
	CPUs     string `json:"cpus"`
	WantCPUs string `json:"want_cpus"`
}

// TxQueueView is one tx queue's live and wanted XPS mask.
type TxQueueView struct {
	Queue       string `json:"queue"`
	XPSCPUs     string `json:"xps_cpus"`
	WantXPSCPUs string `json:"want_xps_cpus"`
}

// Engine ties reading, planning, applying and persisting together for one
// root. It is safe for concurrent use; applies are serialised.
type Engine struct {
	root string
}

// NewEngine returns an engine for the machine below root ("/" on a router).
func NewEngine(root string) *Engine { return &Engine{root: root} }

var errNotBuilt = errors.New("steering: engine not built yet")

// Snapshot reads the machine.
func (e *Engine) Snapshot(ctx context.Context) (*platform.Snapshot, error) { return nil, errNotBuilt }

// Plan reads the machine and plans it.
func (e *Engine) Plan(ctx context.Context, req PlanRequest) (*platform.Snapshot, *Plan, error) {
	return nil, nil, errNotBuilt
}

// Apply makes the machine match the configured plan.
func (e *Engine) Apply(ctx context.Context, req ApplyRequest) (*Result, error) {
	return nil, errNotBuilt
}

// SetMode changes the mode (and flows), optionally persisting it, and applies.
func (e *Engine) SetMode(ctx context.Context, req SetModeRequest) (*Result, error) {
	return nil, errNotBuilt
}

// Status reports the effective state.
func (e *Engine) Status(ctx context.Context) (*Status, error) { return nil, errNotBuilt }

// Queues reports devices with live and wanted values; device "" means all.
func (e *Engine) Queues(ctx context.Context, device string) ([]DeviceQueues, error) {
	return nil, errNotBuilt
}
