package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/steering"
)

// runQueues is `packet-steering queues [--root DIR] [--json]`: each device
// with its rx queues (RPS mask, flow count, the NAPI thread and IRQ serving
// the queue and their CPUs) and tx queues (XPS mask). Wanted values from the
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
// flow count, NAPI thread and CPUs, IRQ and CPUs), then the tx queues with
// their XPS mask (runs of equal tx queues on one row). A wanted value that
// differs from the live one shows as "live -> wanted".
func printQueues(w io.Writer, machine string, devs []steering.DeviceQueues) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
			napi, napiCPUs, irq, irqCPUs := "-", "-", "-", "-"
			if q.NAPI != nil {
				napi = fmt.Sprintf("%s [%d]", q.NAPI.Thread, q.NAPI.PID)
				napiCPUs = wantList(q.NAPI.CPUs, q.NAPI.WantCPUs)
			}
			if q.IRQ != nil {
				irq = fmt.Sprintf("%d %s", q.IRQ.IRQ, q.IRQ.Name)
				irqCPUs = wantList(q.IRQ.CPUs, q.IRQ.WantCPUs)
			}
			fmt.Fprintf(tw, "  %s\trps %s\t%d\t%s\t%s\t%s\t%s\n", q.Queue, wantMask(q.RPSCPUs, q.WantRPSCPUs),
				q.RPSFlowCnt, napi, napiCPUs, irq, irqCPUs)
		}
		for i := 0; i < len(d.Tx); {
			j := i
			for j+1 < len(d.Tx) && d.Tx[j+1].XPSCPUs == d.Tx[i].XPSCPUs && d.Tx[j+1].WantXPSCPUs == d.Tx[i].WantXPSCPUs {
				j++
			}
			name := d.Tx[i].Queue
			if j > i {
				name += ".." + strings.TrimPrefix(d.Tx[j].Queue, "tx-")
			}
			fmt.Fprintf(tw, "  %s\txps %s\n", name, wantMask(d.Tx[i].XPSCPUs, d.Tx[i].WantXPSCPUs))
			i = j + 1
		}
	}
	return tw.Flush()
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
