package tune

import (
	"context"
	"strings"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/steering"
)

// machine is the real Steerer: it plans candidates with steering.NewPlan
// and writes them with steering.ApplyPlan, on the machine below one root.
// It is not safe for concurrent use.
type machine struct {
	// Snapshot reads the machine (steering.Engine.Snapshot, which honours
	// the engine's config dir).
	Snapshot func(ctx context.Context) (*platform.Snapshot, error)
	// Writer is the applier's access to the knobs (steering.NewFSWriter).
	Writer steering.Writer

	// Adaptive, when set, measures the adaptive candidate: an engine of
	// its own (with a private lock directory, as the sweep holds the
	// apply locks) is put in adaptive mode, live only, and its loop runs
	// with AdaptiveConfig (zero: the config adaptive section of UCI, as
	// the daemon would) until the next candidate or the restore.
	Adaptive       *steering.Engine
	AdaptiveConfig adaptive.Config

	snap     *platform.Snapshot
	plans    map[string]*plan.Plan
	restore  []plan.Action
	stopLoop func() int
	// Moves counts the adaptive loop's moves per adaptive candidate.
	Moves map[string]int
}

// newMachine returns the Steerer for a steering engine's machine.
func newMachine(e *steering.Engine, w steering.Writer) *machine {
	return &machine{Snapshot: e.Snapshot, Writer: w}
}

// knobKey identifies a knob across plans.
//
//go:noinline
func knobKey(a plan.Action) string { return string(a.Kind) + " " + a.Target() }

// planCandidate plans candidate c on snapshot s. A mode candidate is the
// mode's plan. A custom candidate is custom mode with the user's
// `config device` sections kept (so the same devices are managed) but
// their overrides dropped, plus one rps_cpus override per candidate
// device: auto with exactly the candidate's masks on top, which is what
// --save writes.
func planCandidate(s *platform.Snapshot, c candidate) (*plan.Plan, error) {
	if c.Mode != plan.ModeCustom {
		p, err := plan.NewPlan(s, plan.PlanRequest{Mode: c.Mode})
		if err != nil {
			return nil, outline.Errorf("plan %s: %w", c.Name, err)
		}
		return p, nil
	}
	cp := *s
	sc := platform.SteeringConfig{Mode: string(plan.ModeCustom)}
	if s.Config.Steering != nil {
		sc.Flows = s.Config.Steering.Flows
		for _, d := range s.Config.Steering.Devices {
			sc.Devices = append(sc.Devices, platform.DeviceOverride{Name: d.Name, Flows: d.Flows})
		}
	}
	for _, n := range c.NAPI {
		o := deviceOverride(&sc, n.Device)
		o.DeferHardIRQs, o.GROFlushTimeout = n.DeferHardIRQs, n.GROFlushTimeoutNS
	}
	for _, th := range c.Threads {
		deviceOverride(&sc, th.Device).NAPICPUs = th.Mask
	}
	for _, r := range c.RPS {
		if !hasDevice(s, r.Device) {
			return nil, outline.Errorf("candidate %s: no device %q here: %w", c.Name, r.Device, plan.ErrInvalid)
		}
		if _, err := cpuset.ParseMask(r.Mask); err != nil {
			return nil, outline.Errorf("candidate %s: %w", c.Name, err)
		}
		deviceOverride(&sc, r.Device).RPSCPUs = r.Mask
	}
	cp.Config.Steering = &sc
	p, err := plan.NewPlan(&cp, plan.PlanRequest{Mode: plan.ModeCustom})
	if err != nil {
		return nil, outline.Errorf("plan %s: %w", c.Name, err)
	}
	for _, r := range c.RPS {
		if !planSetsRPS(p, r.Device) {
			return nil, outline.Errorf("candidate %s: the plan sets no RPS mask on %s (no rx queues?): %w", c.Name, r.Device, plan.ErrInvalid)
		}
	}
	for _, n := range c.NAPI {
		if ok, why := planSetsNAPI(p, n.Device); !ok {
			return nil, outline.Errorf("candidate %s: %s: %w", c.Name, why, plan.ErrInvalid)
		}
	}
	for _, th := range c.Threads {
		if ok, why := planSetsThreads(s, p, th.Device, th.Mask); !ok {
			return nil, outline.Errorf("candidate %s: %s: %w", c.Name, why, plan.ErrInvalid)
		}
	}
	return p, nil
}

// deviceOverride is the `config device` section of name in sc (the
// first, when there are several: the candidate copies no other option),
// added when there is none.
func deviceOverride(sc *platform.SteeringConfig, name string) *platform.DeviceOverride {
	for i := range sc.Devices {
		if sc.Devices[i].Name == name {
			return &sc.Devices[i]
		}
	}
	sc.Devices = append(sc.Devices, platform.DeviceOverride{Name: name})
	return &sc.Devices[len(sc.Devices)-1]
}

func hasDevice(s *platform.Snapshot, name string) bool {
	for i := range s.Devices {
		if s.Devices[i].Name == name {
			return true
		}
	}
	return false
}

func planSetsRPS(p *plan.Plan, dev string) bool {
	for _, a := range p.Actions {
		if a.Kind == plan.KindRPSCPUs && a.Device == dev {
			return true
		}
	}
	return false
}

// Prepare implements Steerer: one snapshot, every candidate planned on it,
// and the restore plan: each knob any plan touches, with the value the
// snapshot holds (the plans' Current).
func (e *machine) Prepare(ctx context.Context, cands []candidate) (*prepared, error) {
	snap, err := e.Snapshot(ctx)
	if err != nil {
		return nil, outline.Errorf("read the machine: %w", err)
	}
	e.snap = snap
	e.plans = map[string]*plan.Plan{}
	e.restore = nil
	seen := map[string]bool{}
	devs := map[string]bool{}
	var unreadable []string
	for _, c := range cands {
		p, err := planCandidate(snap, c)
		if err != nil {
			return nil, err
		}
		e.plans[c.Name] = p
		for _, a := range p.Actions {
			if a.Kind == plan.KindRPSCPUs {
				devs[a.Device] = true
			}
			k := knobKey(a)
			if seen[k] {
				continue
			}
			seen[k] = true
			if a.Current == "" {
				unreadable = append(unreadable, a.Target())
				continue
			}
			r := a
			r.Value = a.Current
			e.restore = append(e.restore, r)
		}
	}
	padNAPIKnobs(e.plans) // napi.go
	if len(unreadable) > 0 {
		return nil, outline.Errorf("cannot capture the current value of %s, so it could not be restored; refusing to touch it",
			strings.Join(unreadable, ", "))
	}
	prep := &prepared{Devices: sortedKeys(devs), Knobs: len(e.restore)}
	first := map[string]string{}
	for _, c := range cands {
		prep.Masks = append(prep.Masks, rpsColumns(e.plans[c.Name], prep.Devices))
		sig := planSignature(e.plans[c.Name])
		if c.Mode == plan.ModeAdaptive {
			// Starts from auto's plan but moves while it runs: never the
			// same as a static candidate.
			sig = "adaptive " + sig
		}
		same, ok := first[sig]
		if !ok {
			first[sig] = c.Name
		}
		prep.SameAs = append(prep.SameAs, same)
	}
	return prep, nil
}

// planSignature is the plan's knobs and values in a canonical form, masks
// and cpu lists normalised, so equal signatures write the same state.
func planSignature(p *plan.Plan) string {
	lines := make([]string, 0, len(p.Actions))
	for _, a := range p.Actions {
		v := a.Value
		switch a.Kind {
		case plan.KindRPSCPUs, plan.KindXPSCPUs, plan.KindIRQAffinity:
			if set, err := cpuset.ParseMask(v); err == nil {
				v = set.List()
			}
		case plan.KindNAPIAffinity:
			if set, err := cpuset.ParseList(v); err == nil {
				v = set.List()
			}
		}
		lines = append(lines, knobKey(a)+"="+v)
	}
	outline.SortStrings(lines)
	return strings.Join(lines, "\n")
}

// rpsColumns returns the plan's RPS mask per device: one mask when every
// rx queue gets the same, masks joined by "/" otherwise, "-" when the plan
// leaves the device alone.
func rpsColumns(p *plan.Plan, devs []string) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		var masks []string
		same := true
		for _, a := range p.Actions {
			if a.Kind != plan.KindRPSCPUs || a.Device != d {
				continue
			}
			if len(masks) > 0 && !cpuset.SameMask(masks[0], a.Value) {
				same = false
			}
			masks = append(masks, a.Value)
		}
		switch {
		case len(masks) == 0:
			out[i] = "-"
		case same:
			out[i] = masks[0]
		default:
			out[i] = strings.Join(masks, "/")
		}
	}
	return out
}

// resultError turns an apply result's failures into an error.
func resultError(res *steering.Result) error {
	if len(res.Failed) == 0 {
		return nil
	}
	var errs []error
	for _, f := range res.Failed {
		errs = append(errs, outline.Errorf("%s %s: %s", f.Action.Kind, f.Action.Target(), f.Error))
	}
	return outline.JoinErrors(errs...)
}

// Apply implements Steerer. A failed write is rolled back per device by
// the applier and reported as an error.
func (e *machine) Apply(ctx context.Context, c candidate) error {
	e.endLoop()
	p := e.plans[c.Name]
	if p == nil || e.snap == nil {
		return outline.Errorf("candidate %s was not prepared", c.Name)
	}
	if c.Mode == plan.ModeAdaptive {
		return e.startAdaptive(ctx, c)
	}
	return resultError(steering.ApplyPlan(ctx, e.Writer, e.snap, p.Actions, false))
}

// startAdaptive applies the auto plan through the adaptive engine and
// starts its loop.
func (e *machine) startAdaptive(ctx context.Context, c candidate) error {
	if e.Adaptive == nil {
		return outline.Errorf("candidate %s: no engine for the adaptive loop", c.Name)
	}
	res, err := e.Adaptive.SetMode(ctx, steering.SetModeRequest{Mode: plan.ModeAdaptive, Reason: "tune " + c.Name})
	if err != nil {
		return err
	}
	if err := resultError(res); err != nil {
		return err
	}
	cfg := e.AdaptiveConfig
	if cfg == (adaptive.Config{}) {
		// As the daemon runs it: the config adaptive section of UCI,
		// which the set_mode above resolved (defaults without one).
		cfg = e.Adaptive.AdaptiveSettings().Config
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	moves := 0
	go func() {
		defer close(done)
		_ = e.Adaptive.RunAdaptive(lctx, cfg, func(ctx context.Context, m []adaptive.Move) (*steering.Result, error) {
			moves += len(m)
			return e.Adaptive.Adapt(ctx, m)
		})
	}()
	e.stopLoop = func() int {
		cancel()
		<-done
		if e.Moves == nil {
			e.Moves = map[string]int{}
		}
		e.Moves[c.Name] += moves
		return moves
	}
	return nil
}

// endLoop stops a running adaptive loop.
//
//go:noinline
func (e *machine) endLoop() {
	if e.stopLoop != nil {
		e.stopLoop()
		e.stopLoop = nil
	}
}

// Restore implements Steerer: it writes every captured knob back, each on
// its own (so that one knob that cannot be written does not hold back the
// others, as a per-device rollback would), and then checks, with a dry run
// against a fresh snapshot, that none differs.
func (e *machine) Restore(ctx context.Context) (restoreResult, error) {
	e.endLoop()
	if e.snap == nil {
		return restoreResult{}, nil
	}
	out := restoreResult{Knobs: len(e.restore)}
	var errs []error
	var skipped []string
	for _, a := range e.restore {
		res := steering.ApplyPlan(ctx, e.Writer, e.snap, []plan.Action{a}, false)
		out.Changed += len(res.Changed)
		if err := resultError(res); err != nil {
			errs = append(errs, err)
		}
		for _, s := range res.Skipped {
			skipped = append(skipped, s.Action.Target()+" ("+s.Reason+")")
		}
	}
	if len(errs) > 0 {
		return out, outline.JoinErrors(errs...)
	}
	fresh, err := e.Snapshot(ctx)
	if err != nil {
		return out, outline.Errorf("check: %w", err)
	}
	check := steering.ApplyPlan(ctx, e.Writer, fresh, e.restore, true)
	differ := skipped
	for _, a := range check.Changed {
		differ = append(differ, a.Target()+" is "+a.Current+", was "+a.Value)
	}
	for _, s := range check.Skipped {
		differ = append(differ, s.Action.Target()+" ("+s.Reason+")")
	}
	for _, f := range check.Failed {
		differ = append(differ, f.Action.Target()+" ("+f.Error+")")
	}
	if len(differ) > 0 {
		outline.SortStrings(differ)
		return out, outline.Errorf("not back at the original value: %s", strings.Join(differ, ", "))
	}
	out.Verified = true
	return out, nil
}

// layoutFor describes the machine for candidate generation: the online
// CPUs, the devices to vary (devs, or when empty every device that the
// given plans steer with a non-zero RPS mask) and, per device, the CPUs its
// NAPI threads and IRQs are pinned to now; an IRQ allowed on every CPU
// counts as pinned to the CPUs its /proc/interrupts counts show it ran on.
func layoutFor(s *platform.Snapshot, plans []*plan.Plan, devs []string) layout {
	l := layout{RxCPUs: map[string][]int{}}
	var all cpuset.Set
	for _, c := range s.CPUs {
		if c.Online {
			l.CPUs = append(l.CPUs, c.ID)
			all = all.Add(c.ID)
		}
	}
	if len(devs) == 0 {
		steered := map[string]bool{}
		for _, p := range plans {
			for _, a := range p.Actions {
				if a.Kind == plan.KindRPSCPUs && !cpuset.SameMask(a.Value, "0") {
					steered[a.Device] = true
				}
			}
		}
		devs = sortedKeys(steered)
	}
	l.Devices = devs
	for _, d := range devs {
		var pinned cpuset.Set
		for _, t := range s.NAPIThreads {
			if t.Device != d {
				continue
			}
			if set, err := cpuset.ParseList(t.CPUs); err == nil {
				pinned = pinned.Union(set)
			}
		}
		for _, irq := range s.IRQs {
			if irq.Device != d {
				continue
			}
			set := all
			if m, err := cpuset.ParseMask(irq.SMPAffinity); err == nil && irq.SMPAffinity != "" {
				set = m.Intersect(all)
			}
			if set.Equal(all) {
				// Allowed everywhere: where it actually ran is what counts
				// (the stock bcm53xx hook finds the IRQ's CPU the same way).
				var ran cpuset.Set
				for cpu, n := range irq.Counts {
					if n > 0 && all.Has(cpu) {
						ran = ran.Add(cpu)
					}
				}
				if !ran.IsEmpty() {
					set = ran
				}
			}
			pinned = pinned.Union(set)
		}
		if !pinned.IsEmpty() && !pinned.Equal(all) {
			l.RxCPUs[d] = pinned.CPUs()
		}
	}
	return l
}
