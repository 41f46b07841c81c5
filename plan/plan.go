// Package steering decides where the kernel's receive work runs (RPS and
// XPS masks, RFS flow counts, threaded-NAPI thread and per-queue IRQ
// affinity) and applies that decision.
//
// The planning half (NewPlan, the modes, the profile table, masks) is pure:
// it reads only the platform.Snapshot it is given, never the machine, never
// the clock, so a snapshot fully determines its  It must never write a
// kernel knob, change an affinity or fail because the machine looks odd: an
// unexpected machine gets the stock rule and a hint, not an error.
package plan

import (
	"sort"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// SysctlRPSSockFlowEntries is the sysctl key of the global RFS table size.
const SysctlRPSSockFlowEntries = "net.core.rps_sock_flow_entries"

// maxSockFlowEntries is the kernel's limit for rps_sock_flow_entries
// (rps_sock_flow_sysctl in net/core/sysctl_net_core.c refuses more than
// 1<<29).
const maxSockFlowEntries = 1 << 29

// Policy names that are not profile names.
const (
	PolicyOff       = "off"
	PolicyLegacy    = "legacy"
	PolicyAll       = "all"
	PolicyRSSPerCPU = "rss-per-cpu"
)

// stockEvidence names the stock script a mode reproduces.
const stockScript = "openwrt/openwrt package/network/config/netifd/files/usr/libexec/network/packet-steering.uc"

// NewPlan plans the snapshot for a mode. It is pure: no I/O.
//
// req.Mode "" and req.Flows nil mean "as configured" (ResolveSettings). An
// unknown mode or flows outside 0..MaxFlows is an error wrapping ErrInvalid.
// Configuration values that are merely invalid (a typo in UCI) never fail
// the plan: they fall back to defaults and show up as hints.
//
// The plan lists every knob the mode manages with its desired Value and the
// snapshot's Current value, in a fixed order: per device (by name) its rx
// queues in number order (rps_cpus, rps_flow_cnt) then its tx queues
// (xps_cpus); then NAPI threads by PID; IRQs by number; then the sysctl.
//
// Flows: every managed rx queue gets rps_flow_cnt = flows (per-device
// overrides in custom mode). When the flow counts of the plan add up to
// more than 0, the plan also raises net.core.rps_sock_flow_entries to at
// least that sum rounded up to a power of two (the kernel rounds the value
// the same way; capped at the kernel's 1<<29), keeping a larger current
// value: RFS needs the global table, which the stock script never sets.
// With flows 0 the sysctl is not managed. Mode off manages flow count 0.
//
// Devices named in `config device` sections of /etc/config/packet_steering
// are managed in every mode that follows the stock rules (as if they were
// physical devices, even a veth or bridge the rules would skip); their
// per-device overrides apply only in custom mode. Without such sections
// legacy is exactly the stock script.
func NewPlan(s *platform.Snapshot, req PlanRequest) (*Plan, error) {
	if s == nil {
		return nil, outline.Errorf("%w: no snapshot to plan", ErrInvalid)
	}
	settings, serr := ResolveSettings(s)
	mode := settings.Mode
	if req.Mode != "" {
		m, err := ParseMode(string(req.Mode))
		if err != nil {
			return nil, err
		}
		mode = m
	}
	flows := settings.Flows
	if req.Flows != nil {
		if err := CheckFlows(*req.Flows); err != nil {
			return nil, err
		}
		flows = *req.Flows
	}
	if mode == ModeOff {
		flows = 0
	}

	b := newBuilder(s)
	p := &Plan{Mode: mode, Flows: flows}
	extra := configuredDevices(s)
	offload := Offload(s)
	var ctx planContext
	switch mode {
	case ModeOff, ModeLegacy, ModeAll:
		p.Policy, p.Evidence = runStockMode(b, s, mode, flows, extra)
	case ModeAuto, ModeCustom, ModeAdaptive:
		// adaptive plans as auto; the deviations of its control loop are
		// laid over the plan by the engine (AdaptPlan).
		ctx = planAuto(b, s, flows, extra, offload)
		p.Policy, p.Evidence = ctx.policy, ctx.evidence
		b.hints = append(b.hints, ctx.hints...)
		if mode == ModeCustom {
			applyOverrides(b, s, flows)
		}
	}
	dropRefusedIRQs(b, s) // rule_irqfixed.go
	addSockFlowSysctl(b, s)
	var ev string
	p.Writers, ev = handleWriters(b, s, mode)
	if ev != "" {
		p.Evidence = strings.TrimSpace(p.Evidence + " " + ev)
	}
	p.Actions = b.actions()
	p.Hints = planHints(s, p, b, serr, offload)
	return p, nil
}

// runStockMode plans off, legacy or all: the stock script's modes 0, 1, 2.
func runStockMode(b *builder, s *platform.Snapshot, mode Mode, flows int, extra map[string]bool) (policy, evidence string) {
	r := newStockRun(b, s, false)
	r.flows = flows
	switch mode {
	case ModeOff:
		r.disable = true
		policy = PolicyOff
		evidence = "stock packet-steering.uc mode 0: RPS 0 on every queue it manages, NAPI threads on all CPUs (" + stockScript + ")"
	case ModeAll:
		r.allCPUs = true
		policy = PolicyAll
		evidence = "stock packet-steering.uc mode 2: RPS to all CPUs (" + stockScript + ")"
	default:
		policy = PolicyLegacy
		evidence = "stock packet-steering.uc mode 1 (" + stockScript + ")"
	}
	r.run(collectStockDevices(s, extra))
	return policy, evidence
}

// newStockRun prepares a run over the snapshot's CPUs: every listed CPU
// with the script's all-CPUs mask (bits 0..count-1) for the stock modes,
// the online CPUs with their own numbers for auto.
func newStockRun(b *builder, s *platform.Snapshot, online bool) *stockRun {
	r := &stockRun{b: b}
	if online {
		r.cpus = onlineCPUs(s)
		for _, c := range r.cpus {
			r.allMask = r.allMask.Add(c.id)
		}
	} else {
		r.cpus = stockCPUs(s, false)
		if len(r.cpus) > 0 {
			r.allMask = cpuset.Range(0, len(r.cpus)-1)
		}
	}
	for _, c := range r.cpus {
		r.allList = r.allList.Add(c.id)
	}
	return r
}

// configuredDevices names the devices of `config device` sections.
func configuredDevices(s *platform.Snapshot) map[string]bool {
	out := map[string]bool{}
	if s.Config.Steering == nil {
		return out
	}
	for _, d := range s.Config.Steering.Devices {
		if d.Name != "" {
			out[d.Name] = true
		}
	}
	return out
}

// addSockFlowSysctl adds the rps_sock_flow_entries action when the plan's
// flow counts add up to more than 0.
func addSockFlowSysctl(b *builder, s *platform.Snapshot) {
	total := 0
	for k, a := range b.acts {
		if k.kind != KindRPSFlowCnt {
			continue
		}
		n, _ := strconv.Atoi(a.Value)
		total += n
		if total > maxSockFlowEntries {
			total = maxSockFlowEntries
		}
	}
	if total <= 0 {
		return
	}
	want := roundUpPow2(total)
	if want > maxSockFlowEntries {
		want = maxSockFlowEntries
	}
	current := ""
	if s.RPSSockFlowEntries >= 0 {
		current = outline.Itoa(s.RPSSockFlowEntries)
		if s.RPSSockFlowEntries > want {
			want = s.RPSSockFlowEntries
		}
	}
	b.put(actionKey{kind: KindSysctl, key: SysctlRPSSockFlowEntries}, Action{
		Kind: KindSysctl, Key: SysctlRPSSockFlowEntries, Value: outline.Itoa(want), Current: current,
	})
}

func roundUpPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// actionKey identifies one knob.
type actionKey struct {
	kind   ActionKind
	device string
	queue  string
	pid    int
	irq    int
	napi   int
	key    string
}

// builder collects the plan's actions; a later write to the same knob
// replaces the earlier one.
type builder struct {
	snap  *platform.Snapshot
	acts  map[actionKey]Action
	order map[actionKey]int // queue index for sorting
	hints []Hint
	// rxIdx maps a device's rx queue names to their index in RxQueues;
	// irqsByDev lists the IRQs tied to each device. Built on first use.
	rxIdx     map[*platform.Device]map[string]int
	irqsByDev map[string][]*platform.IRQ
	pair      *Pairing
}

// pairing returns the snapshot's queue pairing, made on first use.
//
//go:noinline
func (b *builder) pairing() *Pairing {
	if b.pair == nil {
		b.pair = PairQueues(b.snap)
	}
	return b.pair
}

func newBuilder(s *platform.Snapshot) *builder {
	return &builder{snap: s, acts: map[actionKey]Action{}, order: map[actionKey]int{}, rxIdx: map[*platform.Device]map[string]int{}}
}

// rxIndex returns d's rx queue name -> position map.
//
//go:noinline
func (b *builder) rxIndex(d *platform.Device) map[string]int {
	m, ok := b.rxIdx[d]
	if !ok {
		m = make(map[string]int, len(d.RxQueues))
		for i, q := range d.RxQueues {
			m[q.Name] = i
		}
		b.rxIdx[d] = m
	}
	return m
}

// deviceIRQs lists the IRQs the snapshot ties to the named netdev.
//
//go:noinline
func (b *builder) deviceIRQs(name string) []*platform.IRQ {
	if b.irqsByDev == nil {
		b.irqsByDev = map[string][]*platform.IRQ{}
		for i := range b.snap.IRQs {
			irq := &b.snap.IRQs[i]
			if irq.Device != "" {
				b.irqsByDev[irq.Device] = append(b.irqsByDev[irq.Device], irq)
			}
		}
	}
	return b.irqsByDev[name]
}

func (b *builder) put(k actionKey, a Action) { b.acts[k] = a }

func (b *builder) rps(d *platform.Device, q platform.RxQueue, set cpuset.Set) {
	k := actionKey{kind: KindRPSCPUs, device: d.Name, queue: q.Name}
	b.order[k] = q.Index
	b.put(k, Action{Kind: KindRPSCPUs, Device: d.Name, Queue: q.Name, Value: set.Mask(), Current: q.RPSCPUs})
}

func (b *builder) flowCnt(d *platform.Device, q platform.RxQueue, n int) {
	k := actionKey{kind: KindRPSFlowCnt, device: d.Name, queue: q.Name}
	b.order[k] = q.Index
	b.put(k, Action{Kind: KindRPSFlowCnt, Device: d.Name, Queue: q.Name, Value: outline.Itoa(n), Current: outline.Itoa(q.RPSFlowCnt)})
}

func (b *builder) hasFlowCnt(d *platform.Device, q platform.RxQueue) bool {
	_, ok := b.acts[actionKey{kind: KindRPSFlowCnt, device: d.Name, queue: q.Name}]
	return ok
}

func (b *builder) xps(d *platform.Device, q platform.TxQueue, set cpuset.Set) {
	k := actionKey{kind: KindXPSCPUs, device: d.Name, queue: q.Name}
	b.order[k] = q.Index
	b.put(k, Action{Kind: KindXPSCPUs, Device: d.Name, Queue: q.Name, Value: set.Mask(), Current: q.XPSCPUs})
}

func (b *builder) napi(t *platform.NAPIThread, set cpuset.Set) {
	b.put(actionKey{kind: KindNAPIAffinity, pid: t.PID}, Action{
		Kind: KindNAPIAffinity, PID: t.PID, Thread: t.Name, Value: set.List(), Current: t.CPUs,
	})
}

func (b *builder) irq(irq *platform.IRQ, set cpuset.Set) {
	b.put(actionKey{kind: KindIRQAffinity, irq: irq.Number}, Action{
		Kind: KindIRQAffinity, IRQ: irq.Number, Name: irq.Name, Value: set.Mask(), Current: irq.SMPAffinity,
	})
}

// kindRank orders the kinds: device knobs, threads, IRQs, per-NAPI
// knobs, sysctl.
//
//go:noinline
func kindRank(kind ActionKind) (group, within int) {
	switch kind {
	case KindRPSCPUs:
		return 0, 0
	case KindRPSFlowCnt:
		return 0, 1
	case KindXPSCPUs:
		return 0, 2
	case KindNAPIAffinity:
		return 1, 0
	case KindIRQAffinity:
		return 2, 0
	case KindNAPIDeferHardIRQs:
		return 3, 0
	case KindNAPIGROFlushTimeout:
		return 3, 1
	case KindNAPIThreaded:
		return 3, 2
	}
	return 4, 0
}

// actions returns the collected actions in the plan's order.
func (b *builder) actions() []Action {
	keys := make([]actionKey, 0, len(b.acts))
	for k := range b.acts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		x, y := keys[i], keys[j]
		gx, wx := kindRank(x.kind)
		gy, wy := kindRank(y.kind)
		if gx != gy {
			return gx < gy
		}
		switch gx {
		case 0:
			if x.device != y.device {
				return x.device < y.device
			}
			// rx queues before tx queues
			tx, ty := wx == 2, wy == 2
			if tx != ty {
				return !tx
			}
			if b.order[x] != b.order[y] {
				return b.order[x] < b.order[y]
			}
			if x.queue != y.queue {
				return x.queue < y.queue
			}
			return wx < wy
		case 1:
			return x.pid < y.pid
		case 2:
			return x.irq < y.irq
		case 3:
			if x.device != y.device {
				return x.device < y.device
			}
			if x.napi != y.napi {
				return x.napi < y.napi
			}
			return wx < wy
		}
		return x.key < y.key
	})
	out := make([]Action, len(keys))
	for i, k := range keys {
		out[i] = b.acts[k]
	}
	return out
}

// Holds reports whether the action's Current value already equals its Value,
// comparing masks and cpu lists as sets and counts as the kernel stores
// them (rounded up to a power of two), exactly as the applier compares.
func (a Action) Holds() bool {
	return SameValue(a.Kind, strings.TrimSpace(a.Current), strings.TrimSpace(a.Value))
}

// Target names the knob for people: "eth0/rx-0", "pid 300 napi/eth0-257",
// "irq 60 edma_rxdesc_0", "eth0 napi 8193 (rx-0)",
// "net.core.rps_sock_flow_entries".
func (a Action) Target() string {
	switch a.Kind {
	case KindRPSCPUs, KindRPSFlowCnt, KindXPSCPUs:
		return a.Device + "/" + a.Queue
	case KindNAPIAffinity:
		return "pid " + outline.Itoa(a.PID) + " " + a.Thread
	case KindIRQAffinity:
		return "irq " + outline.Itoa(a.IRQ) + " " + a.Name
	case KindNAPIDeferHardIRQs, KindNAPIGROFlushTimeout, KindNAPIThreaded:
		return napiTarget(a)
	}
	return a.Key
}
