package plan

import (
	"fmt"
	"sort"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// Custom mode: the auto plan, then each `config device` section of
// /etc/config/packet_steering (platform.DeviceOverride), in file order, sets
// the knobs it names on its device, replacing what auto chose:
//
//	rps_cpus   hex mask for every rx queue of the device
//	queue_rps  'rx-N=MASK' for one rx queue (after rps_cpus, so it wins)
//	xps_cpus   hex mask for every tx queue
//	napi_cpus  cpu list for every NAPI thread of the device
//	flows      rps_flow_cnt for every rx queue (0..MaxFlows)
//	defer_hard_irqs, gro_flush_timeout, napi_threaded and their
//	           queue_* lists: the per-NAPI knobs (napi_knobs.go)
//
// An rx queue given an RPS mask also gets a flow count (the section's flows
// or the global one) so the device is fully managed. A device the machine
// does not have is a hint, not a failure (it may be hot-plugged later); so
// is a value that does not parse or names a CPU the machine does not have:
// that one knob is skipped, the rest of the section applies.

// applyOverrides applies the `config device` sections to the
func applyOverrides(b *builder, s *platform.Snapshot, flows int) {
	if s.Config.Steering == nil {
		return
	}
	var present cpuset.Set
	for _, c := range s.CPUs {
		present = present.Add(c.ID)
	}
	for _, o := range s.Config.Steering.Devices {
		if o.Name == "" {
			b.hints = append(b.hints, Hint{ID: HintOverrideInvalid, Text: "A `config device` section in /etc/config/packet_steering has no name option; it is ignored."})
			continue
		}
		d := findDevice(s, o.Name)
		if d == nil {
			b.hints = append(b.hints, Hint{ID: HintOverrideUnknownDevice, Device: o.Name,
				Text: fmt.Sprintf("The `config device` section for %q names a device this machine does not have (yet); it applies once the device appears.", o.Name)})
			continue
		}
		bad := func(opt, val string, err error) { b.badOption(o.Name, opt, val, err) }
		mask := func(opt, val string) (cpuset.Set, bool) {
			set, err := cpuset.ParseMask(val)
			if err != nil {
				bad(opt, val, err)
				return cpuset.Set{}, false
			}
			if extra := set.Intersect(present); !extra.Equal(set) {
				bad(opt, val, outline.Errorf("CPUs %s do not exist here (CPUs: %s)", diff(set, present).List(), present.List()))
				return cpuset.Set{}, false
			}
			return set, true
		}
		devFlows, flowsSet := flows, false
		if o.Flows != "" {
			n, err := ParseFlows(o.Flows)
			if err != nil {
				bad("flows", o.Flows, err)
			} else {
				devFlows, flowsSet = n, true
			}
		}
		setRPS := func(q platform.RxQueue, set cpuset.Set) {
			b.rps(d, q, set)
			if flowsSet || !b.hasFlowCnt(d, q) {
				b.flowCnt(d, q, devFlows)
			}
		}
		if o.RPSCPUs != "" {
			if set, ok := mask("rps_cpus", o.RPSCPUs); ok {
				for _, q := range d.RxQueues {
					setRPS(q, set)
				}
			}
		}
		names := make([]string, 0, len(o.QueueRPSCPUs))
		for qn := range o.QueueRPSCPUs {
			names = append(names, qn)
		}
		outline.SortStrings(names)
		for _, qn := range names {
			val := o.QueueRPSCPUs[qn]
			var q *platform.RxQueue
			for i := range d.RxQueues {
				if d.RxQueues[i].Name == qn {
					q = &d.RxQueues[i]
				}
			}
			if q == nil {
				bad("queue_rps", qn+"="+val, outline.Errorf("%s has no rx queue %q", o.Name, qn))
				continue
			}
			if set, ok := mask("queue_rps "+qn, val); ok {
				setRPS(*q, set)
			}
		}
		if flowsSet {
			for _, q := range d.RxQueues {
				b.flowCnt(d, q, devFlows)
			}
		}
		if o.XPSCPUs != "" {
			if set, ok := mask("xps_cpus", o.XPSCPUs); ok {
				for _, q := range d.TxQueues {
					b.xps(d, q, set)
				}
			}
		}
		if o.NAPICPUs != "" {
			set, err := cpuset.ParseList(o.NAPICPUs)
			switch {
			case err != nil:
				bad("napi_cpus", o.NAPICPUs, err)
			case set.IsEmpty():
				bad("napi_cpus", o.NAPICPUs, outline.Errorf("an empty cpu list would leave the threads nowhere to run"))
			case !set.Intersect(present).Equal(set):
				bad("napi_cpus", o.NAPICPUs, outline.Errorf("CPUs %s do not exist here (CPUs: %s)", diff(set, present).List(), present.List()))
			default:
				for _, t := range deviceThreads(s, d) {
					b.napi(t, set)
				}
			}
		}
		applyNAPIOverrides(b, s, d, o, bad) // napi_knobs.go
	}
}

// badOption notes a `config device` option whose value is ignored.
func (b *builder) badOption(device, opt, val string, err error) {
	b.hints = append(b.hints, Hint{ID: HintOverrideInvalid, Device: device,
		Text: fmt.Sprintf("Option %s '%s' of device %s is ignored: %v.", opt, val, device, err)})
}

// diff is a minus b.
func diff(a, b cpuset.Set) cpuset.Set {
	var out cpuset.Set
	for _, c := range a.CPUs() {
		if !b.Has(c) {
			out = out.Add(c)
		}
	}
	return out
}

// DeviceThreads lists the NAPI threads that the `config device` option
// napi_cpus of device dev places (deviceThreads), oldest first; none when
// the snapshot has no such device.
//
//go:noinline
func DeviceThreads(s *platform.Snapshot, dev string) []platform.NAPIThread {
	var out []platform.NAPIThread
	for i := range s.Devices {
		if s.Devices[i].Name == dev {
			for _, t := range deviceThreads(s, &s.Devices[i]) {
				out = append(out, *t)
			}
			break
		}
	}
	return out
}

// deviceThreads lists the NAPI threads serving d: the snapshot's own link,
// the thread name's owner, the device's wifi phy, or mtk_eth threads of an
// mtk_soc_eth device.
func deviceThreads(s *platform.Snapshot, d *platform.Device) []*platform.NAPIThread {
	phy := ""
	if d.Kind == platform.KindWifi || d.Phy != "" {
		phy = fmt.Sprintf("phy%d", d.PhyIndex)
	}
	var out []*platform.NAPIThread
	for i := range s.NAPIThreads {
		t := &s.NAPIThreads[i]
		switch {
		case t.Device == d.Name, t.Owner == d.Name:
		case phy != "" && (t.Owner == phy || t.Owner == d.Phy):
		case d.Driver == MTKSocEth && isMTKEthThread(t.Name):
		default:
			if owner, _, ok := matchNAPIName(t.Name); !ok || owner != d.Name {
				continue
			}
		}
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}
