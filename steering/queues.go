package steering

import (
	"context"
	"fmt"
	"strconv"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// Queues reports devices with their live and wanted values; device "" means
// all. A wanted value is "" where the plan leaves the knob alone. An unknown
// device is ErrInvalid.
func (e *Engine) Queues(ctx context.Context, device string) ([]DeviceQueues, error) {
	if device != "" && !validDeviceName(device) {
		return nil, fmt.Errorf("device %q: %w", device, ErrInvalid)
	}
	v, err := e.viewState(ctx)
	if err != nil {
		return nil, err
	}
	if device != "" && snapDevice(v.snap, device) == nil {
		return nil, fmt.Errorf("no device %q: %w", device, ErrInvalid)
	}
	return QueueViews(v.snap, v.plan, device), nil
}

// QueueViews joins the snapshot's queues, threads and IRQs with the plan's
// wanted values, for one device or all (""). With a nil plan the wanted
// values are empty: the live placement alone (what `queues` shows when no
// plan can be made).
func QueueViews(snap *platform.Snapshot, p *Plan, device string) []DeviceQueues {
	want := map[string]string{} // knob key -> wanted value
	threadQueue := map[int]string{}
	var actions []Action
	if p != nil {
		actions = p.Actions
	}
	for _, a := range actions {
		want[knobID(a)] = a.Value
		if a.Kind == KindNAPIAffinity && a.Queue != "" {
			threadQueue[a.PID] = a.Queue
		}
	}
	out := []DeviceQueues{}
	for i := range snap.Devices {
		d := &snap.Devices[i]
		if device != "" && d.Name != device {
			continue
		}
		dq := DeviceQueues{Name: d.Name, Driver: d.Driver, Kind: d.Kind, Rx: []RxQueueView{}, Tx: []TxQueueView{}}
		napi := napiByQueue(snap, d, threadQueue)
		for _, q := range d.RxQueues {
			v := RxQueueView{
				Queue:       q.Name,
				RPSCPUs:     q.RPSCPUs,
				WantRPSCPUs: want[knobID(Action{Kind: KindRPSCPUs, Device: d.Name, Queue: q.Name})],
				RPSFlowCnt:  q.RPSFlowCnt,
			}
			if t, ok := napi[q.Name]; ok {
				v.NAPI = &NAPIView{
					PID:      t.PID,
					Thread:   t.Name,
					CPUs:     t.CPUs,
					WantCPUs: want[knobID(Action{Kind: KindNAPIAffinity, PID: t.PID})],
				}
			}
			if irq := irqForQueue(snap, d, q.Index); irq != nil {
				v.IRQ = &IRQView{
					IRQ:      irq.Number,
					Name:     irq.Name,
					CPUs:     maskToList(irq.SMPAffinity),
					WantCPUs: maskToList(want[knobID(Action{Kind: KindIRQAffinity, IRQ: irq.Number})]),
				}
			}
			dq.Rx = append(dq.Rx, v)
		}
		for _, q := range d.TxQueues {
			dq.Tx = append(dq.Tx, TxQueueView{
				Queue:       q.Name,
				XPSCPUs:     q.XPSCPUs,
				WantXPSCPUs: want[knobID(Action{Kind: KindXPSCPUs, Device: d.Name, Queue: q.Name})],
			})
		}
		out = append(out, dq)
	}
	return out
}

// knobID names the knob an action sets, independent of its value.
func knobID(a Action) string {
	switch a.Kind {
	case KindNAPIAffinity:
		return a.Kind + " " + strconv.Itoa(a.PID)
	case KindIRQAffinity:
		return a.Kind + " " + strconv.Itoa(a.IRQ)
	case KindSysctl:
		return a.Kind + " " + a.Key
	}
	return a.Kind + " " + a.Device + " " + a.Queue
}

// napiByQueue ties a device's NAPI threads to its rx queues: by the queue
// the plan names for a thread when it does, otherwise the device's threads
// in NAPI id order pair with its rx queues in index order (the kernel
// registers a multi-queue driver's NAPI instances queue by queue).
func napiByQueue(snap *platform.Snapshot, d *platform.Device, planned map[int]string) map[string]platform.NAPIThread {
	out := map[string]platform.NAPIThread{}
	var rest []platform.NAPIThread
	for _, t := range snap.NAPIThreads {
		if t.Device != d.Name {
			continue
		}
		if q, ok := planned[t.PID]; ok {
			out[q] = t
			continue
		}
		rest = append(rest, t)
	}
	if len(rest) == 0 {
		return out
	}
	// Insertion sort by NAPI id: a device has a handful of threads.
	for i := 1; i < len(rest); i++ {
		for j := i; j > 0 && rest[j].NAPIID < rest[j-1].NAPIID; j-- {
			rest[j], rest[j-1] = rest[j-1], rest[j]
		}
	}
	n := 0
	for _, q := range d.RxQueues {
		if _, taken := out[q.Name]; taken {
			continue
		}
		if n == len(rest) {
			break
		}
		out[q.Name] = rest[n]
		n++
	}
	return out
}

// irqForQueue returns the IRQ the snapshot ties to rx queue index of d: one
// with that queue, or the device's whole-device IRQ when d has a single rx
// queue.
func irqForQueue(snap *platform.Snapshot, d *platform.Device, index int) *platform.IRQ {
	var whole *platform.IRQ
	for i := range snap.IRQs {
		q := &snap.IRQs[i]
		if q.Device != d.Name {
			continue
		}
		if q.Queue == index {
			return q
		}
		if q.Queue < 0 && whole == nil {
			whole = q
		}
	}
	if whole != nil && len(d.RxQueues) == 1 {
		return whole
	}
	return nil
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
