package plan

import (
	"sort"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// This file re-derives the rules of OpenWrt's stock steering script,
// openwrt/openwrt package/network/config/netifd/files/usr/libexec/network/
// packet-steering.uc (the version with threaded-NAPI multi-queue handling,
// the mtk_eth thread match and `-l` flows), run by the netifd init script
// etc/init.d/packet_steering as `packet-steering.uc [-l FLOWS] MODE` where
// MODE is network.globals.packet_steering ("0" disable, "2" all CPUs,
// anything else mode 1). What it does, step by step:
//
// CPUs. Every entry of /sys/bus/cpu/devices (online or not), sorted by
// number, cut to the first 64, each with core = topology/core_id (0 when
// unreadable: int(null) is 0 in ucode) and load 0. Fewer than 2 CPUs: exit
// without writing anything, in every mode.
//
// Loads. cpu_add_weight(cpu, w) adds w to that CPU and w*0.75
// (cpu_thread_weight) to every other CPU with the same core_id (SMT
// siblings; the script compares core_id only, not the package).
// get_next_cpu(w, prev) sorts a copy of the CPU list by load and takes the
// first, or the second when the first is prev; it adds w to the pick and
// returns it. In mode 0 it returns CPU 0 and adds nothing. Weights: a NAPI
// pick 1.0 (napi_weight), a single-queue RPS pick 0.75 (rx_weight), a
// per-queue RPS pick 1.0. The sort is ucode's sort(), which calls the C
// library's qsort; OpenWrt's musl qsort is not stable, so among equally
// loaded CPUs the first is not always the lowest numbered (loads
// [0.75 0 0 0] give CPU2, not CPU1). muslSortByLoad reproduces musl's
// order exactly, so the tie-breaks are the script's on a router.
//
// Devices. Every /sys/class/net entry in name order that has a `device`
// link and no lower_* link (so bridges, VLANs, DSA user ports, veth,
// tunnels are skipped) joins the "physical device" of its resolved bus
// device path: netdevs sharing a bus device (wifi interfaces of one phy,
// ports of one mvpp2 controller) are handled together. A physical device
// keeps its driver (basename of the bus device's driver link), its netdevs,
// its wifi phys ("phy" + phy80211/index of each netdev) and the rx queue
// names of its first netdev (glob order: rx-0, rx-1, rx-10, rx-2 - text
// order, a bug past 10 queues).
//
// Threads. Every kernel thread (/proc/PID/exe unreadable, PIDs in glob =
// text order, a bug when PIDs differ in width) whose name matches
// /napi\/([^-]*)-\d+/ with the captured part equal to one of a device's
// netdev or phy names, or any napi/mtk_eth-* thread for a device with
// driver mtk_soc_eth, belongs to the first such device (in device order).
// It is one of the device's tasks; it is also an rx task when the number
// after the dash is > 0 (every real NAPI id is).
//
// Assignment (assign_dev_cpu), ethernet devices (no phy) first, in order:
//   - more than one rx queue and more than one rx task: the multi-queue
//     branch. num = max(rx queues, rx tasks). For i < num: when num >= CPU
//     count, rx task i runs on CPU i mod n and queue i's RPS goes to CPU
//     (i+1) mod n (no loads change, mode 2 does not change this); else rx
//     task i (if any) goes to get_next_cpu(1.0) and queue i's RPS to all
//     CPUs in mode 2 or get_next_cpu(1.0, that task's CPU). Only the queue
//     name i of each of the device's netdevs is written.
//   - otherwise: if the device has tasks, all of them go to one
//     get_next_cpu(1.0) (the device's NAPI CPU); then every rx queue of
//     every netdev gets RPS to all CPUs in mode 2, else to
//     get_next_cpu(0.75, NAPI CPU).
//
// Then every device that got a NAPI CPU adds 2.0 (eth_bias) to it, so wifi
// avoids the ethernet NAPI CPU, and wifi devices (with a phy) are assigned
// the same way.
//
// Writes. A thread pinned to CPU c: `taskset -p -c c PID` (mode 0: the list
// of every CPU). An RPS write of CPU c: printf("%x", 1 << c); all CPUs:
// (1 << count) - 1, bits 0..count-1 whatever the CPU numbers; mode 0 writes
// 0. With every rps_cpus write goes rps_flow_cnt = the -l value (0 without
// it) to the same queue. Above 32 CPUs the mask has no comma groups (the
// kernel rejects groups over 8 digits): here masks are always in the
// kernel's format, queues are taken in numeric order and threads in numeric
// PID order, so within 32 CPUs, 10 queues and equal-width PIDs the writes
// are the script's and beyond them they are the script's rule done right.
// The 64-CPU cut is not kept (it only existed because of the integer mask).
//
// This project differs on purpose in one point: mode off writes flow count
// 0 (docs/design.md "Modes"), where the script with -l N would write N.

// matchNAPIName matches the stock thread-name pattern /napi\/([^-]*)-(\d+)/
// (unanchored, leftmost match, greedy digits) and returns its two groups:
// the owner (a netdev, "mtk_eth" or a phy) and the NAPI id digits. Written
// out by hand instead of with package regexp, which would add 130-330 KB to
// the router binary for this one pattern.
func matchNAPIName(name string) (owner, id string, ok bool) {
	const prefix = "napi/"
	for off := 0; ; {
		i := strings.Index(name[off:], prefix)
		if i < 0 {
			return "", "", false
		}
		start := off + i + len(prefix)
		rest := name[start:]
		if dash := strings.IndexByte(rest, '-'); dash >= 0 {
			n := 0
			for n < len(rest)-dash-1 && rest[dash+1+n] >= '0' && rest[dash+1+n] <= '9' {
				n++
			}
			if n > 0 {
				return rest[:dash], rest[dash+1 : dash+1+n], true
			}
		}
		off = off + i + 1
	}
}

// MTKSocEth is the MediaTek SoC ethernet driver, whose NAPI threads are
// named after its dummy netdev "mtk_eth", not after a port.
const MTKSocEth = "mtk_soc_eth"

// isMTKEthThread reports whether a thread name holds "napi/mtk_eth-", the
// stock script's test for the mtk_soc_eth driver's shared NAPI thread.
//
//go:noinline
func isMTKEthThread(name string) bool { return strings.Contains(name, "napi/mtk_eth-") }

// Stock weights (packet-steering.uc).
const (
	napiWeight      = 1.0
	cpuThreadWeight = 0.75
	rxWeight        = 0.75
	ethBias         = 2.0
)

// stockCPU is one entry of the script's cpus array.
type stockCPU struct {
	id   int
	core int
	load float64
}

// stockDev is one entry of the script's phys_devs.
type stockDev struct {
	key      string
	driver   string
	netdevs  []*platform.Device
	phys     []string
	tasks    []*platform.NAPIThread
	rxTasks  []*platform.NAPIThread
	rxQueues []string
	extra    bool // named in a `config device` section, not found by the rules
	napiCPU  int
	hasNAPI  bool
}

// stockRun is one pass of the stock algorithm with this project's options.
type stockRun struct {
	b       *builder
	cpus    []*stockCPU
	allMask cpuset.Set // what the script writes for "all CPUs"
	allList cpuset.Set // what mode 0 gives every thread
	disable bool
	allCPUs bool
	flows   int
	// rss: a device with at least one rx queue per CPU gets the rss-per-cpu
	// rule (rss.go) instead of the stock branches (auto).
	rss bool
	// spread: a device with 2..n-1 rx queues takes the multi-queue branch
	// even without threaded NAPI, so its queues are not all funnelled into
	// one CPU (auto).
	spread bool
	// rssDevices records the devices the rss rule handled.
	rssDevices []string
	// big are the biggest cores of a big.LITTLE machine, big first
	// (weighCapacity); nil on a machine whose cores are equal.
	big []*stockCPU
	// rssBigDevices records the devices the rss rule spread over the big
	// cores only (rss.go, assignDev).
	rssBigDevices []string
}

// stockCPUs builds the script's CPU list from the snapshot: every listed
// CPU (online or not) when onlineOnly is false, else the online ones.
func stockCPUs(s *platform.Snapshot, onlineOnly bool) []*stockCPU {
	var out []*stockCPU
	seen := map[int]bool{}
	for _, c := range s.CPUs {
		if onlineOnly && !c.Online {
			continue
		}
		if c.ID < 0 || c.ID >= cpuset.MaxCPUs || seen[c.ID] {
			continue // not a CPU the kernel could have; a snapshot may be hand-made
		}
		seen[c.ID] = true
		core := c.Core
		if core < 0 {
			core = 0
		}
		out = append(out, &stockCPU{id: c.ID, core: core})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// onlineCPUs lists the online CPUs. When the snapshot marks none online
// (the state could not be read) every listed CPU counts as online.
func onlineCPUs(s *platform.Snapshot) []*stockCPU {
	on := stockCPUs(s, true)
	if len(on) == 0 {
		return stockCPUs(s, false)
	}
	return on
}

// OnlineCPUs is the set of online CPUs, as the stock rule counts them: every
// listed CPU when the snapshot marks none online.
func OnlineCPUs(s *platform.Snapshot) cpuset.Set {
	var all cpuset.Set
	for _, c := range onlineCPUs(s) {
		all = all.Add(c.id)
	}
	return all
}

//go:noinline
func (r *stockRun) cpuAddWeight(id int, w float64) {
	var cpu *stockCPU
	for _, c := range r.cpus {
		if c.id == id {
			cpu = c
			break
		}
	}
	if cpu == nil {
		return
	}
	cpu.load += w
	for _, sib := range r.cpus {
		if sib == cpu || sib.core != cpu.core {
			continue
		}
		sib.load += w * cpuThreadWeight
	}
}

// nextCPU is get_next_cpu; prev < 0 means none. The sort is musl's
// (muslSortByLoad), on a copy: the CPU list itself keeps its order.
func (r *stockRun) nextCPU(w float64, prev int) int {
	if r.disable {
		return 0
	}
	sorted := append([]*stockCPU(nil), r.cpus...)
	muslSortByLoad(sorted)
	pick := sorted[0]
	if prev >= 0 && pick.id == prev {
		pick = sorted[1]
	}
	r.cpuAddWeight(pick.id, w)
	return pick.id
}

// setTask is set_task_cpu.
func (r *stockRun) setTask(t *platform.NAPIThread, cpu int) {
	if t == nil {
		return
	}
	if r.disable {
		r.b.napi(t, r.allList)
		return
	}
	if cpu < 0 {
		r.b.napi(t, r.allList)
		return
	}
	r.b.napi(t, cpuset.Of(cpu))
}

// setNetdev is set_netdev_cpu: queue "" means every rx queue.
func (r *stockRun) setNetdev(d *platform.Device, cpu int, queue string) {
	var val cpuset.Set
	switch {
	case r.disable:
	case cpu < 0:
		val = r.allMask
	default:
		val = cpuset.Of(cpu)
	}
	if queue != "" {
		if i, ok := r.b.rxIndex(d)[queue]; ok {
			r.b.rps(d, d.RxQueues[i], val)
			r.b.flowCnt(d, d.RxQueues[i], r.flows)
		}
		return
	}
	for _, q := range d.RxQueues {
		r.b.rps(d, q, val)
		r.b.flowCnt(d, q, r.flows)
	}
}

// collectStockDevices finds the script's physical devices and their
// threads. extra names devices from `config device` sections: they join
// even without a bus device or with lower links, each as its own device.
func collectStockDevices(s *platform.Snapshot, extra map[string]bool) []*stockDev {
	devs := make([]*platform.Device, 0, len(s.Devices))
	for i := range s.Devices {
		devs = append(devs, &s.Devices[i])
	}
	sort.SliceStable(devs, func(i, j int) bool { return devs[i].Name < devs[j].Name })

	var out []*stockDev
	byKey := map[string]*stockDev{}
	for _, d := range devs {
		named := extra[d.Name]
		key := d.BusDevice
		if !named && (key == "" || len(d.Lowers) > 0) {
			continue
		}
		isExtra := named && (key == "" || len(d.Lowers) > 0)
		if isExtra {
			key = "netdev:" + d.Name
		}
		pd := byKey[key]
		if pd == nil {
			pd = &stockDev{key: key, driver: d.Driver, extra: isExtra}
			qs := append([]platform.RxQueue(nil), d.RxQueues...)
			sort.SliceStable(qs, func(i, j int) bool { return qs[i].Index < qs[j].Index })
			for _, q := range qs {
				pd.rxQueues = append(pd.rxQueues, q.Name)
			}
			byKey[key] = pd
			out = append(out, pd)
		}
		if d.Kind == platform.KindWifi || d.Phy != "" {
			phy := "phy" + outline.Itoa(d.PhyIndex)
			if !containsString(pd.phys, phy) {
				pd.phys = append(pd.phys, phy)
			}
		}
		pd.netdevs = append(pd.netdevs, d)
	}

	threads := make([]*platform.NAPIThread, 0, len(s.NAPIThreads))
	for i := range s.NAPIThreads {
		threads = append(threads, &s.NAPIThreads[i])
	}
	sort.SliceStable(threads, func(i, j int) bool { return threads[i].PID < threads[j].PID })
	idx := newTaskIndex(out)
	for _, t := range threads {
		pd := idx.match(t)
		if pd == nil {
			continue
		}
		pd.tasks = append(pd.tasks, t)
		if _, digits, ok := matchNAPIName(t.Name); ok {
			if id, err := strconv.Atoi(digits); err != nil || id > 0 {
				// Digits too long for an int are still "> 0".
				pd.rxTasks = append(pd.rxTasks, t)
			}
		}
	}
	return out
}

// taskIndex finds the device of a thread as task_device_match does when
// tried on every device in order (the first match wins), without the
// devices x threads scan: a thread can only match the device owning the
// netdev or phy its name captures, the first mtk_soc_eth device, or (for
// devices named in the configuration) the device of the snapshot's own
// thread-to-netdev link; the earliest of those in device order wins.
type taskIndex struct {
	order   map[*stockDev]int
	byName  map[string]*stockDev // netdev and phy names
	byExtra map[string]*stockDev // netdev names of configured extra devices
	mtk     *stockDev
}

func newTaskIndex(devs []*stockDev) *taskIndex {
	ix := &taskIndex{order: map[*stockDev]int{}, byName: map[string]*stockDev{}, byExtra: map[string]*stockDev{}}
	for i, pd := range devs {
		ix.order[pd] = i
		for _, d := range pd.netdevs {
			if _, ok := ix.byName[d.Name]; !ok {
				ix.byName[d.Name] = pd
			}
			if pd.extra {
				ix.byExtra[d.Name] = pd
			}
		}
		for _, phy := range pd.phys {
			if _, ok := ix.byName[phy]; !ok {
				ix.byName[phy] = pd
			}
		}
		if pd.driver == MTKSocEth && ix.mtk == nil {
			ix.mtk = pd
		}
	}
	return ix
}

func (ix *taskIndex) match(t *platform.NAPIThread) *stockDev {
	var best *stockDev
	consider := func(pd *stockDev) {
		if pd != nil && (best == nil || ix.order[pd] < ix.order[best]) {
			best = pd
		}
	}
	if owner, _, ok := matchNAPIName(t.Name); ok {
		consider(ix.byName[owner])
	}
	if ix.mtk != nil && isMTKEthThread(t.Name) {
		consider(ix.mtk)
	}
	if t.Device != "" {
		consider(ix.byExtra[t.Device])
	}
	return best
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// run assigns every device: ethernet first, the bias, then wifi.
func (r *stockRun) run(devs []*stockDev) {
	if len(r.cpus) < 2 {
		return
	}
	for _, d := range devs {
		if len(d.phys) == 0 {
			r.assignDev(d)
		}
	}
	for _, d := range devs {
		if len(d.tasks) == 0 || !d.hasNAPI {
			continue
		}
		r.cpuAddWeight(d.napiCPU, ethBias)
	}
	for _, d := range devs {
		if len(d.phys) > 0 {
			r.assignDev(d)
		}
	}
}

// assignDev is assign_dev_cpu, with the auto rules hooked in front.
func (r *stockRun) assignDev(d *stockDev) {
	n := len(r.cpus)
	if r.rss && len(d.rxQueues) >= n {
		r.assignRSS(d, r.cpus)
		return
	}
	if nb := len(r.big); r.rss && nb > 1 && len(d.rxQueues) >= nb && len(d.rxTasks) >= nb {
		r.assignRSS(d, r.big)
		return
	}
	if len(d.rxQueues) > 1 && (len(d.rxTasks) > 1 || r.spread) {
		r.assignQueues(d)
		return
	}
	if len(d.tasks) > 0 {
		cpu := r.nextCPU(napiWeight, -1)
		d.napiCPU, d.hasNAPI = cpu, true
		for _, t := range d.tasks {
			r.setTask(t, cpu)
		}
	}
	if len(d.netdevs) > 0 {
		cpu := -1
		if !r.allCPUs {
			prev := -1
			if d.hasNAPI {
				prev = d.napiCPU
			}
			cpu = r.nextCPU(rxWeight, prev)
		}
		for _, nd := range d.netdevs {
			r.setNetdev(nd, cpu, "")
		}
	}
}

// assignQueues is assign_dev_queues_cpu.
func (r *stockRun) assignQueues(d *stockDev) {
	n := len(r.cpus)
	num := max(len(d.rxQueues), len(d.rxTasks))
	for i := 0; i < num; i++ {
		var task *platform.NAPIThread
		if i < len(d.rxTasks) {
			task = d.rxTasks[i]
		}
		cpu := -1
		switch {
		case num >= n:
			cpu = r.cpus[i%n].id
		case task != nil:
			cpu = r.nextCPU(napiWeight, -1)
		}
		r.setTask(task, cpu)
		if i >= len(d.rxQueues) {
			continue
		}
		rxq := d.rxQueues[i]
		switch {
		case num >= n:
			cpu = r.cpus[(i+1)%n].id
		case r.allCPUs:
			cpu = -1
		default:
			cpu = r.nextCPU(napiWeight, cpu)
		}
		for _, nd := range d.netdevs {
			r.setNetdev(nd, cpu, rxq)
		}
	}
}
