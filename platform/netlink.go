package platform

import (
	"context"
	"errors"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// The kernel's own map of queues, NAPI instances, threads and IRQs: the
// netdev generic netlink family (Documentation/netlink/specs/netdev.yaml,
// internal/genetlink). queue-get (Linux 6.8) names the NAPI instance
// serving each rx and tx queue, for drivers that call
// netif_queue_set_napi(); napi-get (6.8) gives each NAPI instance's
// ifindex, IRQ and, when threaded, the PID of its kthread; qstats-get
// (6.9) per-queue counters; napi-get on 6.13+ the per-NAPI configuration.
//
// A Read of the real machine (root "/") asks the kernel, in the network
// namespace of the calling thread (the one whose /sys the root shows, see
// internal/netnstest), alongside the file reads. What netlink states wins
// over what the file reads inferred: a thread's device and direction, an
// IRQ's device, queue and direction, and (in the pairing) which thread
// serves which queue; every place where the inference said otherwise is
// listed in NetlinkInfo.Disagreements. Where netlink states nothing (an
// older kernel, a driver that does not call netif_queue_set_napi(), a
// transmit-only NAPI, which has no id) the inference stands.
//
// Every build asks netlink (there is no build without it): the requests,
// their decoding and the netlink pairing cost about 21 KB of a mipsle
// router binary after xz -9e (docs/netlink.md).
//
// A snapshot carries what netlink said (RxQueue.NAPIID, TxQueue.NAPIID,
// Snapshot.Netlink), so `plan --snapshot` replays it on any machine.

// Sources of a queue's pairing with its thread or IRQ: "netlink", or the
// name of the inference rule.
const (
	SourceNetlink = "netlink"
	// SourceNAPIOrder: rx queue i is served by the device's i-th rx
	// thread in NAPI id order.
	SourceNAPIOrder = "napi-id-order"
	// SourceTxOrder: tx queue i is served by the device's i-th tx thread
	// (plan's pairing rules, plan/pairing.go).
	SourceTxOrder = "tx-thread-order"
	// SourceSingleTx: the device's one tx thread serves every tx queue.
	SourceSingleTx = "single-tx-thread"
	// SourceIRQName: the IRQ's name names the queue ("eth0-rx-1").
	SourceIRQName = "irq-name"
	// SourceDeviceIRQ: the whole-device IRQ of a single-queue device.
	SourceDeviceIRQ = "device-irq"
)

// NetlinkInfo is what the netdev netlink family said on the machine the
// snapshot was read on. A nil *NetlinkInfo: not asked (a fixture root, or
// a snapshot written before this field).
type NetlinkInfo struct {
	// Status is "ok", or "unavailable: <why>" (e.g. a kernel before 6.3
	// has no netdev family, one before 6.8 no queue-get).
	Status string `json:"status"`
	// Ops are the netdev commands the kernel implements, of those used:
	// "queue-get", "napi-get", "qstats-get", "napi-set".
	Ops []string `json:"ops,omitempty"`
	// NAPIs are the NAPI instances napi-get listed, by ifindex then id.
	NAPIs []NAPI `json:"napis,omitempty"`
	// Disagreements lists where the sysfs/procfs inference said otherwise
	// than netlink (netlink won), one sentence each.
	Disagreements []string `json:"disagreements,omitempty"`
}

// NAPI is one NAPI instance as napi-get states it.
type NAPI struct {
	_       outline.NoCompare
	ID      int `json:"id"`
	Ifindex int `json:"ifindex"`
	// Device is the netdev of Ifindex; "" when it is not under
	// sys/class/net.
	Device string `json:"device,omitempty"`
	// IRQ is the interrupt the NAPI is attached to; -1 when none.
	IRQ int `json:"irq"`
	// PID is the NAPI's kthread in threaded mode; 0 otherwise.
	PID int `json:"pid,omitempty"`
	// The per-NAPI configuration (Linux 6.13+; irq-suspend-timeout 6.14,
	// threaded 6.17); nil when the kernel does not report it.
	DeferHardIRQs       *uint32 `json:"defer_hard_irqs,omitempty"`
	GROFlushTimeoutNS   *uint64 `json:"gro_flush_timeout_ns,omitempty"`
	IRQSuspendTimeoutNS *uint64 `json:"irq_suspend_timeout_ns,omitempty"`
	Threaded            *uint32 `json:"threaded,omitempty"`
}

// NAPIKnobs are the per-NAPI knobs SetNAPIKnobs writes (netlink
// napi-set, Linux 6.13+).
type NAPIKnobs struct {
	DeferHardIRQs     uint32 `json:"defer_hard_irqs"`
	GROFlushTimeoutNS uint64 `json:"gro_flush_timeout_ns"`
}

// ErrNAPIKnobsUnsupported is wrapped by SetNAPIKnobs on a kernel (or a
// build) without napi-set.
var ErrNAPIKnobsUnsupported = errors.New("per-NAPI knobs not supported by this kernel (napi-set needs Linux 6.13)")

// QueueStats are one queue's counters from netlink qstats-get (Linux
// 6.9+, for drivers that keep them): an rx queue's received packets and
// bytes and the packets the device dropped on it (rx-packets, rx-bytes,
// rx-hw-drops), a tx queue's sent ones (tx-*). They count since the
// queue's last reconfiguration. HWDrops is -1 when the driver does not
// report drops.
type QueueStats struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	HWDrops int64  `json:"hw_drops"`
}

// HasNetlink reports whether the kernel stated this device's queue map:
// at least one of its queues has a NAPI id from queue-get.
func (d *Device) HasNetlink() bool {
	for _, q := range d.RxQueues {
		if q.NAPIID > 0 {
			return true
		}
	}
	for _, q := range d.TxQueues {
		if q.NAPIID > 0 {
			return true
		}
	}
	return false
}

// netlinkSource asks the kernel; stats says whether qstats-get is wanted.
type netlinkSource func(ctx context.Context, stats bool) *netlinkData
