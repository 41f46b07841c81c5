package steering

import (
	"sort"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// The rss-per-cpu rule: for a device with at least one rx queue per CPU.
//
// With one hardware (RSS) queue per CPU the NIC already spreads flows over
// the CPUs; the kernel's scaling guide (Documentation/networking/
// scaling.rst, "RPS Configuration") says that in that case RPS is probably
// redundant, and the ipq807x report (docs/platforms.md; RAX120 v1, 4 rings
// and 4 CPUs)
// measured the stock next-CPU rule (queue i's RPS to CPU i+1) as the worst
// choice: 4 of 6 flow pairs lost 28.6-49.0%, RPS off 0.35-1.61%. So, with n
// online CPUs cpus[0..n-1] in number order:
//   - rx task i of the device runs on cpus[i mod n], the tasks taken in
//     NAPI id order: a multi-queue driver registers its NAPI instances queue
//     by queue, so ids rise with the queue number, while the threads' PIDs
//     need not (netif_napi_add puts each instance at the head of the
//     device's list, and enabling `threaded` later creates the threads in
//     list order, i.e. reversed). The stock script pairs by PID; that is
//     kept in legacy, but here it would put queue i's thread away from
//     queue i's IRQ and XPS CPU (seen on veth in the e2e test);
//   - every rx queue of the device's netdevs gets RPS off (mask 0) and the
//     configured flow count;
//   - every per-queue IRQ (an IRQ the snapshot ties to one of the device's
//     netdevs and an rx queue q >= 0) gets affinity cpus[q mod n];
//   - with more than one tx queue, XPS maps tx-i to cpus[i mod n] when there
//     are at least n tx queues (each CPU transmits on "its" queues), else
//     tx-i to every cpus[c] with c mod T == i (T tx queues), so every CPU
//     has a queue;
//   - no CPU load is added: like the stock script's fixed multi-queue
//     branch, the device's work is spread evenly, not on one CPU.
//
// The device's NAPI threads and IRQs are never all put on one CPU, which is
// what the stock single-queue branch does to a multi-queue NIC without
// threaded NAPI (every queue of eth0 RPS 1 on x86-8).

// assignRSS applies the rss-per-cpu rule to one stock device.
func (r *stockRun) assignRSS(d *stockDev) {
	n := len(r.cpus)
	r.rssDevices = append(r.rssDevices, d.netdevs[0].Name)
	tasks := append([]*platform.NAPIThread(nil), d.rxTasks...)
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].NAPIID < tasks[j].NAPIID })
	for i, t := range tasks {
		r.b.napi(t, cpuset.Of(r.cpus[i%n].id))
	}
	for _, nd := range d.netdevs {
		for _, q := range nd.RxQueues {
			r.b.rps(nd, q, cpuset.Set{})
			r.b.flowCnt(nd, q, r.flows)
		}
		if t := len(nd.TxQueues); t > 1 {
			for _, q := range nd.TxQueues {
				r.b.xps(nd, q, xpsSet(q.Index, t, r.cpus))
			}
		}
	}
	for _, nd := range d.netdevs {
		for _, irq := range r.b.deviceIRQs(nd.Name) {
			if irq.Queue >= 0 {
				r.b.irq(irq, cpuset.Of(r.cpus[irq.Queue%n].id))
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
