package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/table"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/steering"
)

// runQueues is `packet-steering queues [--root DIR] [--json]`: each device
// with its rx queues (RPS mask, flow count, the rx NAPI thread and IRQ
// serving the queue and their CPUs) and tx queues (XPS mask, the tx NAPI
// thread and IRQ completing the queue's transmits). Wanted values from the
// plan are shown next to live ones when the engine can plan; otherwise the
// live values alone. It only reads.
func runQueues(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "queues", "queues [--root DIR] [--json]", "").withRoot().
		withJSON("print {\"devices\": [...]} as the ubus method get_queues does")
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	snap, err := platform.Read(ctx, c.rootDir())
	if err != nil {
		return err
	}
	devs, werr := steering.NewEngine(c.rootDir()).Queues(ctx, "")
	if werr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(env.stderr, "packet-steering queues: no wanted values (%v); showing live values\n", werr)
		devs = steering.QueueViews(snap, nil, "")
	}
	return c.output("queues", struct {
		Devices []steering.DeviceQueues `json:"devices"`
	}{devs}, func(w io.Writer) error { return printQueues(w, machineLine(snap), devs) })
}

// machineLine names the machine: "board (target), N CPUs".
func machineLine(s *platform.Snapshot) string {
	name := s.Identity.Board
	if name == "" {
		name = s.Identity.Model
	}
	if name == "" {
		name = "unknown board"
	}
	if s.Identity.Target != "" {
		name += " (" + s.Identity.Target + ")"
	}
	online := 0
	for _, c := range s.CPUs {
		if c.Online {
			online++
		}
	}
	return fmt.Sprintf("%s, %d CPUs online", name, online)
}

// printQueues writes the table for people: a line naming the machine, then
// per device a header line and one row per rx queue (RPS mask and its CPUs,
// flow count, its rx NAPI thread and CPUs, IRQ and CPUs), then the tx
// queues with their XPS mask and, where the driver has them, the tx NAPI
// thread completing their transmits and their IRQ (runs of equal tx queues
// on one row). A wanted value that differs from the live one shows as
// "live -> wanted".
func printQueues(w io.Writer, machine string, devs []steering.DeviceQueues) error {
	tw := table.New(w, 0)
	if machine != "" {
		fmt.Fprintf(tw, "%s\n", machine)
	}
	for _, d := range devs {
		fmt.Fprintln(tw)
		head := []string{d.Name, d.Kind}
		if d.Driver != "" {
			head = append(head, "driver "+d.Driver)
		}
		head = append(head, fmt.Sprintf("%d rx, %d tx", len(d.Rx), len(d.Tx)))
		fmt.Fprintf(tw, "%s\n", strings.Join(head, "  "))
		if len(d.Rx) == 0 && len(d.Tx) == 0 {
			continue
		}
		fmt.Fprintf(tw, "  QUEUE\tSTEERING\tFLOWS\tNAPI THREAD\tNAPI CPUS\tIRQ\tIRQ CPUS\n")
		for _, q := range d.Rx {
			napi, napiCPUs, irq, irqCPUs := servedBy(q.NAPI, q.IRQ)
			fmt.Fprintf(tw, "  %s\trps %s\t%d\t%s\t%s\t%s\t%s\n", q.Queue, wantMask(q.RPSCPUs, q.WantRPSCPUs),
				q.RPSFlowCnt, napi, napiCPUs, irq, irqCPUs)
		}
		for i := 0; i < len(d.Tx); {
			j := i
			for j+1 < len(d.Tx) && sameTxRow(d.Tx[j+1], d.Tx[i]) {
				j++
			}
			q := d.Tx[i]
			name := q.Queue
			if j > i {
				name += ".." + strings.TrimPrefix(d.Tx[j].Queue, "tx-")
			}
			if q.NAPI == nil && q.IRQ == nil {
				fmt.Fprintf(tw, "  %s\txps %s\n", name, wantMask(q.XPSCPUs, q.WantXPSCPUs))
			} else {
				napi, napiCPUs, irq, irqCPUs := servedBy(q.NAPI, q.IRQ)
				fmt.Fprintf(tw, "  %s\txps %s\t-\t%s\t%s\t%s\t%s\n", name, wantMask(q.XPSCPUs, q.WantXPSCPUs),
					napi, napiCPUs, irq, irqCPUs)
			}
			i = j + 1
		}
		printPhyThreads(tw, d.Threads) // queues_boards.go
		if src := pairingSources(d); src != "" {
			fmt.Fprintf(tw, "  paired by: %s\n", src)
		}
		printNAPIKnobs(tw, d)
	}
	return tw.Flush()
}

// printNAPIKnobs writes a line per rx queue whose NAPI's per-NAPI knobs
// the plan sets or hold other than the kernel's defaults (0):
// "  napi knobs rx-0 (napi 8193): defer-hard-irqs 0 -> 2, gro-flush-timeout 0 -> 20000 ns, threaded 1".
func printNAPIKnobs(w io.Writer, d steering.DeviceQueues) {
	for _, q := range d.Rx {
		k := q.NAPIKnobs
		if k == nil || k.WantDeferHardIRQs+k.WantGROFlushTimeoutNS+k.WantThreaded == "" && k.DeferHardIRQs+k.GROFlushTimeoutNS == "00" {
			continue
		}
		fmt.Fprintf(w, "  napi knobs %s (napi %d): defer-hard-irqs %s, gro-flush-timeout %s ns, threaded %s\n", q.Queue, k.NAPIID,
			wantValue(k.DeferHardIRQs, k.WantDeferHardIRQs), wantValue(k.GROFlushTimeoutNS, k.WantGROFlushTimeoutNS), wantValue(k.Threaded, k.WantThreaded))
	}
}

// wantValue is "live" or "live -> wanted".
func wantValue(live, want string) string {
	if live == "" {
		live = "-"
	}
	if want == "" || want == live {
		return live
	}
	return live + " -> " + want
}

// pairingSources lists how the device's queues are known to be served
// ("netlink", or the inference rules' names), sorted; "" when no queue
// is paired.
func pairingSources(d steering.DeviceQueues) string {
	var srcs []string
	for _, q := range d.Rx {
		srcs = appendSources(srcs, q.NAPI, q.IRQ)
	}
	for _, q := range d.Tx {
		srcs = appendSources(srcs, q.NAPI, q.IRQ)
	}
	outline.SortStrings(srcs)
	return strings.Join(srcs, ", ")
}

// appendSources adds a queue's thread and IRQ sources not yet in srcs.
//
//go:noinline
func appendSources(srcs []string, n *steering.NAPIView, q *steering.IRQView) []string {
	for _, s := range [2]string{sourceOf(n), irqSourceOf(q)} {
		if s != "" && !slices.Contains(srcs, s) {
			srcs = append(srcs, s)
		}
	}
	return srcs
}

func sourceOf(n *steering.NAPIView) string {
	if n == nil {
		return ""
	}
	return n.Source
}

func irqSourceOf(q *steering.IRQView) string {
	if q == nil {
		return ""
	}
	return q.Source
}

// servedBy shows the thread and IRQ serving a queue, each with its live
// CPUs and the wanted ones where they differ; "-" where there is none.
func servedBy(n *steering.NAPIView, q *steering.IRQView) (napi, napiCPUs, irq, irqCPUs string) {
	napi, napiCPUs, irq, irqCPUs = "-", "-", "-", "-"
	if n != nil {
		napi = fmt.Sprintf("%s [%d]", n.Thread, n.PID)
		napiCPUs = wantList(n.CPUs, n.WantCPUs)
	}
	if q != nil {
		irq = fmt.Sprintf("%d %s", q.IRQ, q.Name)
		irqCPUs = wantList(q.CPUs, q.WantCPUs)
		if q.Fixed != "" {
			irqCPUs += " (fixed)"
		}
	}
	return napi, napiCPUs, irq, irqCPUs
}

// sameTxRow reports tx queues that print as one row: equal masks, the same
// thread (one tx thread for every queue, as on mtk_soc_eth) and no IRQ of
// their own.
func sameTxRow(a, b steering.TxQueueView) bool {
	if a.XPSCPUs != b.XPSCPUs || a.WantXPSCPUs != b.WantXPSCPUs || a.IRQ != nil || b.IRQ != nil {
		return false
	}
	if a.NAPI == nil || b.NAPI == nil {
		return a.NAPI == nil && b.NAPI == nil
	}
	return *a.NAPI == *b.NAPI
}

// wantMask shows a live mask with its CPUs, and the wanted one when it
// differs as a bitmap: "f (0-3) -> 2 (1)".
func wantMask(live, want string) string {
	s := maskText(live)
	if want != "" && !cpuset.SameMask(live, want) {
		s += " -> " + maskText(want)
	}
	return s
}

// maskText is "2 (1)", "0 (none)", or "-" for an unreadable mask.
func maskText(mask string) string {
	if mask == "" {
		return "-"
	}
	cpus, err := cpuset.ParseMask(mask)
	switch {
	case err != nil:
		return mask + " (?)"
	case cpus.Len() == 0:
		return mask + " (none)"
	}
	return mask + " (" + cpus.List() + ")"
}

// wantList shows a live cpu list and the wanted one when it differs.
func wantList(live, want string) string {
	s := live
	if s == "" {
		s = "-"
	}
	if want != "" && !cpuset.SameList(live, want) {
		s += " -> " + want
	}
	return s
}
