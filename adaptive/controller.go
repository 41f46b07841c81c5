package adaptive

import (
	"fmt"
	"sort"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// The adaptive mode's decisions (see adaptive.go).

// Units lists the units of plan p (made for snap in auto or
// adaptive mode, before deviations), in plan order, with CPU = Home.
func Units(snap *platform.Snapshot, p *plan.Plan) []Unit {
	if snap == nil || p == nil {
		return nil
	}
	rps := map[string]plan.Action{}
	napi := map[int]plan.Action{}
	for _, a := range p.Actions {
		switch a.Kind {
		case plan.KindRPSCPUs:
			rps[a.Device+"/"+a.Queue] = a
		case plan.KindNAPIAffinity:
			napi[a.PID] = a
		}
	}
	pairs := plan.PairQueues(snap)
	var out []Unit
	for i := range snap.Devices {
		d := &snap.Devices[i]
		dp := pairs.Device(d.Name)
		for qi, q := range d.RxQueues {
			u := Unit{Device: d.Name, Queue: q.Name}
			if qi < len(dp.Rx) && dp.Rx[qi].Thread != nil {
				u.PID = dp.Rx[qi].Thread.PID
			}
			var rpsSet cpuset.Set
			if a, ok := rps[u.Key()]; ok {
				set, err := cpuset.ParseMask(a.Value)
				if err != nil {
					continue
				}
				rpsSet = set
			}
			switch {
			case rpsSet.Len() == 1:
				u.Kind, u.Home = UnitRPS, rpsSet.Max()
			case rpsSet.IsEmpty() && u.PID != 0:
				a, ok := napi[u.PID]
				if !ok {
					continue
				}
				set, err := cpuset.ParseList(a.Value)
				if err != nil || set.Len() != 1 {
					continue
				}
				u.Kind, u.Home = UnitNAPI, set.Max()
			default:
				continue
			}
			u.CPU = u.Home
			out = append(out, u)
		}
	}
	return out
}

// OnlineSet is the snapshot's online CPUs.
func OnlineSet(snap *platform.Snapshot) cpuset.Set {
	var s cpuset.Set
	for _, c := range snap.CPUs {
		if c.Online {
			s = s.Add(c.ID)
		}
	}
	return s
}

// AdaptPlan returns a copy of p (the adaptive mode's auto plan for snap)
// with the deviations laid over it, and the deviations that still apply.
// A deviation is dropped when its queue is no longer a unit of the same
// kind, its CPU is not online, or it equals the auto placement: a
// deviation can only ever name one online CPU, so every mask it produces
// is one the kernel accepts. A NAPI deviation moves the queue's IRQ along
// when the plan pins that IRQ to the thread's CPU.
func AdaptPlan(snap *platform.Snapshot, p *plan.Plan, devs []Deviation) (*plan.Plan, []Deviation) {
	out, kept, _ := layDeviations(snap, p, devs)
	return out, kept
}

// layDeviations is AdaptPlan, also returning the dropped deviations with
// the reason of each (Time left zero).
func layDeviations(snap *platform.Snapshot, p *plan.Plan, devs []Deviation) (*plan.Plan, []Deviation, []DroppedDev) {
	if len(devs) == 0 || p == nil || snap == nil {
		return p, nil, nil
	}
	pairs := plan.PairQueues(snap)
	units := map[string]Unit{}
	for _, u := range Units(snap, p) {
		units[u.Key()] = u
	}
	online := OnlineSet(snap)
	out := *p
	out.Actions = append([]plan.Action(nil), p.Actions...)
	var kept []Deviation
	var dropped []DroppedDev
	for _, d := range devs {
		u, ok := units[d.Key()]
		why := ""
		switch {
		case !ok && !hasRxQueue(snap, d.Device, d.Queue):
			why = "no rx queue " + d.Key() + " now"
		case !ok || u.Kind != d.Kind:
			why = "the auto plan no longer puts " + d.Key() + "'s " + d.Kind + " work on one CPU"
		case !online.Has(d.CPU):
			why = "cpu" + outline.Itoa(d.CPU) + " is not online"
		case d.CPU == u.Home:
			why = "cpu" + outline.Itoa(d.CPU) + " is its auto placement now"
		}
		if why != "" {
			dropped = append(dropped, DroppedDev{Deviation: d, Why: why})
			continue
		}
		d.Home = u.Home
		to := cpuset.Of(d.CPU)
		var irq int
		if u.Kind == UnitNAPI {
			if dev := snap.Device(u.Device); dev != nil {
				dp := pairs.Device(dev.Name)
				for qi, q := range dev.RxQueues {
					if q.Name == u.Queue && qi < len(dp.Rx) && dp.Rx[qi].IRQ != nil {
						irq = dp.Rx[qi].IRQ.Number
					}
				}
			}
		}
		for i := range out.Actions {
			a := &out.Actions[i]
			switch {
			case u.Kind == UnitRPS && a.Kind == plan.KindRPSCPUs && a.Device == u.Device && a.Queue == u.Queue:
				a.Value = to.Mask()
			case u.Kind == UnitNAPI && a.Kind == plan.KindNAPIAffinity && a.PID == u.PID:
				a.Value = to.List()
			case u.Kind == UnitNAPI && irq != 0 && a.Kind == plan.KindIRQAffinity && a.IRQ == irq:
				if set, err := cpuset.ParseMask(a.Value); err == nil && set.Equal(cpuset.Of(u.Home)) {
					a.Value = to.Mask()
				}
			}
		}
		kept = append(kept, d)
	}
	return &out, kept, dropped
}

// hasRxQueue reports whether snap has the device's rx queue.
func hasRxQueue(snap *platform.Snapshot, dev, queue string) bool {
	if d := snap.Device(dev); d != nil {
		for _, q := range d.RxQueues {
			if q.Name == queue {
				return true
			}
		}
	}
	return false
}

// Decision is what one Step decided.
type Decision struct {
	Moves []Move
	// Next is when to sample again; WantFull whether that sample must be
	// full (traffic flows, or deviations must be checked).
	Next     time.Duration
	WantFull bool
	// Active: the packet rate was at or above IdlePPS.
	Active bool
	PPS    float64
	// Loads and Units are set after a full interval.
	Loads []CPULoad
	Units []UnitLoad
}

// Controller decides moves from a series of samples. It holds the
// state the hysteresis needs (previous samples, hot and cool streaks, the
// last move of each unit) and is not safe for concurrent use.
type Controller struct {
	cfg       Config
	prev      *Sample // the last sample of any kind
	prevFull  *Sample // the last full sample
	next      time.Duration
	hot       map[int]int
	cool      map[string]int
	lastMove  map[string]time.Time
	holdUntil map[string]time.Time
	deviated  bool // the last full sample had units off their auto CPU
	units     bool // the last full sample had units at all
}

// NewController returns a controller; the configuration must pass
// Check.
func NewController(cfg Config) (*Controller, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &Controller{
		cfg:       cfg,
		next:      cfg.Interval,
		hot:       map[int]int{},
		cool:      map[string]int{},
		lastMove:  map[string]time.Time{},
		holdUntil: map[string]time.Time{},
		units:     true,
	}, nil
}

// Hold keeps a unit where it is until the given time (the loop calls it
// when an apply of a move failed: the kernel refused the placement).
func (c *Controller) Hold(key string, until time.Time) { c.holdUntil[key] = until }

// Moved records that a unit was moved at t (Step records its own moves;
// the loop calls it for moves made otherwise).
func (c *Controller) Moved(key string, t time.Time) { c.lastMove[key] = t }

// Step takes the next sample and returns the decision. Samples must come
// in time order; a sample no later than the previous one is ignored.
func (c *Controller) Step(s Sample) Decision {
	d := Decision{Next: c.cfg.Interval, WantFull: true}
	prev := c.prev
	if prev != nil && !s.Time.After(prev.Time) {
		d.Next, d.WantFull = c.next, c.wantFull(false)
		return d
	}
	c.prev = &s
	if prev == nil {
		if s.Full {
			c.prevFull = &s
		}
		return d
	}
	dt := s.Time.Sub(prev.Time).Seconds()
	pc := byCPU(prev.CPUs)
	for _, cur := range s.CPUs {
		if p, ok := pc[cur.CPU]; ok && cur.Processed >= p.Processed {
			d.PPS += float64(cur.Processed-p.Processed) / dt
		}
	}
	d.Active = d.PPS >= c.cfg.IdlePPS
	if d.Active {
		c.next = c.cfg.Interval
	} else {
		c.next *= 2
		if c.next > c.cfg.MaxIdleInterval {
			c.next = c.cfg.MaxIdleInterval
		}
	}
	if s.Full {
		if pf := c.prevFull; pf != nil && s.Time.Sub(pf.Time) <= 3*c.cfg.Interval+c.cfg.Interval/2 {
			d.Loads, d.Units, d.Moves = c.decide(pf, &s, d.Active)
		} else {
			// Too long since the last full sample (idle back-off):
			// this one only starts a new interval.
			c.hot = map[int]int{}
			c.cool = map[string]int{}
		}
		c.prevFull = &s
		c.units, c.deviated = len(s.Units) > 0, false
		for _, u := range s.Units {
			if u.Unit.CPU != u.Unit.Home {
				c.deviated = true
			}
		}
		for _, m := range d.Moves {
			c.deviated = c.deviated || m.To != m.Home
		}
	}
	d.WantFull = c.wantFull(d.Active)
	if len(d.Moves) > 0 || (s.Full && d.Loads == nil && d.WantFull) {
		// Watch the result of a move, or complete the interval this full
		// sample started, at the active pace.
		c.next = c.cfg.Interval
	}
	d.Next = c.next
	return d
}

// wantFull: a full sample is needed while traffic flows and there are
// units to move, and while any unit is away from its auto CPU.
func (c *Controller) wantFull(active bool) bool {
	return c.deviated || (active && c.units)
}

func byCPU(cs []CPUCounters) map[int]CPUCounters {
	m := make(map[int]CPUCounters, len(cs))
	for _, x := range cs {
		m[x.CPU] = x
	}
	return m
}

func delta(a, b uint64) uint64 {
	if b < a {
		return 0 // a counter that went back (CPU hot-plugged): no load
	}
	return b - a
}

// unitState is a unit's load over the interval and where it is, the
// measure of the load, and its queue's qstats packets over the interval
// (hasPkts false without them in both samples).
type unitState struct {
	_       outline.NoCompare
	u       Unit
	load    float64
	source  string
	pkts    uint64
	hasPkts bool
}

// decide computes the loads over the interval prev..cur and the moves.
func (c *Controller) decide(prev, cur *Sample, active bool) ([]CPULoad, []UnitLoad, []Move) {
	dt := cur.Time.Sub(prev.Time).Seconds()
	pc := byCPU(prev.CPUs)
	prevUnits := map[string]UnitCounters{}
	for _, u := range prev.Units {
		prevUnits[u.Unit.Key()] = u
	}
	// Per-unit load: the NAPI thread's CPU time over the interval.
	units := make([]unitState, 0, len(cur.Units))
	napiOn := map[int]float64{}
	waitOn := map[int]float64{}
	rpsOn := map[int]int{}
	// rpsPkts: the qstats packets of the RPS units on a CPU, -1 once one
	// of them has none.
	rpsPkts := map[int]int64{}
	for _, u := range cur.Units {
		st := unitState{u: u.Unit, source: LoadNAPITime}
		p, ok := prevUnits[u.Unit.Key()]
		if ok && u.HasPackets && p.HasPackets {
			st.pkts, st.hasPkts = delta(p.Packets, u.Packets), true
		}
		if ok && u.HasTicks && p.HasTicks && p.Unit.PID == u.Unit.PID {
			st.load = float64(delta(p.Ticks, u.Ticks)) / platform.UserHZ / dt
			if u.HasWait && p.HasWait && p.Unit.CPU == u.Unit.CPU {
				w := float64(delta(p.WaitNS, u.WaitNS)) / 1e9 / dt
				st.load += w
				waitOn[u.Unit.CPU] += w
			}
		}
		if u.Unit.Kind == UnitNAPI {
			napiOn[u.Unit.CPU] += st.load
		} else {
			rpsOn[u.Unit.CPU]++
			switch n := rpsPkts[u.Unit.CPU]; {
			case n < 0:
			case st.hasPkts:
				rpsPkts[u.Unit.CPU] = n + int64(min(st.pkts, 1<<40))
			default:
				rpsPkts[u.Unit.CPU] = -1
			}
		}
		units = append(units, st)
	}
	loads := make([]CPULoad, 0, len(cur.CPUs))
	idx := map[int]int{}
	for _, x := range cur.CPUs {
		p, ok := pc[x.CPU]
		if !ok {
			continue
		}
		l := CPULoad{CPU: x.CPU}
		if tot := delta(p.Total, x.Total); tot > 0 {
			l.Softirq = float64(delta(p.Softirq, x.Softirq)) / float64(tot)
			busy := float64(tot) - float64(delta(p.Idle, x.Idle))
			if busy < 0 {
				busy = 0
			}
			l.Busy = busy / float64(tot)
		}
		l.Net = l.Softirq + napiOn[x.CPU]
		l.Wait = waitOn[x.CPU]
		l.SqueezePS = float64(delta(p.TimeSqueeze, x.TimeSqueeze)) / dt
		l.DropPS = float64(delta(p.Dropped, x.Dropped)) / dt
		l.Saturated = c.saturated(l)
		idx[x.CPU] = len(loads)
		loads = append(loads, l)
	}
	// An RPS unit's load is its share of its CPU's softirq time (the
	// kernel does not count RPS work per queue): by the packets each RPS
	// unit there received (qstats) when all of them have the counts and
	// some packets came, else an even share.
	unitLoads := make([]UnitLoad, 0, len(units))
	for i := range units {
		u := &units[i]
		if u.u.Kind == UnitRPS {
			u.source = LoadEvenShare
			if j, ok := idx[u.u.CPU]; ok && rpsOn[u.u.CPU] > 0 {
				if n := rpsPkts[u.u.CPU]; n > 0 {
					u.source = LoadQstatsShare
					u.load = loads[j].Softirq * float64(min(u.pkts, 1<<40)) / float64(n)
				} else {
					u.load = loads[j].Softirq / float64(rpsOn[u.u.CPU])
				}
			}
		}
		ul := UnitLoad{Device: u.u.Device, Queue: u.u.Queue, Kind: u.u.Kind, CPU: u.u.CPU, Load: u.load, Source: u.source}
		if u.hasPkts && dt > 0 {
			pps := float64(u.pkts) / dt
			ul.PPS = &pps
		}
		unitLoads = append(unitLoads, ul)
	}
	for _, l := range loads {
		if l.Saturated != "" {
			c.hot[l.CPU]++
		} else {
			delete(c.hot, l.CPU)
		}
	}
	net := make(map[int]float64, len(loads))
	// press is how loaded a CPU is for a move away from it: its network
	// load, or its busy time when that reaches BusyLoad (user space or
	// other kernel work filling the CPU: the network work cannot get more
	// of it, and moving a queue off gives the queue the room it lacks).
	press := make(map[int]float64, len(loads))
	for _, l := range loads {
		net[l.CPU], press[l.CPU] = l.Net, l.Net
		if c.cfg.BusyLoad > 0 && l.Busy >= c.cfg.BusyLoad && l.Busy > l.Net {
			press[l.CPU] = l.Busy
		}
	}
	var moves []Move
	moved := map[string]bool{}
	// 1. Away from saturated CPUs, the most loaded first.
	order := make([]CPULoad, 0, len(loads))
	for _, l := range loads {
		if l.Saturated != "" && c.hot[l.CPU] >= c.cfg.HotIntervals {
			order = append(order, l)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].Net > order[j].Net })
	for _, src := range order {
		if len(moves) >= c.cfg.MaxMoves {
			break
		}
		best, bestTo, bestPeak := -1, -1, 2.0
		for i, u := range units {
			if u.u.CPU != src.CPU || u.load < c.cfg.MinUnitLoad || !c.mayMove(u.u.Key(), cur.Time) || moved[u.u.Key()] {
				continue
			}
			for _, t := range loads {
				if t.CPU == src.CPU || t.Saturated != "" {
					continue
				}
				after := net[t.CPU] + u.load
				if after+c.cfg.Margin > press[src.CPU] {
					continue
				}
				peak := press[src.CPU] - u.load
				if after > peak {
					peak = after
				}
				if t.CPU == u.u.Home {
					peak -= 1e-6 // on a tie, back to the auto CPU
				}
				if peak < bestPeak {
					best, bestTo, bestPeak = i, t.CPU, peak
				}
			}
		}
		if best < 0 {
			continue
		}
		u := units[best]
		moves = append(moves, Move{Device: u.u.Device, Queue: u.u.Queue, Kind: u.u.Kind, From: src.CPU, To: bestTo, Home: u.u.Home,
			Reason: fmt.Sprintf("cpu%d saturated (%s); queue load %s (%s), cpu%d net load %s", src.CPU, src.Saturated, pct(u.load), u.source, bestTo, pct(net[bestTo]))})
		moved[u.u.Key()] = true
		net[src.CPU] -= u.load
		net[bestTo] += u.load
		press[src.CPU] -= u.load
		press[bestTo] += u.load
		units[best].u.CPU = bestTo
		delete(c.hot, src.CPU)
	}
	// 2. Back to the auto CPU once it has room (or traffic is gone).
	for i, u := range units {
		key := u.u.Key()
		if u.u.CPU == u.u.Home || moved[key] {
			delete(c.cool, key)
			continue
		}
		home := u.u.Home
		j, ok := idx[home]
		if !ok {
			continue // the auto CPU went offline: the plan drops the deviation
		}
		// Room: the network load stays low, and (BusyLoad set) the CPU is
		// not filled by other work either (a process that keeps the CPU
		// busy would saturate it again: no flapping).
		room := loads[j].Saturated == "" && net[home]+u.load <= c.cfg.LowLoad &&
			(c.cfg.BusyLoad <= 0 || loads[j].Busy+u.load < c.cfg.BusyLoad)
		if !room {
			delete(c.cool, key)
			continue
		}
		c.cool[key]++
		if len(moves) >= c.cfg.MaxMoves || !c.mayMove(key, cur.Time) || (active && c.cool[key] < c.cfg.CoolIntervals) {
			continue
		}
		why := fmt.Sprintf("back to the auto placement: cpu%d has room (net load %s + queue %s <= %s)", home, pct(net[home]), pct(u.load), pct(c.cfg.LowLoad))
		if !active {
			why = "back to the auto placement: no traffic"
		}
		moves = append(moves, Move{Device: u.u.Device, Queue: u.u.Queue, Kind: u.u.Kind, From: u.u.CPU, To: home, Home: home, Reason: why})
		moved[key] = true
		net[u.u.CPU] -= u.load
		net[home] += u.load
		units[i].u.CPU = home
		delete(c.cool, key)
	}
	for _, m := range moves {
		c.lastMove[m.Key()] = cur.Time
	}
	return loads, unitLoads, moves
}

// mayMove: the unit's dwell time is over and it is not held.
func (c *Controller) mayMove(key string, now time.Time) bool {
	if t, ok := c.lastMove[key]; ok && now.Sub(t) < c.cfg.MinDwell {
		return false
	}
	if t, ok := c.holdUntil[key]; ok && now.Before(t) {
		return false
	}
	return true
}

// saturated names the measure by which a CPU cannot keep up, or "".
func (c *Controller) saturated(l CPULoad) string {
	switch {
	case c.cfg.DropRate > 0 && l.DropPS >= c.cfg.DropRate:
		return "dropped " + outline.FormatFloat(l.DropPS, 'f', 0, 64) + "/s"
	case c.cfg.SqueezeRate > 0 && l.SqueezePS >= c.cfg.SqueezeRate:
		return "time_squeeze " + outline.FormatFloat(l.SqueezePS, 'f', 0, 64) + "/s"
	case l.Net >= c.cfg.HighLoad:
		why := "net load " + pct(l.Net) + " (softirq " + pct(l.Softirq) + " + NAPI threads " + pct(l.Net-l.Softirq)
		if l.Wait > 0.005 {
			why += ", of which waiting for the CPU " + pct(l.Wait)
		}
		return why + ")"
	case c.cfg.BusyLoad > 0 && l.Busy >= c.cfg.BusyLoad && l.Net >= c.cfg.BusyNet:
		return "busy " + pct(l.Busy) + " with net load " + pct(l.Net)
	}
	return ""
}

//go:noinline
func pct(f float64) string { return outline.FormatFloat(f*100, 'f', 0, 64) + "%" }
