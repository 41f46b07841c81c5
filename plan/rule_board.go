package plan

import (
	"sort"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// The board rules of auto (docs/platforms.md "Boards"): after the generic
// rule (no profile, rss-per-cpu) or a ChoiceBoard profile has placed the
// devices, these passes change what the public reports of today's routers
// show to be wrong, each with its evidence in the plan:
//
//  1. big and little cores (rule_capacity.go): the stock run's CPUs start
//     loaded by how little they are, and IRQs of devices without NAPI
//     threads go to big cores;
//  2. IRQs that cannot move or that the plan leaves alone
//     (rule_irqfixed.go): RPS is planned away from where they really run;
//  3. mt76 phys (rule_mt76.go): rx NAPI threads spread by the work they
//     carry, the tx worker and tx NAPI off the busiest one's CPU;
//  4. ppp devices (rule_ppp.go): RPS on their rx-0, away from the CPUs
//     the carrier's receive work runs on;
//  5. skewed RSS (rule_irqfixed.go): a queue that carries most of its
//     device's traffic is spread, or a hint says why not.
//
// Every pass reads the snapshot and the builder's actions only: pure.

// Hint IDs of the board rules.
const (
	// HintIRQFixed: an IRQ the kernel refused to move; it is planned around.
	HintIRQFixed = "irq-fixed"
	// HintRSSSkew: one rx queue carries most of a device's traffic.
	HintRSSSkew = "rss-skew"
	// HintTune: the profile's evidence is thin; measure with tune.
	HintTune = "tune"
)

// ChoiceBoard is auto's generic rule (rss-per-cpu, no funnelling, the
// stock rule) followed by the board rules; the choice of the profiles of
// today's boards.
const ChoiceBoard Choice = "board"

// Load weights of the board rules' CPU picture, the stock script's where
// it has one (legacy.go): a pinned NAPI thread 1.0, an RPS target 0.75.
const (
	loadThread = napiWeight
	loadRPS    = rxWeight
	loadIRQ    = 0.5
	// capacityBias is the load a core of capacity 0 would start with: a
	// core of 40% capacity starts at 1.8, so big cores take about two
	// picks each before a little one takes its first.
	capacityBias = 3.0
)

// cpuPicture is the planned load of each online CPU and its relative
// capacity (1.0 for the biggest core, 1.0 for all when unknown).
type cpuPicture struct {
	ids  []int
	load map[int]float64
	cap  map[int]float64
	big  cpuset.Set // the biggest cores (all CPUs on equal machines)
	all  cpuset.Set
}

// littleBelow is the relative capacity below which a core is little.
const littleBelow = 0.8

// capacities returns the online CPUs' relative capacity and whether they
// differ (big.LITTLE: some core below littleBelow of the biggest). cpu_capacity decides; without it cpuinfo_max_freq
// does; without either every CPU is 1.0.
func capacities(s *platform.Snapshot) (map[int]float64, bool) {
	on := onlineCPUs(s)
	byID := map[int]platform.CPU{}
	for _, c := range s.CPUs {
		byID[c.ID] = c
	}
	out := map[int]float64{}
	for _, field := range []func(platform.CPU) int{
		func(c platform.CPU) int { return c.Capacity },
		func(c platform.CPU) int { return c.MaxFreqKHz },
	} {
		top, known := 0, true
		for _, c := range on {
			v := field(byID[c.id])
			if v <= 0 {
				known = false
				break
			}
			top = max(top, v)
		}
		if !known || top == 0 {
			continue
		}
		differ := false
		for _, c := range on {
			out[c.id] = float64(field(byID[c.id])) / float64(top)
			differ = differ || out[c.id] < littleBelow
		}
		if !differ {
			// Cores within a fifth of each other (x86 favoured cores'
			// max_freq, cpufreq variation) count as equal.
			for _, c := range on {
				out[c.id] = 1
			}
		}
		return out, differ
	}
	for _, c := range on {
		out[c.id] = 1
	}
	return out, false
}

// newPicture builds the load picture of the plan so far, leaving out the
// actions skip names (nil: none).
func newPicture(b *builder, s *platform.Snapshot, skip func(a Action) bool) *cpuPicture {
	caps, _ := capacities(s)
	p := &cpuPicture{load: map[int]float64{}, cap: caps}
	for _, c := range onlineCPUs(s) {
		p.ids = append(p.ids, c.id)
		p.all = p.all.Add(c.id)
		if caps[c.id] >= littleBelow {
			p.big = p.big.Add(c.id)
		}
	}
	for _, a := range b.acts {
		if skip != nil && skip(a) {
			continue
		}
		var set cpuset.Set
		var err error
		w := 0.0
		switch a.Kind {
		case KindNAPIAffinity:
			set, err = cpuset.ParseList(a.Value)
			w = loadThread
		case KindRPSCPUs:
			set, err = cpuset.ParseMask(a.Value)
			w = loadRPS
		case KindIRQAffinity:
			set, err = cpuset.ParseMask(a.Value)
			w = loadIRQ
		default:
			continue
		}
		if err != nil || set.IsEmpty() || set.Len() == len(p.ids) {
			continue // unplaced work is nobody's load
		}
		for _, c := range set.CPUs() {
			p.load[c] += w / float64(set.Len())
		}
	}
	return p
}

// pick returns the CPU where work of weight w finishes soonest, (load+w)
// over capacity, outside exclude; ties go to the bigger, then the lower
// numbered CPU. -1 when every CPU is excluded.
func (p *cpuPicture) pick(w float64, exclude cpuset.Set) int {
	best, bestCost := -1, 0.0
	for _, c := range p.ids {
		if exclude.Has(c) {
			continue
		}
		cost := (p.load[c] + w) / p.capOf(c)
		if best < 0 || cost < bestCost-1e-9 || (cost < bestCost+1e-9 && p.capOf(c) > p.capOf(best)) {
			best, bestCost = c, cost
		}
	}
	return best
}

func (p *cpuPicture) capOf(c int) float64 {
	if v := p.cap[c]; v > 0 {
		return v
	}
	return 1
}

func (p *cpuPicture) add(c int, w float64) { p.load[c] += w }

// planned returns the planned value of a knob, if the plan has one.
func (b *builder) planned(k actionKey) (Action, bool) {
	a, ok := b.acts[k]
	return a, ok
}

// plannedRPS returns the single CPU a planned RPS mask of d's queue names,
// or -1 (no action, an empty or a wider mask).
func (b *builder) plannedRPS(dev, queue string) int {
	a, ok := b.planned(actionKey{kind: KindRPSCPUs, device: dev, queue: queue})
	if !ok {
		return -1
	}
	set, err := cpuset.ParseMask(a.Value)
	if err != nil || set.Len() != 1 {
		return -1
	}
	return set.CPUs()[0]
}

// plannedCPUs is the CPU set of a planned thread or IRQ action; empty
// when the plan leaves it alone.
func (b *builder) plannedCPUs(k actionKey) cpuset.Set {
	a, ok := b.planned(k)
	if !ok {
		return cpuset.Set{}
	}
	var set cpuset.Set
	var err error
	if k.kind == KindNAPIAffinity {
		set, err = cpuset.ParseList(a.Value)
	} else {
		set, err = cpuset.ParseMask(a.Value)
	}
	if err != nil {
		return cpuset.Set{}
	}
	return set
}

// irqRunsOn is where an IRQ's work runs: the plan's placement, else the
// kernel's effective_affinity_list, else the CPUs whose count is at least
// a tenth of the largest (an empty effective list, as RP1 shows), else
// the smp_affinity mask.
func (b *builder) irqRunsOn(q *platform.IRQ) cpuset.Set {
	if q.Refused == "" {
		if set := b.plannedCPUs(actionKey{kind: KindIRQAffinity, irq: q.Number}); !set.IsEmpty() {
			return set
		}
	}
	if set, err := cpuset.ParseList(q.Effective); err == nil && !set.IsEmpty() {
		return set
	}
	var top uint64
	for _, n := range q.Counts {
		top = max(top, n)
	}
	if top > 0 {
		// Counts are per column of /proc/interrupts: the online CPUs in
		// number order.
		cols := onlineCPUs(b.snap)
		var set cpuset.Set
		for i, n := range q.Counts {
			if n*10 >= top && i < len(cols) {
				set = set.Add(cols[i].id)
			}
		}
		return set
	}
	set, _ := cpuset.ParseMask(q.SMPAffinity)
	return set
}

// boardRules runs the board rules over the plan so far; it returns their
// evidence (what they changed and why, "" when nothing) and hints.
func boardRules(b *builder, s *platform.Snapshot, flows int) (string, []Hint) {
	if len(onlineCPUs(s)) < 2 {
		return "", nil
	}
	var ev []string
	var hints []Hint
	for _, rule := range []func(*builder, *platform.Snapshot, int) (string, []Hint){
		capacityIRQs, planAroundIRQs, spreadMT76, spreadSkewed, steerPPP,
	} {
		e, h := rule(b, s, flows)
		if e != "" {
			ev = append(ev, e)
		}
		hints = append(hints, h...)
	}
	return strings.Join(ev, " "), hints
}

// cpuWord names a CPU set for evidence texts: "CPU2", "CPUs 1-3".
func cpuWord(set cpuset.Set) string {
	if set.Len() == 1 {
		return "CPU" + outline.Itoa(set.CPUs()[0])
	}
	return "CPUs " + set.List()
}

// sortedDevices returns the snapshot's devices in name order, as
// pointers into it.
func sortedDevices(s *platform.Snapshot) []*platform.Device {
	out := make([]*platform.Device, 0, len(s.Devices))
	for i := range s.Devices {
		out = append(out, &s.Devices[i])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// joinEvidence appends the board rules' evidence to a policy's.
func joinEvidence(ev, more string) string {
	if more == "" {
		return ev
	}
	if ev == "" {
		return more
	}
	return ev + " " + more
}
