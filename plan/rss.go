package plan

import (
	"fmt"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
)

// The rss-per-cpu rule: for a device with at least one rx queue per CPU.
//
// With one hardware (RSS) queue per CPU the NIC already spreads flows over
// the CPUs; the kernel's scaling guide (Documentation/networking/
// scaling.rst, "RPS Configuration") says that in that case RPS is probably
// redundant, and the ipq807x report (docs/platforms.md; RAX120 v1, 4 rings
// and 4 CPUs) measured the stock next-CPU rule (queue i's RPS to CPU i+1) as the worst
// choice: 4 of 6 flow pairs lost 28.6-49.0%, RPS off 0.35-1.61%. So, with n
// online CPUs cpus[0..n-1] in number order, for each of the device's
// netdevs, its queues paired with threads and IRQs by PairQueues:
//   - the rx thread of rx queue i (the i-th rx thread in NAPI id order) runs
//     on cpus[i mod n]. The stock script pairs by PID; that is kept in
//     legacy, but here it would put queue i's thread away from queue i's
//     IRQ and XPS CPU (seen on veth in the e2e test);
//   - every rx queue gets RPS off (mask 0) and the configured flow count;
//   - every IRQ of rx queue q (DirRX, or DirRxTx serving rx and tx queue q)
//     gets affinity cpus[q mod n];
//   - with more than one tx queue, XPS maps tx-i to cpus[i mod n] when there
//     are at least n tx queues (each CPU transmits on "its" queues), else
//     tx-i to every cpus[c] with c mod T == i (T tx queues), so every CPU
//     has a queue;
//   - the tx-completion side follows XPS: the tx thread of tx queue i (a
//     driver with separate tx NAPIs: virtio_net, ipqess, mtk_soc_eth ...)
//     and a tx-only IRQ of tx queue i get the CPUs XPS sends tx-i from, so
//     a transmit's completion runs on the CPU that queued it, next to that
//     CPU's rx queue. A tx thread serving several tx queues gets the union
//     of their XPS CPUs, and is left alone when that is every CPU (nothing
//     to gain). Without XPS (one tx queue) the tx side is left alone;
//   - no CPU load is added: like the stock script's fixed multi-queue
//     branch, the device's work is spread evenly, not on one CPU.
//
// The device's NAPI threads and IRQs are never all put on one CPU, which is
// what the stock single-queue branch does to a multi-queue NIC without
// threaded NAPI (every queue of eth0 RPS 1 on x86-8).
//
// On a big.LITTLE machine the same rule runs over the big cores alone for
// a threaded device with at least one rx queue and one rx NAPI thread per
// big core (rss-per-big-cpu, evRSSBig): its rx threads (and rx IRQs) go to
// the big cores in turn, RPS off; XPS still maps every CPU. Each thread
// adds napiWeight to its core, so a later device sees the big cores used.

// evRSSBig is the evidence of the rss rule over the big cores.
const evRSSBig = "rss-per-big-cpu: on big and little cores, a threaded device with at least one rx queue and rx NAPI thread per big core gets one rx thread per big core in turn and RPS off (Documentation/networking/scaling.rst: with one hardware queue per CPU RPS is redundant; this project's big.LITTLE bed, docs/platforms.md: a 2-queue threaded NIC on 2 big and 2 throttled little cores, where the stock split over the big cores with RPS forwarded 0.81-0.86 of RPS off with the threads on the big cores, and auto with this rule 1.39 and 1.16 of the stock rule in two sweeps, 1.00 and 0.76 of the best). Applied to: %s."

// bigEvidence is evRSSBig for the devices the rule spread over the big
// cores, "" for none.
func (r *stockRun) bigEvidence() string {
	if len(r.rssBigDevices) == 0 {
		return ""
	}
	return fmt.Sprintf(evRSSBig, strings.Join(r.rssBigDevices, ", "))
}

// assignRSS applies the rss-per-cpu rule to one stock device, its rx
// threads and rx IRQs on rx (every CPU, or the big cores: assignDev).
func (r *stockRun) assignRSS(d *stockDev, rx []*stockCPU) {
	n := len(rx)
	bigOnly := n < len(r.cpus)
	if bigOnly {
		r.rssBigDevices = append(r.rssBigDevices, d.netdevs[0].Name)
	} else {
		r.rssDevices = append(r.rssDevices, d.netdevs[0].Name)
	}
	pair := r.b.pairing()
	for _, nd := range d.netdevs {
		dp := pair.Device(nd.Name)
		for i, t := range dp.RxThreads {
			c := rx[i%n]
			r.b.napi(t, cpuset.Of(c.id))
			if bigOnly {
				r.cpuAddWeight(c.id, napiWeight)
			}
		}
		for _, q := range nd.RxQueues {
			r.b.rps(nd, q, cpuset.Set{})
			r.b.flowCnt(nd, q, r.flows)
		}
		t := len(nd.TxQueues)
		if t > 1 {
			for _, q := range nd.TxQueues {
				r.b.xps(nd, q, xpsSet(q.Index, t, r.cpus))
			}
		}
		for _, irq := range r.b.deviceIRQs(nd.Name) {
			switch {
			case irq.RxQueue() >= 0:
				r.b.irq(irq, cpuset.Of(rx[irq.RxQueue()%n].id))
			case irq.TxQueue() >= 0 && irq.TxQueue() < t && t > 1:
				r.b.irq(irq, xpsSet(irq.TxQueue(), t, r.cpus))
			}
		}
		if t <= 1 {
			continue
		}
		for _, th := range dp.TxThreads {
			var set cpuset.Set
			for _, i := range dp.TxQueuesOf(th) {
				set = set.Union(xpsSet(nd.TxQueues[i].Index, t, r.cpus))
			}
			if !set.IsEmpty() && !set.Equal(r.allList) {
				r.b.napi(th, set)
			}
		}
	}
}

// xpsSet is the XPS mask of tx queue i out of t on cpus.
func xpsSet(i, t int, cpus []*stockCPU) cpuset.Set {
	n := len(cpus)
	if i < 0 {
		return cpuset.Set{}
	}
	if t >= n {
		return cpuset.Of(cpus[i%n].id)
	}
	var set cpuset.Set
	for c := range n {
		if c%t == i {
			set = set.Add(cpus[c].id)
		}
	}
	return set
}
