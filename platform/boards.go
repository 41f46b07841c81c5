package platform

import (
	"bytes"
	"errors"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/uci"
)

// The facts of the boards people run now (docs/platforms.md "Boards"):
// big and little cores, IRQs an irq chip will not move, ppp devices and the
// device under them, and mt76's tx worker thread.
//
//	sys/bus/cpu/devices/cpuN/cpu_capacity      the scheduler's capacity of
//	                                           the core, 1024 for the biggest
//	                                           (arm64 topology, from the
//	                                           device tree's
//	                                           capacity-dmips-mhz)
//	sys/bus/cpu/devices/cpuN/cpufreq/cpuinfo_max_freq   kHz
//	proc/irq/N/effective_affinity_list         where the IRQ really arrives
//	sys/class/net/DEV/type                     512 (ARPHRD_PPP) for ppp
//	etc/config/network                         interfaces with proto pppoe
//	                                           and their device (netifd's
//	                                           ppp.sh names the netdev
//	                                           pppoe-<interface>)
//	proc/PID/stat "mt76-tx phyN"               mt76's tx worker kthread
//	                                           (mt76_worker_setup in
//	                                           mt76/util.c, named
//	                                           "mt76-tx <wiphy>")
//
// None of them is a gap when absent: most routers have equal cores, no
// cpufreq and no ppp device.

// RefusedIRQsFile is, below the root, where an apply records the IRQs
// whose smp_affinity the kernel refused (EINVAL or EIO from the write: the
// irq chip has no irq_set_affinity, as the Raspberry Pi 5's RP1, or the IRQ
// is managed). /var/run is a tmpfs, so the record does not outlive a
// reboot, where IRQ numbers may change. Lines: "N<TAB>NAME<TAB>ERROR".
const RefusedIRQsFile = "var/run/packet-steering/refused-irqs"

// MaxRefusedIRQs bounds the record (and what a Read takes from it).
const MaxRefusedIRQs = 256

// arphrdPPP is ARPHRD_PPP (include/uapi/linux/if_arp.h), the type of every
// ppp netdev.
const arphrdPPP = 512

// mt76TxWorker starts the name of mt76's tx worker thread.
const mt76TxWorker = "mt76-tx "

// PPPoELink is one netifd `proto pppoe` interface: its section name and
// the device it runs over (option device, or ifname before OpenWrt 21.02).
type PPPoELink struct {
	Interface string `json:"interface"`
	Device    string `json:"device"`
}

// PPPDeviceName is the netdev netifd's ppp.sh creates for a pppoe
// interface ("pppoe-wan" for interface wan).
func PPPDeviceName(iface string) string { return "pppoe-" + iface }

// readCPUCapacity reads cpu_capacity of the CPU whose directory is dir,
// and cpuinfo_max_freq only where cpu_capacity is absent (the planner
// falls back to it then); absent files leave 0 and are not gaps.
func (f *reader) readCPUCapacity(c *CPU, dir string, g *gaps) {
	for _, x := range []struct {
		rel string
		dst *int
	}{{dir + "/cpu_capacity", &c.Capacity}, {dir + "/cpufreq/cpuinfo_max_freq", &c.MaxFreqKHz}} {
		if c.Capacity > 0 {
			return
		}
		n, err := f.num(f.dir, x.rel)
		switch {
		case err == nil && n > 0:
			*x.dst = n
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			g.add(x.rel, err)
		}
	}
}

// readIRQEffective reads effective_affinity_list of one IRQ; an absent or
// empty file (kernels without CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK, or an
// irq chip that never set it) leaves Effective "".
func (f *reader) readIRQEffective(q *IRQ, g *gaps) {
	rel := irqDir + "/" + itoa(q.Number) + "/effective_affinity_list"
	s, err := f.str(f.dir, rel)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			g.add(rel, err)
		}
		return
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	if set, err := cpuset.ParseList(s); err != nil || set.IsEmpty() {
		g.add(rel, &fs.PathError{Op: "parse", Path: rel, Err: errors.New("not a cpu list")})
		return
	}
	q.Effective = s
}

// ParseRefusedIRQs parses the RefusedIRQsFile's text into IRQ number ->
// (name, error); malformed lines are skipped, at most MaxRefusedIRQs kept.
func ParseRefusedIRQs(b []byte) map[int][2]string {
	out := map[int][2]string{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(out) >= MaxRefusedIRQs {
			break
		}
		f := strings.SplitN(string(line), "\t", 3)
		if len(f) != 3 {
			continue
		}
		n, err := strconv.Atoi(f[0])
		if err != nil || n < 0 || f[1] == "" {
			continue
		}
		out[n] = [2]string{f[1], f[2]}
	}
	return out
}

// FormatRefusedIRQs is the RefusedIRQsFile text for the record, in IRQ
// number order (names and errors with tabs or newlines are cleaned).
func FormatRefusedIRQs(rec map[int][2]string) []byte {
	nums := make([]int, 0, len(rec))
	for n := range rec {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' {
				return ' '
			}
			return r
		}, s)
	}
	var b bytes.Buffer
	for i, n := range nums {
		if i >= MaxRefusedIRQs {
			break
		}
		b.WriteString(outline.Itoa(n) + "\t" + clean(rec[n][0]) + "\t" + clean(rec[n][1]) + "\n")
	}
	return b.Bytes()
}

// markRefused sets Refused on the IRQs the record lists under the same
// number and name (an IRQ renumbered since is movable until shown not to be).
func (f *reader) markRefused(irqs []IRQ, g *gaps) {
	b, err := f.Attr(f.dir, RefusedIRQsFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			g.add(RefusedIRQsFile, err)
		}
		return
	}
	rec := ParseRefusedIRQs(b)
	for i := range irqs {
		if r, ok := rec[irqs[i].Number]; ok && r[0] == irqs[i].Name {
			irqs[i].Refused = r[1]
			if irqs[i].Refused == "" {
				irqs[i].Refused = "refused"
			}
		}
	}
}

// isPPPType reads the device's type and reports a ppp netdev.
func (f *reader) isPPPType(dev kfs.Dir) bool {
	n, err := f.num(dev, "type")
	return err == nil && n == arphrdPPP
}

// pppoeLinks lists the network config's pppoe interfaces.
func pppoeLinks(p *uci.Package) []PPPoELink {
	var out []PPPoELink
	for _, s := range p.SectionsOfType("interface") {
		if proto, _ := s.Get("proto"); proto != "pppoe" || s.Name == "" {
			continue
		}
		dev, ok := s.Get("device")
		if !ok || dev == "" {
			dev, _ = s.Get("ifname")
		}
		if dev == "" || len(out) >= 64 {
			continue
		}
		out = append(out, PPPoELink{Interface: s.Name, Device: dev})
	}
	return out
}

// tieCarriers sets Carrier of each ppp device netifd made for a pppoe
// interface whose device exists.
func tieCarriers(devs []Device, links []PPPoELink) {
	idx := deviceIndex(devs)
	for _, l := range links {
		i, ok := idx[PPPDeviceName(l.Interface)]
		if !ok || devs[i].Kind != KindPPP {
			continue
		}
		if _, ok := idx[l.Device]; ok {
			devs[i].Carrier = l.Device
		}
	}
}

// isTxWorker reports mt76's tx worker thread name.
func isTxWorker(comm []byte) bool {
	return bytes.HasPrefix(comm, []byte(mt76TxWorker)) && len(comm) > len(mt76TxWorker)
}

// splitWorkers moves the tx worker threads readProcesses found with the
// NAPI threads into a list of their own: Owner the wiphy ("phy0"), no NAPI
// id (-1), Direction DirTX.
func splitWorkers(threads []NAPIThread) (napi, workers []NAPIThread) {
	napi = threads[:0]
	for _, t := range threads {
		if !isTxWorker([]byte(t.Name)) {
			napi = append(napi, t)
			continue
		}
		t.Owner = strings.TrimPrefix(t.Name, mt76TxWorker)
		t.NAPIID = -1
		t.Direction = DirTX
		t.Device = ""
		workers = append(workers, t)
	}
	return napi, workers
}

// statTicks returns utime + stime of proc/PID/stat's bytes (fields 14 and
// 15: the 12th and 13th after the comm), 0 when they do not parse.
func statTicks(b []byte) uint64 {
	closing := bytes.LastIndexByte(b, ')')
	if closing < 0 {
		return 0
	}
	rest := b[closing+1:]
	var field []byte
	var sum uint64
	for n := 0; n < 13; n++ {
		if field, rest = nextField(rest); field == nil {
			return 0
		}
		if n >= 11 {
			v, ok := parseUintBytes(field)
			if !ok {
				return 0
			}
			sum += v
		}
	}
	return sum
}

// tieDashQueues ties the IRQs tieIRQs left alone whose name is
// "<dev>-<q>" for a netdev dev with more than q rx queues: the per-queue
// MSI-X vectors of Realtek's r8125/r8126/r8127 drivers (OpenWrt's
// package/kernel/r8125: one vector per rx ring, named "%s-%d" after the
// netdev), each serving rx queue q and tx queue q.
func tieDashQueues(irqs []IRQ, devs []Device) {
	idx := deviceIndex(devs)
	for i := range irqs {
		q := &irqs[i]
		if q.Device != "" {
			continue
		}
		dash := strings.LastIndexByte(q.Name, '-')
		if dash <= 0 {
			continue
		}
		d, ok := idx[q.Name[:dash]]
		if !ok {
			continue
		}
		n, ok := queueIndex("rx-"+q.Name[dash+1:], "rx-")
		if !ok || n >= len(devs[d].RxQueues) || len(devs[d].RxQueues) < 2 {
			continue
		}
		q.Device, q.Queue, q.Direction = devs[d].Name, n, DirRxTx
	}
}

// clusterSiblings corrects Siblings on machines whose cores differ in
// capacity (big.LITTLE): arm64 numbers core_id inside each cluster, so a
// big and a little core can share (package, core_id) without being SMT
// threads of one core. There the kernel's own topology/thread_siblings_list
// is taken instead (read only on such machines).
func (f *reader) clusterSiblings(cpus []CPU, g *gaps) {
	caps := map[int]bool{}
	for _, c := range cpus {
		if c.Capacity > 0 {
			caps[c.Capacity] = true
		}
	}
	if len(caps) < 2 {
		return
	}
	for i := range cpus {
		c := &cpus[i]
		if !c.Online {
			continue
		}
		rel := cpuDevicesDir + "/cpu" + itoa(c.ID) + "/topology/thread_siblings_list"
		s, err := f.str(f.dir, rel)
		if err != nil {
			g.add(rel, err)
			continue
		}
		set, err := cpuset.ParseList(strings.TrimSpace(s))
		if err != nil {
			g.add(rel, &fs.PathError{Op: "parse", Path: rel, Err: err})
			continue
		}
		c.Siblings = nil
		for _, id := range set.CPUs() {
			if id != c.ID {
				c.Siblings = append(c.Siblings, id)
			}
		}
	}
}

// readEffective reads effective_affinity_list where a plan looks at it:
// IRQs refused by the kernel, and IRQs tied to a netdev without NAPI
// threads (whose receive work runs where the IRQ fires). Threaded
// devices' IRQs only wake their threads, so they are not read.
func (f *reader) readEffective(s *Snapshot, g *gaps) {
	threaded := map[string]bool{}
	for _, t := range s.NAPIThreads {
		if t.Device != "" {
			threaded[t.Device] = true
		}
	}
	for i := range s.IRQs {
		q := &s.IRQs[i]
		if q.Refused != "" || (q.Device != "" && !threaded[q.Device]) {
			f.readIRQEffective(q, g)
		}
	}
}
