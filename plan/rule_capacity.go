package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// Big and little cores. On big.LITTLE SoCs cpu_capacity (or, without it,
// cpuinfo_max_freq) tells the cores apart. Evidence:
// StarWhiz/NanoPi-R6S-CPU-Optimization-for-Gigabit-SQM (RK3588S, A55 CPU0-3
// and A76 CPU4-7): with IRQs and queues on the little cores cake SQM
// stalled near 800 Mb/s, on the big cores over 1,400 Mb/s; sbwml/builder#38
// (RK3576): RPS masks on the big cores improved bursts; OpenWrt's own
// target/linux/rockchip/armv8/base-files/etc/hotplug.d/net/
// 40-net-smp-affinity pins the NanoPi R4S's eth0 and eth1 IRQs to CPU4 and
// CPU5, its A72 cores. So in auto every placement weighs CPUs by capacity:
// the stock run's CPUs start with a load of capacityBias x (1 - capacity),
// are tried big first, and IRQs of devices without NAPI threads (whose
// receive work runs where the IRQ fires) go to big cores.

const evCapacity = "Big and little cores (cpu_capacity %s): NIC work on the big cores first (StarWhiz/NanoPi-R6S-CPU-Optimization-for-Gigabit-SQM: cake SQM near 800 Mb/s with the NIC on the A55 cores, over 1,400 Mb/s on the A76; OpenWrt's rockchip 40-net-smp-affinity puts the R4S IRQs on its A72 CPU4/CPU5)."

// weighCapacity prepares an auto stock run on a big.LITTLE machine: little
// cores start loaded, big cores come first, and cores are told apart by
// the kernel's SMT siblings rather than core_id (which arm64 numbers
// inside each cluster, so a big and a little core can share one). On
// machines whose cores are equal it changes nothing.
func weighCapacity(r *stockRun, s *platform.Snapshot) {
	caps, differ := capacities(s)
	if !differ {
		return
	}
	sib := map[int][]int{}
	for _, c := range s.CPUs {
		sib[c.ID] = c.Siblings
	}
	for _, c := range r.cpus {
		c.load += capacityBias * (1 - caps[c.id])
		c.core = c.id
		for _, o := range sib[c.id] {
			c.core = min(c.core, o)
		}
	}
	sort.SliceStable(r.cpus, func(i, j int) bool { return caps[r.cpus[i].id] > caps[r.cpus[j].id] })
	r.big = nil
	for _, c := range r.cpus {
		if caps[c.id] >= littleBelow {
			r.big = append(r.big, c)
		}
	}
}

// capacityText describes the capacities for evidence: "1024 on CPUs 4-7,
// 423 on CPUs 0-3".
func capacityText(s *platform.Snapshot) string {
	byCap := map[int]cpuset.Set{}
	for _, c := range s.CPUs {
		if c.Online {
			v := c.Capacity
			if v == 0 {
				v = c.MaxFreqKHz
			}
			byCap[v] = byCap[v].Add(c.ID)
		}
	}
	vals := make([]int, 0, len(byCap))
	for v := range byCap {
		vals = append(vals, v)
	}
	sort.Ints(vals)
	parts := make([]string, 0, len(vals))
	for i := len(vals) - 1; i >= 0; i-- {
		parts = append(parts, fmt.Sprintf("%d on %s", vals[i], cpuWord(byCap[vals[i]])))
	}
	return strings.Join(parts, ", ")
}

// capacityIRQs places, on a big.LITTLE machine, the IRQs of devices the
// stock rule manages that have no NAPI threads (their receive work is the
// IRQ's softirq) on big cores, each away from its queue's RPS CPU.
func capacityIRQs(b *builder, s *platform.Snapshot, _ int) (string, []Hint) {
	if _, differ := capacities(s); !differ {
		return "", nil
	}
	pic := newPicture(b, s, nil)
	pair := b.pairing()
	var moved []string
	for _, d := range sortedDevices(s) {
		if d.BusDevice == "" || len(d.Lowers) > 0 || pair.HasThreads(d.Name) {
			continue
		}
		for _, q := range b.deviceIRQs(d.Name) {
			if q.Refused != "" || !b.plannedCPUs(actionKey{kind: KindIRQAffinity, irq: q.Number}).IsEmpty() {
				continue
			}
			queue := "rx-0"
			if rq := q.RxQueue(); rq >= 0 {
				queue = "rx-" + fmt.Sprint(rq)
			} else if q.Queue >= 0 {
				continue // a tx-only vector: no receive work
			}
			// An IRQ already pinned to one big core (the rockchip hook
			// does that) stays; any other goes to the best big core.
			c := -1
			if cur, err := cpuset.ParseMask(q.SMPAffinity); err == nil && cur.Len() == 1 && pic.big.Has(cur.CPUs()[0]) {
				c = cur.CPUs()[0]
			} else if c = pic.pick(loadThread, littleOf(pic)); c < 0 {
				continue
			}
			pic.add(c, loadThread)
			b.irq(q, cpuset.Of(c))
			what := fmt.Sprintf("irq %d %s on CPU%d", q.Number, q.Name, c)
			// The IRQ's CPU does the receive work: RPS goes elsewhere,
			// as the stock script keeps RPS off a NAPI CPU.
			if r := b.plannedRPS(d.Name, queue); r == c {
				if i, ok := b.rxIndex(d)[queue]; ok {
					if to := pic.pick(loadRPS, cpuset.Of(c).Union(littleOf(pic))); to >= 0 {
						pic.add(to, loadRPS)
						pic.add(r, -loadRPS)
						b.rps(d, d.RxQueues[i], cpuset.Of(to))
						what += fmt.Sprintf(", %s RPS on CPU%d", queue, to)
					}
				}
			}
			moved = append(moved, what)
		}
	}
	ev := fmt.Sprintf(evCapacity, capacityText(s))
	if len(moved) > 0 {
		ev += " IRQs of devices without NAPI threads: " + strings.Join(moved, ", ") + "."
	}
	return ev, nil
}

// littleOf is the set of CPUs that are not the biggest.
func littleOf(p *cpuPicture) cpuset.Set {
	var out cpuset.Set
	for _, c := range p.ids {
		if !p.big.Has(c) {
			out = out.Add(c)
		}
	}
	return out
}
