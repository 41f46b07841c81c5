package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// Wi-Fi devices with several NAPI threads (mt76). mt76 runs its NAPIs
// threaded on a dummy netdev named after the wiphy: one thread per rx
// queue, napi/phy0-<id> in the driver's rx queue order (mt76_dma_init:
// the data queue MT_RXQ_MAIN first, then MCU, MCU_WA, the other bands'
// queues), a tx NAPI added with netif_napi_add_tx (no id: napi/phy0-0) and
// a tx worker kthread "mt76-tx phy0" (mt76_worker_setup). The stock script
// treats the phy as one device and pins every thread to one CPU:
// openwrt/mt76#1072 (MT7996) found napi/phy0-7..12 and mt76-tx all on CPU3
// at 94-99% while CPU0-2 stayed under 20%, and spreading them made
// throughput scale; openwrt/openwrt#24697 (MT7988A + MT7996) measured
// 1.45 -> 2.09 Gbit/s driver TX (+44%; +39% downlink) with the tx worker
// moved off the NAPI core; openwrt/openwrt#25016 stopped the stock script
// from pinning mt76-tx. So auto:
//   - orders the phy's rx threads by the CPU time they have used (the
//     traffic they carry; ties: NAPI id order, the data queue first) and
//     gives each, in that order, the CPU where it finishes soonest
//     (cpuPicture.pick: load over capacity), weighing each by its share;
//   - puts the tx worker and the tx NAPI together on the best CPU other
//     than the busiest rx thread's;
//   - moves the phy's netdevs' RPS off the busiest rx thread's CPU;
//   - get_queues lists the threads with these roles (PhyThreads).

const evMT76 = "mt76 %s: rx NAPI threads spread by the CPU time they carry (%s), tx worker and tx NAPI on %s, off the busiest rx thread's CPU (openwrt/mt76#1072: six napi/phy0 threads and mt76-tx on one CPU at 94-99%% with the others under 20%%; openwrt/openwrt#24697: 1.45 -> 2.09 Gbit/s with the tx worker off the NAPI core; openwrt/openwrt#25016)."

// phyGroup is one mt76 device: the wifi netdevs of one bus device with
// their wiphys and threads.
type phyGroup struct {
	phys    []string
	netdevs []*platform.Device
	rx      []*platform.NAPIThread // ordered by work, then NAPI id
	txNAPI  []*platform.NAPIThread
	workers []*platform.NAPIThread
	ticks   uint64 // the rx threads' CPU time
}

// phyGroups finds the wifi devices whose phys own NAPI threads or tx
// workers, in name order of their first netdev.
func phyGroups(s *platform.Snapshot) []*phyGroup {
	byBus := map[string]*phyGroup{}
	var out []*phyGroup
	owner := map[string]*phyGroup{}
	for _, d := range sortedDevices(s) {
		if d.Phy == "" || d.BusDevice == "" || len(d.Lowers) > 0 {
			continue
		}
		g := byBus[d.BusDevice]
		if g == nil {
			g = &phyGroup{}
			byBus[d.BusDevice] = g
			out = append(out, g)
		}
		g.netdevs = append(g.netdevs, d)
		for _, p := range []string{d.Phy, "phy" + outline.Itoa(d.PhyIndex)} {
			if _, ok := owner[p]; !ok {
				owner[p] = g
				g.phys = append(g.phys, p)
			}
		}
	}
	for i := range s.NAPIThreads {
		t := &s.NAPIThreads[i]
		g := owner[t.Owner]
		if g == nil || t.Device != "" {
			continue
		}
		if t.NAPIID == 0 {
			g.txNAPI = append(g.txNAPI, t)
		} else if t.NAPIID > 0 {
			g.rx = append(g.rx, t)
			g.ticks += t.CPUTicks
		}
	}
	for i := range s.Workers {
		if g := owner[s.Workers[i].Owner]; g != nil {
			g.workers = append(g.workers, &s.Workers[i])
		}
	}
	kept := out[:0]
	for _, g := range out {
		sort.SliceStable(g.rx, func(i, j int) bool {
			if g.rx[i].CPUTicks != g.rx[j].CPUTicks {
				return g.rx[i].CPUTicks > g.rx[j].CPUTicks
			}
			return g.rx[i].NAPIID < g.rx[j].NAPIID
		})
		if len(g.rx) >= 2 || len(g.workers) > 0 {
			kept = append(kept, g)
		}
	}
	return kept
}

// weight is a thread's share of its phy's rx work, scaled so that the rx
// threads weigh len(rx) together (1 each without CPU times).
func (g *phyGroup) weight(t *platform.NAPIThread) float64 {
	if g.ticks == 0 {
		return loadThread
	}
	return max(0.05, float64(t.CPUTicks)/float64(g.ticks)*float64(len(g.rx)))
}

// spreadMT76 applies the mt76 rule to every phy group.
func spreadMT76(b *builder, s *platform.Snapshot, _ int) (string, []Hint) {
	var ev []string
	for _, g := range phyGroups(s) {
		mine := map[int]bool{}
		for _, list := range [][]*platform.NAPIThread{g.rx, g.txNAPI, g.workers} {
			for _, t := range list {
				mine[t.PID] = true
			}
		}
		names := map[string]bool{}
		for _, d := range g.netdevs {
			names[d.Name] = true
		}
		pic := newPicture(b, s, func(a Action) bool {
			return (a.Kind == KindNAPIAffinity && mine[a.PID]) || (a.Kind == KindRPSCPUs && names[a.Device])
		})
		var placed []string
		busiest := -1
		for _, t := range g.rx {
			w := g.weight(t)
			c := pic.pick(w, cpuset.Set{})
			if c < 0 {
				break
			}
			pic.add(c, w)
			b.napi(t, cpuset.Of(c))
			if busiest < 0 {
				busiest = c
			}
			placed = append(placed, fmt.Sprintf("%s CPU%d", t.Name, c))
		}
		tx := -1
		if len(g.workers)+len(g.txNAPI) > 0 {
			var exclude cpuset.Set
			if busiest >= 0 {
				exclude = exclude.Add(busiest)
			}
			tx = pic.pick(loadThread, exclude)
		}
		if tx >= 0 {
			pic.add(tx, loadThread)
			for _, t := range append(append([]*platform.NAPIThread(nil), g.workers...), g.txNAPI...) {
				b.napi(t, cpuset.Of(tx))
			}
		}
		for _, d := range g.netdevs {
			for _, q := range d.RxQueues {
				k := actionKey{kind: KindRPSCPUs, device: d.Name, queue: q.Name}
				if _, ok := b.planned(k); !ok {
					continue
				}
				if c := b.plannedRPS(d.Name, q.Name); c >= 0 && c != busiest {
					pic.add(c, loadRPS)
					continue
				}
				to := pic.pick(loadRPS, cpuset.Of(busiest))
				if to < 0 {
					continue
				}
				pic.add(to, loadRPS)
				b.rps(d, q, cpuset.Of(to))
			}
		}
		txWord := "their own CPU"
		if tx >= 0 {
			txWord = "CPU" + outline.Itoa(tx)
		}
		ev = append(ev, fmt.Sprintf(evMT76, strings.Join(g.phys[:1], ""), strings.Join(placed, ", "), txWord))
	}
	return strings.Join(ev, " "), nil
}

// PhyThread is one thread of an mt76 phy and what it does, for get_queues.
type PhyThread struct {
	_      outline.NoCompare
	PID    int    `json:"pid"`
	Thread string `json:"thread"`
	// Role is "rx-data" (the busiest rx queue), "rx", "tx-napi" (transmit
	// completion) or "tx-worker" (mt76's tx worker, which queues frames).
	Role string `json:"role"`
	// Share is the thread's share of the phy's rx CPU time in percent
	// (rx threads with CPU times only).
	Share    int    `json:"share,omitempty"`
	CPUs     string `json:"cpus"`
	WantCPUs string `json:"want_cpus,omitempty"`
}

// PhyThreads lists the threads serving a wifi netdev's phy with their
// roles and the plan's wanted CPUs (want: a thread's PID -> the cpu list
// the plan gives it, "" for none), or nil for a netdev without such
// threads.
func PhyThreads(s *platform.Snapshot, dev string, want func(pid int) string) []PhyThread {
	for _, g := range phyGroups(s) {
		found := false
		for _, d := range g.netdevs {
			found = found || d.Name == dev
		}
		if !found {
			continue
		}
		var out []PhyThread
		add := func(t *platform.NAPIThread, role string) {
			pt := PhyThread{PID: t.PID, Thread: t.Name, Role: role, CPUs: t.CPUs,
				WantCPUs: want(t.PID)}
			if role != "tx-napi" && role != "tx-worker" && g.ticks > 0 {
				pt.Share = int(100 * t.CPUTicks / g.ticks)
			}
			out = append(out, pt)
		}
		for i, t := range g.rx {
			role := "rx"
			if i == 0 {
				role = "rx-data"
			}
			add(t, role)
		}
		for _, t := range g.txNAPI {
			add(t, "tx-napi")
		}
		for _, t := range g.workers {
			add(t, "tx-worker")
		}
		return out
	}
	return nil
}
