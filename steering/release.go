package steering

import (
	"context"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// defaultIRQAffinityPath is the affinity the kernel gives a new IRQ
// (kernel/irq/proc.c, default_smp_affinity).
const defaultIRQAffinityPath = "proc/irq/default_smp_affinity"

// ReleaseActions returns, for the knobs of plan p that only packet-steering
// manages (the stock rule never writes them), actions that set them back to
// the kernel's defaults, so that handing steering back to the stock service
// leaves the machine as the stock rule alone would: xps_cpus 0 (no XPS),
// every pinned IRQ to irqDefault (the kernel's default_smp_affinity; all
// online CPUs when "") and net.core.rps_sock_flow_entries 0. NAPI threads
// go back to all online CPUs, as the kernel starts them; the stock service
// places the ones its rule manages again when it starts. RPS masks and flow
// counts are left to the stock service, which writes them all.
func ReleaseActions(s *platform.Snapshot, p *plan.Plan, irqDefault string) []plan.Action {
	all := plan.OnlineCPUs(s)
	irqValue := strings.TrimSpace(irqDefault)
	if _, err := cpuset.ParseMask(irqValue); irqValue == "" || err != nil {
		irqValue = all.Mask()
	}
	var out []plan.Action
	for _, a := range p.Actions {
		switch a.Kind {
		case plan.KindXPSCPUs:
			a.Value = "0"
		case plan.KindIRQAffinity:
			a.Value = irqValue
		case plan.KindNAPIAffinity:
			a.Value = all.List()
		case plan.KindSysctl:
			if a.Key != plan.SysctlRPSSockFlowEntries {
				continue
			}
			a.Value = "0"
		default:
			continue
		}
		out = append(out, a)
	}
	return out
}

// Release sets the knobs only packet-steering manages back to the kernel's
// defaults (ReleaseActions), under the apply lock; the package runs it
// before it hands steering back to netifd's service.
func (e *Engine) Release(ctx context.Context, dryRun bool) (*Result, error) {
	start := time.Now()
	unlock, err := e.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	snap, eff, err := e.state(ctx)
	if err != nil {
		return nil, err
	}
	// The knobs of every mode the user may have had in force: the
	// configured one and auto (the default), which pins the most.
	def, _ := e.writer.ReadKnob(defaultIRQAffinityPath)
	seen := map[string]bool{}
	var actions []plan.Action
	for _, m := range []plan.Mode{eff.Mode, plan.ModeAuto, plan.ModeCustom} {
		p, err := plan.NewPlan(snap, plan.PlanRequest{Mode: m, Flows: &eff.Flows})
		if err != nil {
			return nil, err
		}
		rel := ReleaseActions(snap, p, def)
		rel = append(rel, releaseNAPIActions(e.writer, snap, p)...)
		for _, a := range rel {
			if k := string(a.Kind) + " " + a.Target(); !seen[k] {
				seen[k] = true
				actions = append(actions, a)
			}
		}
	}
	// An RFS table sized for flows set earlier (steering_flows, then
	// back to 0) is in no plan of the settings now; it was packet-steering's
	// all the same, and goes back to 0 too (found on OpenWrt 23.05: after
	// flows 128 and then 0, removal left rps_sock_flow_entries at 512).
	if k := string(plan.KindSysctl) + " " + plan.SysctlRPSSockFlowEntries; !seen[k] && snap.RPSSockFlowEntries > 0 {
		actions = append(actions, plan.Action{
			Kind: plan.KindSysctl, Key: plan.SysctlRPSSockFlowEntries, Value: "0",
			Current: outline.Itoa(snap.RPSSockFlowEntries),
		})
	}
	res := ApplyPlan(ctx, e.writer, snap, actions, dryRun)
	res.DurationUS = time.Since(start).Microseconds()
	e.mu.Lock()
	e.dropView()
	e.mu.Unlock()
	return res, nil
}

// napiDefaultFiles are the netdev's sysfs files that hold the value a NAPI
// instance of the device starts with, per per-NAPI knob (net/core/net-sysfs.c:
// writing one sets every NAPI of the device; a new NAPI takes it).
var napiDefaultFiles = map[plan.ActionKind]string{
	plan.KindNAPIDeferHardIRQs:   "napi_defer_hard_irqs",
	plan.KindNAPIGROFlushTimeout: "gro_flush_timeout",
	plan.KindNAPIThreaded:        "threaded",
}

// releaseNAPIActions returns, for the per-NAPI knobs of plan p, actions
// that set each NAPI instance back to the kernel's default for its device:
// the value of the device's own sysfs file (napi_defer_hard_irqs,
// gro_flush_timeout, threaded), which every NAPI of the device holds until
// one is set alone; 0 where the file cannot be read (the kernel's
// defaults; threaded: the snapshot's threaded flag).
func releaseNAPIActions(w Writer, s *platform.Snapshot, p *plan.Plan) []plan.Action {
	var out []plan.Action
	defaults := map[string]string{}
	for _, a := range p.Actions {
		file, ok := napiDefaultFiles[a.Kind]
		if !ok || !plan.ValidDeviceName(a.Device) {
			continue
		}
		rel := "sys/class/net/" + a.Device + "/" + file
		v, seen := defaults[rel]
		if !seen {
			v, _ = w.ReadKnob(rel)
			if norm, err := plan.ParseNAPIKnob(a.Kind, v); err == nil {
				v = norm
			} else {
				v = "0"
				if d := s.Device(a.Device); a.Kind == plan.KindNAPIThreaded && d != nil && d.Threaded {
					v = "1"
				}
			}
			defaults[rel] = v
		}
		a.Value = v
		out = append(out, a)
	}
	return out
}
