//go:build !router || tune

package platform

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"time"

	"github.com/packet-steering/packet-steering/internal/genetlink"
)

// kernelNetlinkSource is the netlink source of a Read of "/".
func kernelNetlinkSource() netlinkSource { return kernelNetlink }

// netlinkTimeout bounds all of one Read's netlink requests.
const netlinkTimeout = 2 * time.Second

// netlinkData is the raw answer of one Read's netlink requests.
type netlinkData struct {
	status string
	ops    []string
	queues []genetlink.Queue
	napis  []genetlink.NAPI
	stats  []genetlink.QStats
	gaps   gaps
}

// netlinkPath names netlink requests in gaps.
const netlinkPath = "netlink:netdev"

// kernelNetlink asks the running kernel, in the calling thread's network
// namespace.
func kernelNetlink(ctx context.Context, stats bool) *netlinkData {
	ctx, cancel := context.WithTimeout(ctx, netlinkTimeout)
	defer cancel()
	d := &netlinkData{}
	c, err := genetlink.Dial()
	if err != nil {
		d.status = "unavailable: " + err.Error()
		return d
	}
	defer c.Close()
	nd, err := genetlink.OpenNetdev(ctx, c)
	if errors.Is(err, fs.ErrNotExist) {
		d.status = "unavailable: no netdev family (Linux before 6.3)"
		return d
	}
	if err != nil {
		d.status = "unavailable: " + err.Error()
		d.gaps.add(netlinkPath, err)
		return d
	}
	for _, op := range []string{"queue-get", "napi-get", "qstats-get", "napi-set"} {
		if nd.Supports(op) {
			d.ops = append(d.ops, op)
		}
	}
	if !nd.Supports("queue-get") || !nd.Supports("napi-get") {
		d.status = "unavailable: no queue-get/napi-get (Linux before 6.8)"
		return d
	}
	if d.queues, err = nd.Queues(ctx, 0); err != nil {
		d.gaps.add(netlinkPath+" queue-get", err)
	}
	if d.napis, err = nd.NAPIs(ctx, 0); err != nil {
		d.gaps.add(netlinkPath+" napi-get", err)
	}
	if stats && nd.Supports("qstats-get") {
		if d.stats, err = nd.QStats(ctx, 0); err != nil {
			d.gaps.add(netlinkPath+" qstats-get", err)
		}
	}
	if len(d.gaps.list) != 0 {
		d.status = "unavailable: " + d.gaps.list[0].Error
		d.queues, d.napis = nil, nil
		return d
	}
	d.status = "ok"
	return d
}

// applyNetlink records what netlink said in s and lets it win over the
// inference of tieThreads, tieIRQs and classifyThreads. Devices must carry
// their Ifindex.
func applyNetlink(s *Snapshot, d *netlinkData, g *gaps) {
	if d == nil {
		return
	}
	g.list = append(g.list, d.gaps.list...)
	info := &NetlinkInfo{Status: d.status, Ops: d.ops}
	s.Netlink = info
	byIfindex := map[int]int{}
	for i := range s.Devices {
		if s.Devices[i].Ifindex > 0 {
			byIfindex[s.Devices[i].Ifindex] = i
		}
	}
	// Queue -> NAPI id, and per NAPI id the queues it serves.
	type served struct {
		dev    int
		rx, tx []int
	}
	napiQueues := map[int]*served{}
	for _, q := range d.queues {
		di, ok := byIfindex[int(q.Ifindex)]
		if !ok || q.NAPIID == 0 {
			continue
		}
		dev := &s.Devices[di]
		id := int(q.NAPIID)
		sv := napiQueues[id]
		if sv == nil {
			sv = &served{dev: di}
			napiQueues[id] = sv
		}
		switch q.Type {
		case genetlink.QueueRX:
			if i := rxPos(dev, int(q.ID)); i >= 0 {
				dev.RxQueues[i].NAPIID = id
				sv.rx = append(sv.rx, int(q.ID))
			}
		case genetlink.QueueTX:
			if i := txPos(dev, int(q.ID)); i >= 0 {
				dev.TxQueues[i].NAPIID = id
				sv.tx = append(sv.tx, int(q.ID))
			}
		}
	}
	for _, st := range d.stats {
		di, ok := byIfindex[int(st.Ifindex)]
		if !ok || len(st.Counters) == 0 {
			continue
		}
		dev := &s.Devices[di]
		switch st.Type {
		case genetlink.QueueRX:
			if i := rxPos(dev, int(st.QueueID)); i >= 0 {
				dev.RxQueues[i].Stats = st.Counters
			}
		case genetlink.QueueTX:
			if i := txPos(dev, int(st.QueueID)); i >= 0 {
				dev.TxQueues[i].Stats = st.Counters
			}
		}
	}
	threadByPID := map[int]int{}
	for i := range s.NAPIThreads {
		threadByPID[s.NAPIThreads[i].PID] = i
	}
	irqByNumber := map[int]int{}
	for i := range s.IRQs {
		irqByNumber[s.IRQs[i].Number] = i
	}
	disagree := func(format string, args ...any) {
		info.Disagreements = append(info.Disagreements, fmt.Sprintf(format, args...))
	}
	for _, n := range d.napis {
		v := NAPI{ID: int(n.ID), Ifindex: int(n.Ifindex), IRQ: n.IRQ, PID: n.PID,
			DeferHardIRQs: n.Config.DeferHardIRQs, GROFlushTimeoutNS: n.Config.GROFlushTimeout,
			IRQSuspendTimeoutNS: n.Config.IRQSuspendTimeout, Threaded: n.Config.Threaded}
		di, known := byIfindex[v.Ifindex]
		if known {
			v.Device = s.Devices[di].Name
		}
		info.NAPIs = append(info.NAPIs, v)
		if !known {
			continue
		}
		sv := napiQueues[v.ID]
		dir := ""
		queue := -1
		if sv != nil && sv.dev == di {
			sort.Ints(sv.rx)
			sort.Ints(sv.tx)
			switch {
			case len(sv.rx) > 0 && len(sv.tx) > 0 && sv.rx[0] == sv.tx[0]:
				dir, queue = DirRxTx, sv.rx[0]
			case len(sv.rx) > 0:
				dir, queue = DirRX, sv.rx[0]
			case len(sv.tx) > 0:
				dir, queue = DirTX, sv.tx[0]
			}
		}
		if ti, ok := threadByPID[v.PID]; ok && v.PID > 0 {
			t := &s.NAPIThreads[ti]
			if t.Device != v.Device {
				if t.Device != "" {
					disagree("thread %s (pid %d): inferred device %s, netlink says %s", t.Name, t.PID, t.Device, v.Device)
				}
				t.Device = v.Device
			}
			if t.NAPIID != v.ID {
				if t.NAPIID >= 0 {
					disagree("thread %s (pid %d): named NAPI id %d, netlink says %d", t.Name, t.PID, t.NAPIID, v.ID)
				}
				t.NAPIID = v.ID
			}
			if want := threadDir(dir); want != "" && want != t.Direction {
				disagree("thread %s (pid %d): inferred %s, netlink says it serves %s queues", t.Name, t.PID, t.Direction, want)
				t.Direction = want
			}
		}
		if qi, ok := irqByNumber[v.IRQ]; ok && v.IRQ >= 0 {
			q := &s.IRQs[qi]
			if q.Device != v.Device {
				if q.Device != "" {
					disagree("IRQ %d (%s): inferred device %s, netlink says %s", q.Number, q.Name, q.Device, v.Device)
				}
				q.Device, q.Queue, q.Direction = v.Device, -1, ""
			}
			if queue >= 0 && (q.Queue != queue || q.Direction != dir) {
				if q.Queue >= 0 {
					disagree("IRQ %d (%s): inferred %s queue %d, netlink says %s queue %d", q.Number, q.Name, q.Direction, q.Queue, dir, queue)
				}
				q.Queue, q.Direction = queue, dir
			}
			q.QueueSource = SourceNetlink
		}
	}
	sort.Slice(info.NAPIs, func(a, b int) bool {
		x, y := info.NAPIs[a], info.NAPIs[b]
		if x.Ifindex != y.Ifindex {
			return x.Ifindex < y.Ifindex
		}
		return x.ID < y.ID
	})
	info.Disagreements = append(info.Disagreements, orderDisagreements(s)...)
}

// threadDir is the thread Direction for the direction of the queues a
// NAPI serves ("" when netlink said none).
func threadDir(dir string) string {
	switch dir {
	case DirRX, DirRxTx:
		return DirRX
	case DirTX:
		return DirTX
	}
	return ""
}

// orderDisagreements compares, per device, the rx queues' NAPI ids from
// netlink with the NAPI-id-order rule: rx queue i is served by the i-th rx
// thread in NAPI id order.
func orderDisagreements(s *Snapshot) []string {
	var out []string
	byDev := map[string][]*NAPIThread{}
	for i := range s.NAPIThreads {
		t := &s.NAPIThreads[i]
		if t.Device != "" && !t.IsTX() {
			byDev[t.Device] = append(byDev[t.Device], t)
		}
	}
	for di := range s.Devices {
		d := &s.Devices[di]
		rx := byDev[d.Name]
		if len(rx) == 0 {
			continue
		}
		sort.SliceStable(rx, func(a, b int) bool { return rx[a].NAPIID < rx[b].NAPIID })
		for i, q := range d.RxQueues {
			if q.NAPIID <= 0 || i >= len(rx) || rx[i].NAPIID == q.NAPIID {
				continue
			}
			out = append(out, fmt.Sprintf("%s %s: inferred %s (%s), netlink says NAPI %d", d.Name, q.Name, rx[i].Name, SourceNAPIOrder, q.NAPIID))
		}
	}
	return out
}

func rxPos(d *Device, index int) int {
	for i := range d.RxQueues {
		if d.RxQueues[i].Index == index {
			return i
		}
	}
	return -1
}

func txPos(d *Device, index int) int {
	for i := range d.TxQueues {
		if d.TxQueues[i].Index == index {
			return i
		}
	}
	return -1
}

// NAPIByID returns the NAPI instance with the id, or nil.
func (n *NetlinkInfo) NAPIByID(id int) *NAPI {
	if n == nil {
		return nil
	}
	for i := range n.NAPIs {
		if n.NAPIs[i].ID == id {
			return &n.NAPIs[i]
		}
	}
	return nil
}

// String is a one-line summary, e.g. "ok, 8 NAPIs" for logs and tests.
func (n *NetlinkInfo) String() string {
	if n == nil {
		return "not asked"
	}
	if n.Status != "ok" {
		return n.Status
	}
	return n.Status + ", " + strconv.Itoa(len(n.NAPIs)) + " NAPIs"
}
