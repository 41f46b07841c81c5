package steering

import (
	"context"
	"os"
	"slices"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// ApplyRequest is one apply. Device limits it to one netdev ("" = all).
type ApplyRequest struct {
	_      outline.NoCompare
	Reason string
	Device string
	DryRun bool
}

// SetModeRequest changes the mode. With Persist the choice is written to UCI;
// without, it changes only the live state until the next restart.
type SetModeRequest struct {
	_       outline.NoCompare
	Mode    plan.Mode
	Flows   *int
	Persist bool
	Reason  string
}

// Result reports one apply.
type Result struct {
	Mode      plan.Mode     `json:"mode,omitempty"`
	Changed   []plan.Action `json:"changed"`
	Unchanged int           `json:"unchanged"`
	Failed    []Failure     `json:"failed"`
	Skipped   []Skip        `json:"skipped,omitempty"`
	// Refused are IRQ affinity writes the kernel refused (EINVAL, EIO):
	// the IRQ cannot move, which is recorded (RecordRefusedIRQs) and
	// planned around, not failed, rolled back or retried (irq_refused.go).
	Refused []Failure `json:"refused,omitempty"`
	// Devices names every device whose knobs changed, also through its
	// NAPI threads or IRQs, in name order.
	Devices    []string `json:"devices,omitempty"`
	DurationUS int64    `json:"duration_us"`
	// RolledBack counts the units (a device with its threads and IRQs, or
	// a lone thread, IRQ or sysctl) whose writes of this apply were undone
	// because one of them failed; the totals add it up (not in the reply:
	// Skipped says what was rolled back).
	RolledBack int `json:"-"`
	// Seq orders the applies of one Engine: each one that is not a dry
	// run gets the next number, under the apply lock, so a caller that
	// acts on results finishing out of order (the daemon's adaptive loop
	// runner) can tell the latest. 0 for a dry run.
	Seq uint64 `json:"-"`
}

// Failure is an action that could not be written, with the kernel's error.
type Failure struct {
	Action plan.Action `json:"action"`
	Error  string      `json:"error"`
}

// Skip is an action not written because its target vanished (ENOENT, ENODEV).
type Skip struct {
	Action plan.Action `json:"action"`
	Reason string      `json:"reason"`
}

// ApplyRecord summarises the last apply for status.
type ApplyRecord struct {
	Time       time.Time `json:"time"`
	Reason     string    `json:"reason"`
	Changed    int       `json:"changed"`
	Failed     int       `json:"failed"`
	DurationUS int64     `json:"duration_us"`
}

// Totals counts what the engine did since it was made (in the daemon:
// since it started; engines that live for one call share them through
// TotalsFile), for counters a monitoring system takes rates of. Dry runs
// are not counted.
type Totals struct {
	// Since is when the counting began.
	Since time.Time `json:"since"`
	// Applies counts applies, set_mode's and adaptive moves' included,
	// also those that found nothing to change.
	Applies uint64 `json:"applies"`
	// Changed counts knobs written (Result.Changed), Failed writes that
	// failed (Result.Failed, failed rollbacks included), IRQsRefused IRQ
	// moves the kernel refused (Result.Refused), Rollbacks the units whose
	// writes an apply undid (Result.RolledBack).
	Changed     uint64 `json:"changed"`
	Failed      uint64 `json:"failed"`
	IRQsRefused uint64 `json:"irqs_refused"`
	Rollbacks   uint64 `json:"rollbacks"`
	// AdaptiveMoves counts the adaptive mode's moves applied without a
	// failed write (those the mode kept).
	AdaptiveMoves uint64 `json:"adaptive_moves"`
}

// Status is what `status` shows.
type Status struct {
	Mode       plan.Mode     `json:"mode"`
	Configured plan.Settings `json:"configured"`
	Policy     string        `json:"policy"`
	Evidence   string        `json:"evidence,omitempty"`
	Platform   PlatformInfo  `json:"platform"`
	Offload    string        `json:"offload"` // none, software, hardware
	InSync     bool          `json:"in_sync"`
	LastApply  *ApplyRecord  `json:"last_apply,omitempty"`
	// Totals are the counts since the engine was made (WithStateFile: as
	// TotalsFile keeps them, since the first apply after boot).
	Totals *Totals `json:"totals,omitempty"`
	// UnfinishedApply: an apply before this process's first one was killed
	// midway (see ApplyMarkerFile); the apply that found it re-applied
	// every knob.
	UnfinishedApply *UnfinishedApply `json:"unfinished_apply,omitempty"`
	Hints           []plan.Hint      `json:"hints"`
	// Writers are the other programs that write these knobs: taken over,
	// deferred to (their knobs left alone), inactive, or in conflict.
	Writers []plan.WriterStatus `json:"writers,omitempty"`
	CPUs    []CPUStat           `json:"cpus"`
	// ConfigErrors lists config files that do not parse (the last good
	// state is kept while they are broken).
	ConfigErrors []platform.Gap `json:"config_errors,omitempty"`
	// Adaptive is the adaptive mode's state: set only in that mode.
	Adaptive *adaptive.Status `json:"adaptive,omitempty"`
}

// ThreadStatus is one NAPI thread with the queues it serves and its live
// and wanted CPUs (cpu lists; WantCPUs "" where the plan leaves it alone),
// as `packet-steering status` lists them.
type ThreadStatus struct {
	Device    string   `json:"device"`
	Thread    string   `json:"thread"`
	PID       int      `json:"pid"`
	Direction string   `json:"direction"` // platform.DirRX or platform.DirTX
	Queues    []string `json:"queues"`
	CPUs      string   `json:"cpus"`
	WantCPUs  string   `json:"want_cpus"`
}

// PlatformInfo identifies the machine in status.
type PlatformInfo struct {
	_      outline.NoCompare
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
	// Threads are the threads of a wifi device's mt76 phy with what each
	// does (rule_mt76.go); none for other devices.
	Threads []plan.PhyThread `json:"threads,omitempty"`
}

// RxQueueView is one rx queue with its rx NAPI thread and IRQ, live and
// wanted.
type RxQueueView struct {
	_           outline.NoCompare
	Queue       string    `json:"queue"`
	RPSCPUs     string    `json:"rps_cpus"`
	WantRPSCPUs string    `json:"want_rps_cpus"`
	RPSFlowCnt  int       `json:"rps_flow_cnt"`
	NAPI        *NAPIView `json:"napi,omitempty"`
	IRQ         *IRQView  `json:"irq,omitempty"`
	// Adaptive is set when the adaptive mode placed the queue away from
	// the auto plan: where auto puts it, and why it was moved.
	Adaptive *adaptive.Deviation `json:"adaptive,omitempty"`
	// NAPIKnobs are the per-NAPI knobs of the NAPI instance serving the
	// queue (netlink napi-get/napi-set, Linux 6.13+); nil when the kernel
	// reports none for it.
	NAPIKnobs *NAPIKnobsView `json:"napi_knobs,omitempty"`
}

// NAPIKnobsView is one NAPI instance's per-NAPI knobs, live and wanted
// (decimal text; a live value "" is not reported by this kernel, a wanted
// one "" is left alone by the plan).
type NAPIKnobsView struct {
	_      outline.NoCompare
	NAPIID int `json:"napi_id"`
	// Source says how the NAPI is known to serve the queue (as for
	// NAPIView).
	Source                string `json:"source,omitempty"`
	DeferHardIRQs         string `json:"defer_hard_irqs"`
	WantDeferHardIRQs     string `json:"want_defer_hard_irqs"`
	GROFlushTimeoutNS     string `json:"gro_flush_timeout_ns"`
	WantGROFlushTimeoutNS string `json:"want_gro_flush_timeout_ns"`
	Threaded              string `json:"threaded,omitempty"`
	WantThreaded          string `json:"want_threaded,omitempty"`
}

// NAPIView is a NAPI thread's live and wanted CPUs (cpu lists).
type NAPIView struct {
	PID      int    `json:"pid"`
	Thread   string `json:"thread"`
	CPUs     string `json:"cpus"`
	WantCPUs string `json:"want_cpus"`
	// Source says how the thread is known to serve the queue: "netlink"
	// or the inference rule's name (platform.Source*).
	Source string `json:"source,omitempty"`
}

// IRQView is an IRQ's live and wanted CPUs (cpu lists).
type IRQView struct {
	_        outline.NoCompare
	IRQ      int    `json:"irq"`
	Name     string `json:"name"`
	CPUs     string `json:"cpus"`
	WantCPUs string `json:"want_cpus"`
	// Fixed is the kernel's error when it refused to move this IRQ
	// (irq_refused.go); it stays on CPUs.
	Fixed string `json:"fixed,omitempty"`
	// Source is as for NAPIView.
	Source string `json:"source,omitempty"`
}

// TxQueueView is one tx queue's live and wanted XPS mask, with the NAPI
// thread that completes its transmits (when the driver has a separate one)
// and its IRQ.
type TxQueueView struct {
	_           outline.NoCompare
	Queue       string    `json:"queue"`
	XPSCPUs     string    `json:"xps_cpus"`
	WantXPSCPUs string    `json:"want_xps_cpus"`
	NAPI        *NAPIView `json:"napi,omitempty"`
	IRQ         *IRQView  `json:"irq,omitempty"`
}

// Engine ties reading, planning, applying and persisting together for one
// root. It is safe for concurrent use; applies are serialised, within the
// process by a semaphore and across processes by flock on
// <lock dir>/packet_steering.lock and the stock <lock dir>/smp_tune.lock.
type Engine struct {
	root      string
	configDir string
	lockDir   string
	runDir    string // <root>/var/run: the apply marker (ApplyMarkerFile)
	writer    Writer
	now       func() time.Time
	read      func(ctx context.Context, root string) (*platform.Snapshot, error)
	// readInputs reads what plans, applies and views need (see
	// platform.Reader.ReadInputs); WithReader sets it to the same
	// function as read.
	readInputs func(ctx context.Context, root string) (*platform.Snapshot, error)
	// readDecision reads what an apply decides with (see
	// platform.Reader.ReadDecision); WithReader sets it too.
	readDecision func(ctx context.Context, root string) (*platform.Snapshot, error)
	// devices reads what the decision for one netdev needs
	// (platform.Reader.ReadDevice); nil (WithReader): readDecision.
	devices *platform.Reader

	// sem serialises applies and mode changes in this process; a channel
	// so that waiting honours ctx.
	sem chan struct{}

	viewTTL time.Duration // WithViewCache; 0: every view reads the machine

	stateFile string        // WithStateFile; "": live settings and last apply in memory only
	lockWait  time.Duration // WithLockWait; 0: wait as long as the caller's ctx allows

	mu        outline.Mutex  // guards the fields below
	live      *plan.Settings // set_mode without persist; nil: as configured
	seq       uint64         // Result.Seq of the last apply
	lastApply *ApplyRecord
	totals    Totals           // since NewEngine
	lastGood  *platform.Config // last config read without parse errors
	// unfinished is the apply an apply of this engine found unfinished
	// (its marker was left behind); nil when none was.
	unfinished *UnfinishedApply
	view       *viewState      // cached read for Status and Queues
	gen        uint64          // counts applies and mode changes
	adaptive   *adaptive.State // the adaptive mode's deviations and history (its own lock)
}

// viewState is one read of the machine with its plan, as Status and Queues
// use it.
type viewState struct {
	_    outline.NoCompare
	at   time.Time
	snap *platform.Snapshot
	set  plan.Settings
	plan *plan.Plan
}

// Option configures an Engine.
type Option func(*Engine)

// WithWriter replaces the Writer (tests inject faults through it).
func WithWriter(w Writer) Option { return func(e *Engine) { e.writer = w } }

// WithClock replaces time.Now for the last-apply record.
func WithClock(now func() time.Time) Option { return func(e *Engine) { e.now = now } }

// WithLockDir makes the engine take its locks in dir instead of
// <root>/var/lock.
func WithLockDir(dir string) Option { return func(e *Engine) { e.lockDir = dir } }

// WithViewCache lets Status and Queues reuse the machine read (and plan) of
// a Status or Queues call made less than ttl ago, so that a busy poller (a
// LuCI page, a monitoring script) does not read every knob each time. Every
// apply and mode change drops the cache; a change made behind the engine's
// back shows up within ttl. Zero (the default) reads on every call.
func WithViewCache(ttl time.Duration) Option { return func(e *Engine) { e.viewTTL = ttl } }

// WithLockWait bounds how long an apply or a mode change waits for the
// apply locks, whatever its ctx allows (callers that must answer in time,
// such as the rpcd plugin, whose applies run on a context that is not
// cancelled once asked for). The wait ends with context.DeadlineExceeded
// and nothing changed.
func WithLockWait(d time.Duration) Option { return func(e *Engine) { e.lockWait = d } }

// WithReader replaces the machine reader, by default a platform.Reader of
// the engine's own (tests use it to hand in a snapshot).
func WithReader(read func(ctx context.Context, root string) (*platform.Snapshot, error)) Option {
	return func(e *Engine) { e.read, e.readInputs, e.readDecision, e.devices = read, read, read, nil }
}

// WithPlatformReader makes the engine read the machine through pr (a
// counting reader, in tests that measure what an apply reads), each kind
// of read with its own method as with the default reader.
func WithPlatformReader(pr *platform.Reader) Option {
	return func(e *Engine) {
		e.read, e.readInputs, e.readDecision, e.devices = pr.Read, pr.ReadInputs, pr.ReadDecision, pr
	}
}

// NewEngine returns an engine for the machine below root ("/" on a router).
func NewEngine(root string, opts ...Option) *Engine {
	// One platform.Reader serves every read: it keeps the parse of each
	// config file while its bytes stay the same.
	pr := platform.NewReader()
	e := &Engine{
		root:         root,
		configDir:    outline.JoinPath(root, "etc", "config"),
		lockDir:      outline.JoinPath(root, "var", "lock"),
		runDir:       outline.JoinPath(root, "var", "run"),
		now:          time.Now,
		read:         pr.Read,
		readInputs:   pr.ReadInputs,
		readDecision: pr.ReadDecision,
		devices:      pr,
		sem:          make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(e)
	}
	if e.writer == nil {
		e.writer = NewFSWriter(root)
	}
	e.adaptive = adaptive.NewState(e.runDir, func() time.Time { return e.now() })
	e.totals.Since = e.now()
	return e
}

// Root is the directory the engine reads and writes below.
func (e *Engine) Root() string { return e.root }

// Snapshot reads the machine as it is, config errors included.
func (e *Engine) Snapshot(ctx context.Context) (*platform.Snapshot, error) {
	snap, err := e.read(ctx, e.root)
	if err != nil {
		return nil, outline.Errorf("read %s: %w", e.root, err)
	}
	return snap, nil
}

// inputs reads what a plan, an apply or a view needs: the machine without
// the fields that describe it but decide nothing (interface index,
// operational state, master, bridge ports, xps_rxqs).
func (e *Engine) inputs(ctx context.Context) (*platform.Snapshot, error) {
	snap, err := e.readInputs(ctx, e.root)
	if err != nil {
		return nil, outline.Errorf("read %s: %w", e.root, err)
	}
	return snap, nil
}

// othersMatter reports whether the decision for the netdev dev, with the
// configuration cfg, depends on the other netdevs (see
// platform.Reader.ReadDevice). It does in every mode but off: the stock
// rule's CPU loads (legacy, all, auto and what builds on it) add up over
// the devices assigned before it, and IRQs are tied to netdevs by
// comparing them all. Mode off gives every queue and thread of dev the
// same value whatever else exists; only the shared mtk_eth NAPI threads
// belong to the first mtk_soc_eth netdev of several, so for that driver
// the others are read in off too; so they are while a config file does
// not parse (the last good one stands in) and when dev does not exist.
func (e *Engine) othersMatter(cfg *platform.Config, dev *platform.Device) bool {
	if dev == nil || dev.Driver == plan.MTKSocEth || len(cfg.Errors) > 0 {
		return true
	}
	e.mu.Lock()
	e.loadStateLocked()
	live := e.live
	e.mu.Unlock()
	if live != nil {
		return live.Mode != plan.ModeOff
	}
	s, _ := plan.ResolveSettings(&platform.Snapshot{Config: *cfg})
	return s.Mode != plan.ModeOff
}

// state reads the machine's inputs and resolves the effective settings.
// While a config file does not parse, the last good config stands in for
// it (its errors stay listed in Config.Errors).
func (e *Engine) state(ctx context.Context) (*platform.Snapshot, plan.Settings, error) {
	snap, err := e.inputs(ctx)
	if err != nil {
		return nil, plan.Settings{}, err
	}
	return e.settle(snap)
}

// settle resolves the effective settings of snap (see state).
func (e *Engine) settle(snap *platform.Snapshot) (*platform.Snapshot, plan.Settings, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(snap.Config.Errors) == 0 {
		cfg := snap.Config
		e.lastGood = &cfg
	} else if e.lastGood != nil {
		errs := snap.Config.Errors
		snap.Config = *e.lastGood
		snap.Config.Errors = errs
	}
	e.loadStateLocked()
	if e.live != nil {
		return snap, *e.live, nil
	}
	// ResolveSettings always returns usable settings; invalid values it
	// replaced by defaults (a *SettingsError) reach the user as a plan hint.
	s, err := plan.ResolveSettings(snap)
	if err != nil && !plan.IsSettingsError(err) {
		return nil, plan.Settings{}, outline.Errorf("settings: %w", err)
	}
	return snap, s, nil
}

// viewState returns the machine, settings and plan for a read-only view,
// from the cache when WithViewCache allows.
func (e *Engine) viewState(ctx context.Context) (*viewState, error) {
	if e.viewTTL > 0 {
		e.mu.Lock()
		v := e.view
		e.mu.Unlock()
		if v != nil && time.Since(v.at) < e.viewTTL {
			return v, nil
		}
	}
	gen := e.viewGen()
	at := time.Now()
	snap, s, err := e.state(ctx)
	if err != nil {
		return nil, err
	}
	p, err := e.plan(snap, s)
	if err != nil {
		return nil, err
	}
	v := &viewState{at: at, snap: snap, set: s, plan: p}
	if e.viewTTL > 0 {
		e.mu.Lock()
		// An apply that finished meanwhile made this read stale.
		if e.gen == gen {
			e.view = v
		}
		e.mu.Unlock()
	}
	return v, nil
}

func (e *Engine) viewGen() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gen
}

// dropView forgets the cached view; callers hold e.mu.
func (e *Engine) dropView() {
	e.view = nil
	e.gen++
}

func (e *Engine) plan(snap *platform.Snapshot, s plan.Settings) (*plan.Plan, error) {
	flows := s.Flows
	p, err := plan.NewPlan(snap, plan.PlanRequest{Mode: s.Mode, Flows: &flows})
	if err != nil {
		return nil, outline.Errorf("plan %s: %w", s.Mode, err)
	}
	if s.Mode == plan.ModeAdaptive {
		p = e.adaptive.Lay(snap, p)
	}
	switch s.Mode {
	case plan.ModeOff, plan.ModeLegacy, plan.ModeAll:
		return unpinAutoOnlyThreads(snap, p, flows)
	}
	return p, nil
}

// unpinAutoOnlyThreads adds to a stock mode's plan p (off, legacy, all) an
// action for every NAPI thread that auto places, p leaves alone and that is
// not on all online CPUs: back to all of them, where the kernel starts it
// (ReleaseActions' value). The stock modes place only the threads the stock
// script recognises (rx threads: virtio_net's tx threads, all named
// napi/<dev>-0, are not among them), while auto pins those too; without
// this a thread auto had pinned stayed there after a switch to a stock
// mode until the next reboot put it on every CPU, so the knobs of one
// setting depended on the modes before it (found by make test-openwrt's
// reboot pair: installed in auto, set_mode all, reboot: the tx threads went
// from CPUs 0, 1, 2, 3 to 0-3 with the same settings). Threads already on
// every CPU get no action, so a stock mode's plan on a machine auto never
// touched is the stock script's.
func unpinAutoOnlyThreads(snap *platform.Snapshot, p *plan.Plan, flows int) (*plan.Plan, error) {
	auto, err := plan.NewPlan(snap, plan.PlanRequest{Mode: plan.ModeAuto, Flows: &flows})
	if err != nil {
		return nil, outline.Errorf("plan auto (threads it pins): %w", err)
	}
	planned := map[string]bool{}
	for _, a := range p.Actions {
		if a.Kind == plan.KindNAPIAffinity {
			planned[a.Target()] = true
		}
	}
	var extra []plan.Action
	for _, a := range ReleaseActions(snap, auto, "") {
		if a.Kind != plan.KindNAPIAffinity || planned[a.Target()] || a.Current == "" || plan.SameValue(a.Kind, a.Current, a.Value) {
			continue
		}
		extra = append(extra, a)
	}
	if len(extra) == 0 {
		return p, nil
	}
	q := *p
	q.Actions = append(append([]plan.Action(nil), p.Actions...), extra...)
	return &q, nil
}

// Plan reads the machine and plans it. Zero fields of req mean "as
// configured" (including a live set_mode override).
func (e *Engine) Plan(ctx context.Context, req plan.PlanRequest) (*platform.Snapshot, *plan.Plan, error) {
	// The snapshot goes to the caller: read all of it.
	full, err := e.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	snap, s, err := e.settle(full)
	if err != nil {
		return nil, nil, err
	}
	if req.Mode != "" {
		m, err := plan.ParseMode(string(req.Mode))
		if err != nil {
			return nil, nil, err
		}
		s.Mode = m
	}
	if req.Flows != nil {
		if err := plan.CheckFlows(*req.Flows); err != nil {
			return nil, nil, err
		}
		s.Flows = *req.Flows
	}
	p, err := e.plan(snap, s)
	if err != nil {
		return nil, nil, err
	}
	return snap, p, nil
}

// lock takes the in-process semaphore and the file locks; the returned
// function releases both.
func (e *Engine) lock(ctx context.Context) (func(), error) {
	// The lock directory is created when missing, but never the root: a
	// mistyped --root must not become a new tree.
	if fi, err := os.Stat(e.root); err != nil {
		return nil, outline.Errorf("root: %w", err)
	} else if !fi.IsDir() {
		return nil, outline.Errorf("root %s: not a directory", e.root)
	}
	if e.lockWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.lockWait)
		defer cancel()
	}
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	fl, err := acquireFileLock(ctx, e.lockDir, LockFile, StockLockFile)
	if err != nil {
		<-e.sem
		return nil, err
	}
	return func() { fl.release(); <-e.sem }, nil
}

// Apply makes the machine match the configured plan. An unknown device is
// ErrInvalid; with DryRun nothing is written (and no lock file is taken).
func (e *Engine) Apply(ctx context.Context, req ApplyRequest) (*Result, error) {
	if req.Device != "" && !plan.ValidDeviceName(req.Device) {
		return nil, outline.Errorf("device %q: %w", req.Device, plan.ErrInvalid)
	}
	if req.Device != "" {
		// Refuse an unknown device before taking the lock, so that a
		// mistyped name leaves no trace (not even a lock file): its
		// sys/class/net entry is enough here (the name is checked above);
		// the snapshot read under the lock checks it again.
		if _, err := os.Lstat(outline.JoinPath(e.root, "sys", "class", "net", req.Device)); err != nil {
			return nil, outline.Errorf("no device %q: %w", req.Device, plan.ErrInvalid)
		}
	}
	if req.DryRun {
		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		defer func() { <-e.sem }()
	} else {
		unlock, err := e.lock(ctx)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	return e.applyLocked(ctx, req, nil, plan.Settings{})
}

// applyLocked plans and applies; the caller holds the lock. With snap nil
// it reads the machine and the settings; otherwise it plans snap with eff.
func (e *Engine) applyLocked(ctx context.Context, req ApplyRequest, snap *platform.Snapshot, eff plan.Settings) (*Result, error) {
	start := time.Now()
	snap, p, actions, err := e.planApply(ctx, req, snap, eff)
	if err != nil {
		return nil, err
	}
	reason := req.Reason
	if reason == "" {
		reason = "manual"
	}
	var before func()
	found := false
	if !req.DryRun {
		before, found = e.beginApply(reason)
	}
	// The snapshot was read under the lock this apply holds: the plan's
	// current values are the live ones, so knobs are not read again.
	res := applyPlan(ctx, e.writer, snap, actions, req.DryRun, true, before)
	if !req.DryRun && threadsChanged(res) {
		// A NAPI that went into (or out of) its own thread has a new
		// kthread the plan could not place: plan and apply once more
		// from a fresh read.
		if snap2, _, acts2, err := e.planApply(ctx, req, nil, eff); err == nil {
			snap = snap2
			mergeResult(res, applyPlan(ctx, e.writer, snap2, acts2, false, true, before))
		}
	}
	res.Mode = p.Mode
	if !req.DryRun && len(res.Refused) > 0 {
		// Advisory, like the state file: the next plan leaves them alone.
		_ = RecordRefusedIRQs(e.root, res.Refused)
	}
	if !req.DryRun {
		// The adaptive state follows the mode: kept (and the loop's
		// options resolved) in adaptive, forgotten in any other.
		e.adaptive.Applied(snap, p.Mode)
	}
	res.DurationUS = time.Since(start).Microseconds()
	if !req.DryRun {
		e.endApply(len(res.Changed)+len(res.Failed)+len(res.Skipped) > 0, found)
		e.mu.Lock()
		e.seq++
		res.Seq = e.seq
		e.dropView()
		e.lastApply = &ApplyRecord{
			Time:       e.now(),
			Reason:     reason,
			Changed:    len(res.Changed),
			Failed:     len(res.Failed),
			DurationUS: res.DurationUS,
		}
		if e.stateFile != "" {
			// Another process may have counted since this one read.
			e.loadTotalsLocked()
		}
		e.totals.add(res)
		// Advisory: an apply that worked is not failed for its record.
		_ = e.saveStateLocked()
		e.mu.Unlock()
	}
	return res, nil
}

// planApply is the decision of an apply: the snapshot it reads (with snap
// nil: the machine, for req.Device only what that device's decision needs),
// its plan, and the actions it writes (for req.Device, that device's).
func (e *Engine) planApply(ctx context.Context, req ApplyRequest, snap *platform.Snapshot, eff plan.Settings) (*platform.Snapshot, *plan.Plan, []plan.Action, error) {
	if snap == nil {
		var s *platform.Snapshot
		var err error
		if req.Device != "" && e.devices != nil {
			// Only what the device's decision needs.
			s, err = e.devices.ReadDevice(ctx, e.root, platform.DeviceScope{Device: req.Device, Others: e.othersMatter})
		} else {
			s, err = e.readDecision(ctx, e.root)
		}
		if err != nil {
			return nil, nil, nil, outline.Errorf("read %s: %w", e.root, err)
		}
		if snap, eff, err = e.settle(s); err != nil {
			return nil, nil, nil, err
		}
	}
	if req.Device != "" && snap.Device(req.Device) == nil {
		return nil, nil, nil, outline.Errorf("no device %q: %w", req.Device, plan.ErrInvalid)
	}
	p, err := e.plan(snap, eff)
	if err != nil {
		return nil, nil, nil, err
	}
	actions := p.Actions
	if req.Device != "" {
		actions = nil
		pair := plan.PairQueues(snap)
		for _, a := range p.Actions {
			if pair.ActionDevice(a) == req.Device {
				actions = append(actions, a)
			}
		}
	}
	return snap, p, actions, nil
}

// SetMode changes the mode (and flows), optionally persisting it, and
// applies. Flows nil keeps the current flows. An invalid mode or flows is
// ErrInvalid with nothing written; a config write that fails leaves the live
// state as it was and applies nothing.
func (e *Engine) SetMode(ctx context.Context, req SetModeRequest) (*Result, error) {
	m, err := plan.ParseMode(string(req.Mode))
	if err != nil {
		return nil, err
	}
	if req.Flows != nil {
		if err := plan.CheckFlows(*req.Flows); err != nil {
			return nil, err
		}
	}
	unlock, err := e.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()

	// One read of the machine serves both the current flows and the plan:
	// persisting changes only globals.mode and flows, which want carries.
	snap, cur, err := e.state(ctx)
	if err != nil {
		return nil, err
	}
	want := plan.Settings{Mode: m, Flows: cur.Flows, Source: plan.SourceLive}
	if req.Flows != nil {
		want.Flows = *req.Flows
	}
	if req.Persist {
		if err := persistSettings(e.configDir, want.Mode, want.Flows); err != nil {
			return nil, err
		}
		noteNetworkWritten(e.root, want.Mode, want.Flows)
		want.Source = plan.SourcePacketSteering
		e.mu.Lock()
		e.live = nil
		e.dropView()
		e.mu.Unlock()
	} else {
		e.mu.Lock()
		live := want
		e.live = &live
		e.dropView()
		e.mu.Unlock()
	}
	// A mode change starts from the plain plan: adaptive from auto.
	e.adaptive.Forget()
	reason := req.Reason
	if reason == "" {
		reason = "set_mode " + string(m)
	}
	res, err := e.applyLocked(ctx, ApplyRequest{Reason: reason}, snap, want)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// add counts one apply's result.
func (t *Totals) add(res *Result) {
	t.Applies++
	t.Changed += uint64(len(res.Changed))
	t.Failed += uint64(len(res.Failed))
	t.IRQsRefused += uint64(len(res.Refused))
	t.Rollbacks += uint64(res.RolledBack)
}

// threadsChanged reports whether an apply changed a NAPI's own threaded
// mode (which starts or stops its kthread).
func threadsChanged(res *Result) bool {
	for _, a := range res.Changed {
		if a.Kind == plan.KindNAPIThreaded {
			return true
		}
	}
	return false
}

// mergeResult adds the writes of a second pass to res.
func mergeResult(res, more *Result) {
	res.Changed = append(res.Changed, more.Changed...)
	res.Failed = append(res.Failed, more.Failed...)
	res.Skipped = append(res.Skipped, more.Skipped...)
	res.Refused = append(res.Refused, more.Refused...)
	res.RolledBack += more.RolledBack
	res.Devices = append(res.Devices, more.Devices...)
	outline.SortStrings(res.Devices)
	res.Devices = slices.Compact(res.Devices)
}
