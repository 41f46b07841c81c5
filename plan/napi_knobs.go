package plan

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// Per-NAPI knobs in custom mode. A `config device` section may set, for
// every NAPI instance of its device (options) or for one (list items
// 'rx-N=VALUE', the NAPI serving rx queue N, or 'napi-ID=VALUE'):
//
//	defer_hard_irqs    queue_defer_hard_irqs    netlink napi-set defer-hard-irqs (6.13+)
//	gro_flush_timeout  queue_gro_flush_timeout  gro-flush-timeout, ns (6.13+)
//	napi_threaded      queue_napi_threaded      threaded, 0 or 1 (6.17+)
//
// What they trade (Documentation/networking/napi.rst, "Software IRQ
// coalescing"): with defer-hard-irqs N > 0 and gro-flush-timeout T > 0 a
// NAPI that polled nothing keeps its IRQ masked and is polled again from
// a timer after T, up to N times, so a busy queue costs fewer interrupts
// at up to T of added latency per packet; 0 and 0 (the kernel's default)
// is an interrupt per burst. napi_threaded moves one NAPI instance into
// its own kernel thread (1) or back into softirq (0), so a device's busy
// queues can have threads while its idle ones stay in softirq.
//
// The NAPI instances are those netlink napi-get listed for the device
// (platform.NetlinkInfo.NAPIs); a queue's NAPI is the one netlink
// queue-get names, else, when the device has as many NAPIs as rx queues,
// the one in the same place in id order, else its paired thread's. A kernel
// without the knob (no napi-set before 6.13, no per-NAPI threaded before
// 6.17), a snapshot without a netlink map and a device without NAPI
// instances get the hint napi-knobs-unsupported and no action: nothing is
// written.

// Limits of the per-NAPI knob values: the kernel's own for defer-hard-irqs
// (s32 max), one second for gro-flush-timeout (the kernel takes any u64,
// but beyond a few hundred microseconds a timeout only adds latency).
const (
	MaxDeferHardIRQs     = 1<<31 - 1
	MaxGROFlushTimeoutNS = 1_000_000_000
)

// HintNAPIKnobsUnsupported: a custom per-NAPI knob this kernel, snapshot
// or device does not have; nothing is written for it.
const HintNAPIKnobsUnsupported = "napi-knobs-unsupported"

// NAPIKnobName is the netlink attribute name (platform.NAPIKnob*) of a
// per-NAPI action kind; "" for other kinds.
func NAPIKnobName(kind ActionKind) string {
	switch kind {
	case KindNAPIDeferHardIRQs:
		return platform.NAPIKnobDeferHardIRQs
	case KindNAPIGROFlushTimeout:
		return platform.NAPIKnobGROFlushTimeout
	case KindNAPIThreaded:
		return platform.NAPIKnobThreaded
	}
	return ""
}

// IsNAPIKnob reports whether kind is a per-NAPI knob.
func IsNAPIKnob(kind ActionKind) bool { return NAPIKnobName(kind) != "" }

// napiTarget is Target for a per-NAPI knob.
func napiTarget(a Action) string {
	t := a.Device + " napi " + outline.Itoa(a.NAPIID)
	if a.Queue != "" {
		t += " (" + a.Queue + ")"
	}
	return t
}

// DeviceNAPI is one NAPI instance of a device with the rx queue it serves.
type DeviceNAPI struct {
	_    outline.NoCompare
	NAPI *platform.NAPI
	// Queue is the rx queue ("rx-N") the NAPI serves; "" when unknown.
	Queue string
	// Source says how the queue is known: platform.SourceNetlink,
	// the paired thread's source, or platform.SourceNAPIOrder.
	Source string
}

// DeviceNAPIs lists the NAPI instances netlink napi-get reported for d, in
// id order, each with the rx queue it serves where known (see above).
func DeviceNAPIs(s *platform.Snapshot, pair *Pairing, d *platform.Device) []DeviceNAPI {
	if s.Netlink == nil {
		return nil
	}
	var out []DeviceNAPI
	for i := range s.Netlink.NAPIs {
		if n := &s.Netlink.NAPIs[i]; n.Device == d.Name && n.Device != "" {
			out = append(out, DeviceNAPI{NAPI: n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NAPI.ID < out[j].NAPI.ID })
	find := func(id int) int {
		for i := range out {
			if id > 0 && out[i].NAPI.ID == id && out[i].Queue == "" {
				return i
			}
		}
		return -1
	}
	// What queue-get states first; then, with as many NAPIs as rx
	// queues, the rest in id order (veth, virtio_net before 7.x: every
	// NAPI is listed, threaded or not); else the paired threads.
	var rest []int
	for i, q := range d.RxQueues {
		if j := find(q.NAPIID); j >= 0 {
			out[j].Queue, out[j].Source = q.Name, platform.SourceNetlink
		} else {
			rest = append(rest, i)
		}
	}
	if len(out) == len(d.RxQueues) {
		k := 0
		for j := range out {
			if out[j].Queue == "" && k < len(rest) {
				out[j].Queue, out[j].Source = d.RxQueues[rest[k]].Name, platform.SourceNAPIOrder
				k++
			}
		}
		return out
	}
	dp := pair.Device(d.Name)
	for _, i := range rest {
		if i < len(dp.Rx) && dp.Rx[i].Thread != nil {
			if j := find(dp.Rx[i].Thread.NAPIID); j >= 0 {
				out[j].Queue, out[j].Source = d.RxQueues[i].Name, dp.Rx[i].ThreadSource
			}
		}
	}
	return out
}

// napiKinds, napiOpts and napiLists are the per-NAPI knobs with their
// device options and per-NAPI lists, in the same order.
var (
	napiKinds = [3]ActionKind{KindNAPIDeferHardIRQs, KindNAPIGROFlushTimeout, KindNAPIThreaded}
	napiOpts  = [3]string{"defer_hard_irqs", "gro_flush_timeout", "napi_threaded"}
	napiLists = [3]string{"queue_defer_hard_irqs", "queue_gro_flush_timeout", "queue_napi_threaded"}
)

// ParseNAPIKnob checks a per-NAPI knob value and returns it in the
// kernel's decimal form.
func ParseNAPIKnob(kind ActionKind, val string) (string, error) {
	limit := uint64(MaxDeferHardIRQs)
	switch kind {
	case KindNAPIGROFlushTimeout:
		limit = MaxGROFlushTimeoutNS
	case KindNAPIThreaded:
		limit = 1
	}
	n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
	if err != nil || n > limit {
		return "", outline.Errorf("want a whole number from 0 to %d", limit)
	}
	return outline.FormatUint(n, 10), nil
}

// napiUnsupported says why kind cannot be set on n on this kernel; "" when
// it can.
//
//go:noinline
func napiUnsupported(s *platform.Snapshot, kind ActionKind, n *platform.NAPI) string {
	switch {
	case s.Netlink == nil:
		return "the snapshot has no netlink map (not read from a running kernel)"
	case !slices.Contains(s.Netlink.Ops, "napi-set"):
		return "not supported by this kernel: netlink napi-set needs Linux 6.13 (netlink: " + s.Netlink.Status + ")"
	case kind == KindNAPIThreaded && n.Threaded == nil:
		return "not supported by this kernel: per-NAPI threaded needs Linux 6.17"
	case kind != KindNAPIThreaded && (n.DeferHardIRQs == nil || n.GROFlushTimeoutNS == nil):
		return "not supported by this kernel: napi-get reports no per-NAPI config (Linux 6.13)"
	}
	return ""
}

// napiCurrent is n's live value of kind as decimal text.
func napiCurrent(kind ActionKind, n *platform.NAPI) string {
	switch {
	case kind == KindNAPIDeferHardIRQs && n.DeferHardIRQs != nil:
		return outline.FormatUint(uint64(*n.DeferHardIRQs), 10)
	case kind == KindNAPIGROFlushTimeout && n.GROFlushTimeoutNS != nil:
		return outline.FormatUint(*n.GROFlushTimeoutNS, 10)
	case kind == KindNAPIThreaded && n.Threaded != nil:
		return outline.FormatUint(uint64(*n.Threaded), 10)
	}
	return ""
}

// applyNAPIOverrides plans the per-NAPI knobs of one `config device`
// section (custom mode); bad reports a value that does not parse.
func applyNAPIOverrides(b *builder, s *platform.Snapshot, d *platform.Device, o platform.DeviceOverride, bad func(opt, val string, err error)) {
	devVal := [3]string{o.DeferHardIRQs, o.GROFlushTimeout, o.NAPIThreaded}
	if devVal == [3]string{} && len(o.QueueNAPI) == 0 {
		return
	}
	napis := DeviceNAPIs(s, b.pairing(), d)
	keys := make([]string, 0, len(o.QueueNAPI))
	for k := range o.QueueNAPI {
		keys = append(keys, k)
	}
	outline.SortStrings(keys)
	// want[i][k]: NAPI i's value of knob k, the device option first, then
	// its own list items; asked[k]: the section sets knob k at all.
	want := make([][3]string, len(napis))
	var asked [3]bool
	set := func(j, k int, opt, raw, item string) {
		asked[k] = true
		v, err := ParseNAPIKnob(napiKinds[k], raw)
		if err == nil && j < 0 {
			err = outline.Errorf("%s has no NAPI instance %s (netlink lists %s)", d.Name, item, describeNAPIs(napis))
		}
		if err != nil {
			if item != "" {
				raw = item + "=" + raw
			}
			bad(opt, raw, err)
			return
		}
		for i := range want {
			if i == j || item == "" {
				want[i][k] = v
			}
		}
	}
	for k, raw := range devVal {
		if raw != "" {
			set(0, k, napiOpts[k], raw, "")
		}
	}
	for _, key := range keys {
		j := -1
		for i, n := range napis {
			if n.Queue == key || "napi-"+outline.Itoa(n.NAPI.ID) == key {
				j = i
			}
		}
		ov := o.QueueNAPI[key]
		for k, raw := range [3]string{ov.DeferHardIRQs, ov.GROFlushTimeout, ov.Threaded} {
			if raw != "" {
				set(j, k, napiLists[k], raw, key)
			}
		}
	}
	var why []string
	for k, kind := range napiKinds {
		if !asked[k] {
			continue
		}
		if len(napis) == 0 {
			w := napiUnsupported(s, kind, &platform.NAPI{})
			if w == "" || s.Netlink != nil && slices.Contains(s.Netlink.Ops, "napi-set") {
				w = "netlink lists no NAPI instance of " + d.Name
			}
			why = append(why, napiOpts[k]+": "+w)
		}
		for i, n := range napis {
			if want[i][k] == "" {
				continue
			}
			if w := napiUnsupported(s, kind, n.NAPI); w != "" {
				if w = napiOpts[k] + ": " + w; !slices.Contains(why, w) {
					why = append(why, w)
				}
				continue
			}
			b.put(actionKey{kind: kind, device: d.Name, napi: n.NAPI.ID}, Action{Kind: kind, Device: d.Name, Queue: n.Queue,
				NAPIID: n.NAPI.ID, Value: want[i][k], Current: napiCurrent(kind, n.NAPI)})
		}
	}
	if len(why) > 0 {
		b.hints = append(b.hints, Hint{ID: HintNAPIKnobsUnsupported, Device: d.Name,
			Text: "The per-NAPI knobs of device " + d.Name + " are not applied, nothing is written: " + strings.Join(why, "; ") + "."})
	}
}

// describeNAPIs names a device's NAPI instances for a hint.
func describeNAPIs(napis []DeviceNAPI) string {
	if len(napis) == 0 {
		return "none"
	}
	parts := make([]string, len(napis))
	for i, n := range napis {
		parts[i] = "napi-" + outline.Itoa(n.NAPI.ID)
		if n.Queue != "" {
			parts[i] += " (" + n.Queue + ")"
		}
	}
	return strings.Join(parts, ", ")
}
