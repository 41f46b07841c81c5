package plan

import (
	"sort"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// The one pairing of queues with the NAPI threads and IRQs that serve them.
// The plan (rss-per-cpu), the applier (which device a thread or IRQ belongs
// to), `queues`, get_queues and so the LuCI page all take it from here.
// The stock modes keep the stock script's own thread matching (stock.go):
// that is part of the behaviour they reproduce.
//
// A netdev's threads are the snapshot's threads tied to it
// (NAPIThread.Device); platform tells rx threads from tx-completion ones
// (NAPIThread.Direction, platform/napi.go classifyThreads).
//
//   - rx queue i is served by the i-th rx thread in NAPI id order: a
//     multi-queue driver adds its NAPI instances queue by queue, and ids are
//     handed out in increasing order, while PIDs need not follow the queue
//     order (threads created by writing `threaded` come last-added first);
//   - tx queue i is served by the i-th tx thread. Tx threads with NAPI ids
//     (mtk_soc_eth, igc tx vectors) are taken in id order. Tx threads without
//     one are all named napi/<dev>-0 (virtio_net, ipqess): the kernel
//     creates each right next to its queue's rx thread, in the order the
//     rx threads were created, so they are taken in PID order, ascending
//     when the rx threads' PIDs ascend with their queue and descending
//     when they descend. One tx thread for several tx queues (mtk_soc_eth's
//     single tx NAPI) serves every tx queue of the device;
//   - rx queue i's IRQ is the IRQ tied to that rx queue (DirRX or DirRxTx),
//     else the whole-device IRQ when the device has a single rx queue; tx
//     queue i's IRQ is the one tied to tx queue i (DirTX or DirRxTx).

// QueuePair is one queue with the NAPI thread and the IRQ serving it; either
// may be nil.
type QueuePair struct {
	_      outline.NoCompare
	Thread *platform.NAPIThread
	IRQ    *platform.IRQ
	// ThreadSource and IRQSource say how the pairing is known:
	// platform.SourceNetlink, or the inference rule's name
	// (platform.SourceNAPIOrder, ...); "" when nothing is paired.
	ThreadSource, IRQSource string
}

// DevicePairing is one netdev's queues with their threads and IRQs.
type DevicePairing struct {
	// Rx and Tx are indexed like the device's RxQueues and TxQueues.
	Rx, Tx []QueuePair
	// RxThreads are the device's rx threads in NAPI id order (queue order),
	// including any beyond the number of rx queues.
	RxThreads []*platform.NAPIThread
	// TxThreads are the device's tx threads in tx queue order.
	TxThreads []*platform.NAPIThread
}

// Pairing is the pairing of every netdev of a snapshot. A netdev is paired
// when first asked for (most netdevs of a router have no thread and no
// IRQ, and most callers ask for a few). Not safe for concurrent use.
type Pairing struct {
	snap      *platform.Snapshot
	devs      map[string]*DevicePairing
	threadDev map[int]string // PID -> netdev
	irqDev    map[int]string // IRQ number -> netdev
	rx, tx    map[string][]*platform.NAPIThread
	irqs      map[string][]*platform.IRQ
	index     map[string]int // netdev -> position in snap.Devices, made on first use
}

// PairQueues pairs every netdev's queues with its threads and IRQs. It reads
// only the snapshot; the pointers point into it.
func PairQueues(s *platform.Snapshot) *Pairing {
	p := &Pairing{snap: s, devs: map[string]*DevicePairing{},
		threadDev: make(map[int]string, len(s.NAPIThreads)), irqDev: map[int]string{},
		rx: map[string][]*platform.NAPIThread{}, tx: map[string][]*platform.NAPIThread{},
		irqs: map[string][]*platform.IRQ{}}
	for i := range s.NAPIThreads {
		t := &s.NAPIThreads[i]
		if t.Device == "" {
			continue
		}
		p.threadDev[t.PID] = t.Device
		if t.IsTX() {
			p.tx[t.Device] = append(p.tx[t.Device], t)
		} else {
			p.rx[t.Device] = append(p.rx[t.Device], t)
		}
	}
	for i := range s.IRQs {
		q := &s.IRQs[i]
		if q.Device == "" {
			continue
		}
		p.irqDev[q.Number] = q.Device
		p.irqs[q.Device] = append(p.irqs[q.Device], q)
	}
	return p
}

// HasThreads reports whether any NAPI thread serves the netdev.
func (p *Pairing) HasThreads(name string) bool {
	return len(p.rx[name]) > 0 || len(p.tx[name]) > 0
}

// Device returns a netdev's pairing; an unknown name gives an empty one.
func (p *Pairing) Device(name string) *DevicePairing {
	if dp, ok := p.devs[name]; ok {
		return dp
	}
	if p.index == nil {
		p.index = make(map[string]int, len(p.snap.Devices))
		for i := range p.snap.Devices {
			p.index[p.snap.Devices[i].Name] = i
		}
	}
	dp := &DevicePairing{}
	if i, ok := p.index[name]; ok {
		dp = pairDevice(&p.snap.Devices[i], p.rx[name], p.tx[name], p.irqs[name])
		napiOrderFix(p.snap, &p.snap.Devices[i], dp)
	}
	p.devs[name] = dp
	return dp
}

// pairDevice pairs one netdev (see the rules above).
func pairDevice(d *platform.Device, rx, tx []*platform.NAPIThread, irqs []*platform.IRQ) *DevicePairing {
	dp := &DevicePairing{Rx: make([]QueuePair, len(d.RxQueues)), Tx: make([]QueuePair, len(d.TxQueues))}
	sort.SliceStable(rx, func(i, j int) bool {
		if rx[i].NAPIID != rx[j].NAPIID {
			return rx[i].NAPIID < rx[j].NAPIID
		}
		return rx[i].PID < rx[j].PID
	})
	dp.RxThreads = rx
	descending := pidsDescend(rx)
	sort.SliceStable(tx, func(i, j int) bool {
		a, b := tx[i], tx[j]
		if a.NAPIID > 0 && b.NAPIID > 0 && a.NAPIID != b.NAPIID {
			return a.NAPIID < b.NAPIID
		}
		if descending && a.NAPIID <= 0 && b.NAPIID <= 0 {
			return a.PID > b.PID
		}
		return a.PID < b.PID
	})
	dp.TxThreads = tx
	for i := range dp.Rx {
		if i < len(rx) {
			dp.Rx[i].Thread, dp.Rx[i].ThreadSource = rx[i], platform.SourceNAPIOrder
		}
	}
	for i := range dp.Tx {
		switch {
		case len(tx) == 1:
			dp.Tx[i].Thread, dp.Tx[i].ThreadSource = tx[0], platform.SourceSingleTx
		case i < len(tx):
			dp.Tx[i].Thread, dp.Tx[i].ThreadSource = tx[i], platform.SourceTxOrder
		}
	}
	var whole *platform.IRQ
	for _, q := range irqs {
		if r := q.RxQueue(); r >= 0 && r < len(dp.Rx) && dp.Rx[r].IRQ == nil {
			dp.Rx[r].IRQ = q
		}
		if t := q.TxQueue(); t >= 0 && t < len(dp.Tx) && dp.Tx[t].IRQ == nil {
			dp.Tx[t].IRQ = q
		}
		if q.Queue < 0 && whole == nil {
			whole = q
		}
	}
	if whole != nil && len(dp.Rx) == 1 && dp.Rx[0].IRQ == nil {
		dp.Rx[0].IRQ, dp.Rx[0].IRQSource = whole, platform.SourceDeviceIRQ
	}
	pairNetlink(d, dp)
	return dp
}

// TxQueuesOf lists the positions of the tx queues a thread serves.
func (dp *DevicePairing) TxQueuesOf(t *platform.NAPIThread) []int {
	var out []int
	for i, q := range dp.Tx {
		if q.Thread == t {
			out = append(out, i)
		}
	}
	return out
}

// ActionDevice is the netdev an action belongs to: its Device, or for a
// NAPI thread or an IRQ the netdev it serves ("" when none).
func (p *Pairing) ActionDevice(a Action) string {
	if a.Device != "" {
		return a.Device
	}
	switch a.Kind {
	case KindNAPIAffinity:
		return p.threadDev[a.PID]
	case KindIRQAffinity:
		return p.irqDev[a.IRQ]
	}
	return ""
}

// Unit is the rollback unit of an action: its netdev, else the action's own
// target; sysctls sort last.
func (p *Pairing) Unit(a Action) string {
	switch a.Kind {
	case KindSysctl:
		return "\xffsysctl " + a.Key
	case KindNAPIAffinity:
		if u := p.ActionDevice(a); u != "" {
			return u
		}
		return "thread " + outline.Itoa(a.PID)
	case KindIRQAffinity:
		if u := p.ActionDevice(a); u != "" {
			return u
		}
		return "irq " + outline.Itoa(a.IRQ)
	}
	return a.Device
}

// pidsDescend reports whether the rx threads' PIDs (in NAPI id order)
// mostly run downwards: by a majority of neighbouring pairs, so that one
// thread created again later (per-NAPI threaded toggled off and on,
// Linux 6.17+, gets a new, higher PID) does not turn the direction.
func pidsDescend(rx []*platform.NAPIThread) bool {
	down := 0
	for i := 1; i < len(rx); i++ {
		if rx[i].PID < rx[i-1].PID {
			down++
		} else {
			down--
		}
	}
	return down > 0 || down == 0 && len(rx) > 1 && rx[0].PID > rx[len(rx)-1].PID
}
