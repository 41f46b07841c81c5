package platform

import (
	"context"
	"errors"
	"io/fs"
	"sort"
	"time"

	"github.com/packet-steering/packet-steering/internal/genetlink"
	"github.com/packet-steering/packet-steering/internal/outline"
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
// their Ifindex. The lists are short (tens of devices, NAPIs, threads and
// IRQs on a router), so they are searched rather than indexed.
func applyNetlink(s *Snapshot, d *netlinkData, g *gaps) {
	if d == nil {
		return
	}
	g.list = append(g.list, d.gaps.list...)
	info := &NetlinkInfo{Status: d.status, Ops: d.ops}
	s.Netlink = info
	for _, q := range d.queues {
		dev := deviceByIfindex(s, q.Ifindex)
		if dev == nil || q.NAPIID == 0 {
			continue
		}
		if i := queuePos(dev, q.Type, q.ID); i >= 0 && q.Type == genetlink.QueueRX {
			dev.RxQueues[i].NAPIID = int(q.NAPIID)
		} else if i >= 0 {
			dev.TxQueues[i].NAPIID = int(q.NAPIID)
		}
	}
	for _, st := range d.stats {
		dev := deviceByIfindex(s, st.Ifindex)
		if dev == nil {
			continue
		}
		i := queuePos(dev, st.Type, st.QueueID)
		switch {
		case i < 0:
		case st.Type == genetlink.QueueRX && st.Has(genetlink.QStatRxPackets):
			dev.RxQueues[i].Stats = queueStats(st.RxPackets, st.RxBytes, st.RxHWDrops, st.Has(genetlink.QStatRxHWDrops))
		case st.Type == genetlink.QueueTX && st.Has(genetlink.QStatTxPackets):
			dev.TxQueues[i].Stats = queueStats(st.TxPackets, st.TxBytes, st.TxHWDrops, st.Has(genetlink.QStatTxHWDrops))
		}
	}
	disagree := func(what, inferred, netlink string) {
		info.Disagreements = append(info.Disagreements, what+": inferred "+inferred+", netlink says "+netlink)
	}
	for _, n := range d.napis {
		c := n.Config
		v := NAPI{ID: int(n.ID), Ifindex: int(n.Ifindex), IRQ: n.IRQ, PID: n.PID, DeferHardIRQs: c.DeferHardIRQs,
			GROFlushTimeoutNS: c.GROFlushTimeout, IRQSuspendTimeoutNS: c.IRQSuspendTimeout, Threaded: c.Threaded}
		dev := deviceByIfindex(s, n.Ifindex)
		if dev != nil {
			v.Device = dev.Name
		}
		info.NAPIs = append(info.NAPIs, v)
		if dev == nil {
			continue
		}
		// The queues the NAPI serves (the lowest of each direction).
		rx, tx := -1, -1
		for _, q := range dev.RxQueues {
			if q.NAPIID == v.ID && rx < 0 {
				rx = q.Index
			}
		}
		for _, q := range dev.TxQueues {
			if q.NAPIID == v.ID && tx < 0 {
				tx = q.Index
			}
		}
		dir, queue, threadDir := "", rx, DirRX
		switch {
		case rx >= 0 && rx == tx:
			dir = DirRxTx
		case rx >= 0:
			dir = DirRX
		case tx >= 0:
			dir, queue, threadDir = DirTX, tx, DirTX
		}
		for i := range s.NAPIThreads {
			t := &s.NAPIThreads[i]
			if v.PID <= 0 || t.PID != v.PID {
				continue
			}
			what := "thread " + t.Name + " (pid " + outline.Itoa(t.PID) + ")"
			if t.Device != v.Device && t.Device != "" {
				disagree(what, "device "+t.Device, v.Device)
			}
			if t.NAPIID != v.ID && t.NAPIID >= 0 {
				disagree(what, "NAPI id "+outline.Itoa(t.NAPIID), outline.Itoa(v.ID))
			}
			if dir != "" && t.Direction != threadDir {
				disagree(what, t.Direction, threadDir)
				t.Direction = threadDir
			}
			t.Device, t.NAPIID = v.Device, v.ID
		}
		for i := range s.IRQs {
			q := &s.IRQs[i]
			if v.IRQ < 0 || q.Number != v.IRQ {
				continue
			}
			what := "IRQ " + outline.Itoa(q.Number) + " (" + q.Name + ")"
			if q.Device != v.Device {
				if q.Device != "" {
					disagree(what, "device "+q.Device, v.Device)
				}
				q.Device, q.Queue, q.Direction = v.Device, -1, ""
			}
			if dir != "" && (q.Queue != queue || q.Direction != dir) {
				if q.Queue >= 0 {
					disagree(what, q.Direction+" queue "+outline.Itoa(q.Queue), dir+" queue "+outline.Itoa(queue))
				}
				q.Queue, q.Direction = queue, dir
			}
			q.QueueSource = SourceNetlink
		}
	}
	sort.Slice(info.NAPIs, func(a, b int) bool {
		x, y := info.NAPIs[a], info.NAPIs[b]
		return x.Ifindex < y.Ifindex || x.Ifindex == y.Ifindex && x.ID < y.ID
	})
	info.Disagreements = append(info.Disagreements, orderDisagreements(s)...)
}

// deviceByIfindex is the netdev with the ifindex, or nil.
func deviceByIfindex(s *Snapshot, ifindex uint32) *Device {
	for i := range s.Devices {
		if ifindex > 0 && s.Devices[i].Ifindex == int(ifindex) {
			return &s.Devices[i]
		}
	}
	return nil
}

// queuePos is the position in d.RxQueues (typ QueueRX) or d.TxQueues of
// the queue with the index; -1 when there is none.
//
//go:noinline
func queuePos(d *Device, typ string, index uint32) int {
	if typ == genetlink.QueueRX {
		for i := range d.RxQueues {
			if d.RxQueues[i].Index == int(index) {
				return i
			}
		}
		return -1
	}
	for i := range d.TxQueues {
		if d.TxQueues[i].Index == int(index) {
			return i
		}
	}
	return -1
}

// queueStats is a queue's Stats; drops -1 when not reported.
func queueStats(packets, bytes, drops uint64, hasDrops bool) *QueueStats {
	q := &QueueStats{Packets: packets, Bytes: bytes, HWDrops: -1}
	if hasDrops {
		q.HWDrops = int64(min(drops, 1<<63-1))
	}
	return q
}

// orderDisagreements compares, per device, the rx queues' NAPI ids from
// netlink with the NAPI-id-order rule: rx queue i is served by the i-th rx
// thread in NAPI id order.
func orderDisagreements(s *Snapshot) []string {
	var out []string
	var rx []*NAPIThread
	for di := range s.Devices {
		d := &s.Devices[di]
		rx = rx[:0]
		for i := range s.NAPIThreads {
			if t := &s.NAPIThreads[i]; t.Device == d.Name && !t.IsTX() {
				rx = append(rx, t)
			}
		}
		sort.Slice(rx, func(a, b int) bool { return rx[a].NAPIID < rx[b].NAPIID })
		for i, q := range d.RxQueues {
			if q.NAPIID > 0 && i < len(rx) && rx[i].NAPIID != q.NAPIID {
				out = append(out, d.Name+" "+q.Name+": inferred "+rx[i].Name+" ("+SourceNAPIOrder+"), netlink says NAPI "+outline.Itoa(q.NAPIID))
			}
		}
	}
	return out
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
