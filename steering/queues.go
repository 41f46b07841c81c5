package steering

import (
	"context"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// Queues reports devices with their live and wanted values; device "" means
// all. A wanted value is "" where the plan leaves the knob alone. An unknown
// device is ErrInvalid.
func (e *Engine) Queues(ctx context.Context, device string) ([]DeviceQueues, error) {
	if device != "" && !plan.ValidDeviceName(device) {
		return nil, outline.Errorf("device %q: %w", device, plan.ErrInvalid)
	}
	v, err := e.viewState(ctx)
	if err != nil {
		return nil, err
	}
	if device != "" && v.snap.Device(device) == nil {
		return nil, outline.Errorf("no device %q: %w", device, plan.ErrInvalid)
	}
	return e.queuesOf(v, device), nil
}

// queuesOf is Queues of one view.
func (e *Engine) queuesOf(v *viewState, device string) []DeviceQueues {
	views := QueueViews(v.snap, v.plan, device)
	if v.plan.Mode == plan.ModeAdaptive {
		markDeviations(views, e.Deviations())
	}
	return views
}

// markDeviations sets RxQueueView.Adaptive for the deviated queues.
func markDeviations(views []DeviceQueues, devs []adaptive.Deviation) {
	for _, d := range devs {
		for i := range views {
			if views[i].Name != d.Device {
				continue
			}
			for j := range views[i].Rx {
				if views[i].Rx[j].Queue == d.Queue {
					dc := d
					views[i].Rx[j].Adaptive = &dc
				}
			}
		}
	}
}

// QueueViews joins the snapshot's queues, threads and IRQs (paired by
// PairQueues, as the plan pairs them) with the plan's wanted values, for
// one device or all (""): each rx queue with its rx thread and IRQ, each tx
// queue with its tx-completion thread and IRQ. With a nil plan the wanted
// values are empty: the live placement alone (what `queues` shows when no
// plan can be made).
func QueueViews(snap *platform.Snapshot, p *plan.Plan, device string) []DeviceQueues {
	want := map[string]string{} // knob key -> wanted value
	if p != nil {
		for _, a := range p.Actions {
			want[knobID(a)] = a.Value
		}
	}
	napiView := func(t *platform.NAPIThread) *NAPIView {
		if t == nil {
			return nil
		}
		return &NAPIView{PID: t.PID, Thread: t.Name, CPUs: t.CPUs,
			WantCPUs: want[knobID(plan.Action{Kind: plan.KindNAPIAffinity, PID: t.PID})]}
	}
	irqView := func(q *platform.IRQ) *IRQView {
		if q == nil {
			return nil
		}
		return &IRQView{IRQ: q.Number, Name: q.Name, CPUs: maskToList(q.SMPAffinity),
			WantCPUs: maskToList(want[knobID(plan.Action{Kind: plan.KindIRQAffinity, IRQ: q.Number})]), Fixed: q.Refused}
	}
	pair := plan.PairQueues(snap)
	out := []DeviceQueues{}
	for i := range snap.Devices {
		d := &snap.Devices[i]
		if device != "" && d.Name != device {
			continue
		}
		dq := DeviceQueues{Name: d.Name, Driver: d.Driver, Kind: d.Kind, Rx: []RxQueueView{}, Tx: []TxQueueView{}}
		dp := pair.Device(d.Name)
		knobs := napiKnobViews(snap, pair, d, want)
		for j, q := range d.RxQueues {
			dq.Rx = append(dq.Rx, RxQueueView{
				NAPIKnobs:   knobs[q.Name],
				Queue:       q.Name,
				RPSCPUs:     q.RPSCPUs,
				WantRPSCPUs: want[knobID(plan.Action{Kind: plan.KindRPSCPUs, Device: d.Name, Queue: q.Name})],
				RPSFlowCnt:  q.RPSFlowCnt,
				NAPI:        withSource(napiView(dp.Rx[j].Thread), dp.Rx[j].ThreadSource),
				IRQ:         withIRQSource(irqView(dp.Rx[j].IRQ), dp.Rx[j].IRQSource),
			})
		}
		for j, q := range d.TxQueues {
			dq.Tx = append(dq.Tx, TxQueueView{
				Queue:       q.Name,
				XPSCPUs:     q.XPSCPUs,
				WantXPSCPUs: want[knobID(plan.Action{Kind: plan.KindXPSCPUs, Device: d.Name, Queue: q.Name})],
				NAPI:        withSource(napiView(dp.Tx[j].Thread), dp.Tx[j].ThreadSource),
				IRQ:         withIRQSource(irqView(dp.Tx[j].IRQ), dp.Tx[j].IRQSource),
			})
		}
		if d.Phy != "" {
			dq.Threads = plan.PhyThreads(snap, d.Name, func(pid int) string { // plan/rule_mt76.go
				return want[knobID(plan.Action{Kind: plan.KindNAPIAffinity, PID: pid})]
			})
		}
		out = append(out, dq)
	}
	return out
}

// knobID names the knob an action sets, independent of its value.
func knobID(a plan.Action) string {
	kind := string(a.Kind)
	switch a.Kind {
	case plan.KindNAPIAffinity:
		return kind + " " + outline.Itoa(a.PID)
	case plan.KindIRQAffinity:
		return kind + " " + outline.Itoa(a.IRQ)
	case plan.KindSysctl:
		return kind + " " + a.Key
	case plan.KindNAPIDeferHardIRQs, plan.KindNAPIGROFlushTimeout, plan.KindNAPIThreaded:
		return kind + " " + outline.Itoa(a.NAPIID)
	}
	return kind + " " + a.Device + " " + a.Queue
}

// maskToList shows a kernel hex mask as a cpu list; "" and unparsable
// masks stay as they are.
func maskToList(mask string) string {
	if mask == "" {
		return ""
	}
	s, err := cpuset.ParseMask(mask)
	if err != nil {
		return mask
	}
	return s.List()
}

// withSource sets a NAPI view's pairing source.
func withSource(v *NAPIView, source string) *NAPIView {
	if v != nil {
		v.Source = source
	}
	return v
}

// withIRQSource sets an IRQ view's pairing source.
func withIRQSource(v *IRQView, source string) *IRQView {
	if v != nil {
		v.Source = source
	}
	return v
}

// napiKnobViews are the per-NAPI knob views of d's rx queues, by queue
// name, for the NAPIs the kernel reports knobs of.
func napiKnobViews(snap *platform.Snapshot, pair *plan.Pairing, d *platform.Device, want map[string]string) map[string]*NAPIKnobsView {
	out := map[string]*NAPIKnobsView{}
	for _, n := range plan.DeviceNAPIs(snap, pair, d) {
		c := n.NAPI
		if n.Queue == "" || (c.DeferHardIRQs == nil && c.Threaded == nil) {
			continue
		}
		w := func(kind plan.ActionKind) string {
			return want[knobID(plan.Action{Kind: kind, NAPIID: c.ID})]
		}
		v := &NAPIKnobsView{NAPIID: c.ID, Source: n.Source,
			WantDeferHardIRQs: w(plan.KindNAPIDeferHardIRQs), WantGROFlushTimeoutNS: w(plan.KindNAPIGROFlushTimeout),
			WantThreaded: w(plan.KindNAPIThreaded)}
		if c.DeferHardIRQs != nil {
			v.DeferHardIRQs = outline.FormatUint(uint64(*c.DeferHardIRQs), 10)
		}
		if c.GROFlushTimeoutNS != nil {
			v.GROFlushTimeoutNS = outline.FormatUint(*c.GROFlushTimeoutNS, 10)
		}
		if c.Threaded != nil {
			v.Threaded = outline.FormatUint(uint64(*c.Threaded), 10)
		}
		out[n.Queue] = v
	}
	return out
}
