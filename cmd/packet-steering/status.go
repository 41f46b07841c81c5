package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/table"
	"github.com/packet-steering/packet-steering/steering"
)

// runStatus is `packet-steering status`: the mode in force and why, whether
// the machine matches the plan, hints, the NAPI threads and the queues they
// serve, and per-CPU softnet counters. It only reads. --json prints what the
// ubus method status replies, which leaves the threads out.
func runStatus(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "status", "status [--root DIR] [--json]", "").withRoot().
		withJSON("print the status as JSON")
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	e := oneShotEngine(c.rootDir())
	st, err := e.Status(ctx)
	if err != nil {
		return err
	}
	var threads []steering.ThreadStatus
	if c.json == nil || !*c.json {
		if threads, err = e.Threads(ctx); err != nil {
			return err
		}
	}
	return c.output("status", st, func(w io.Writer) error { return printStatus(w, st, threads) })
}

// printStatus writes a Status for humans: key lines, hints, the NAPI
// threads with the queues they serve (rx threads with their rx queue,
// tx-completion threads with their tx queues), then a table of per-CPU
// softnet counters.
func printStatus(w io.Writer, st *steering.Status, threads []steering.ThreadStatus) error {
	tw := table.New(w, 0)
	src := st.Configured.Source
	if src == "" {
		src = "default"
	}
	fmt.Fprintf(tw, "mode\t%s (%s, flows %d)\n", st.Mode, sourceText(src), st.Configured.Flows)
	fmt.Fprintf(tw, "policy\t%s\n", orDash(st.Policy))
	if st.Evidence != "" {
		fmt.Fprintf(tw, "evidence\t%s\n", st.Evidence)
	}
	plat := []string{}
	for _, s := range []string{st.Platform.Board, st.Platform.Model, st.Platform.Target} {
		if s != "" {
			plat = append(plat, s)
		}
	}
	plat = append(plat, fmt.Sprintf("%d CPUs", st.Platform.CPUs))
	fmt.Fprintf(tw, "platform\t%s\n", strings.Join(plat, ", "))
	fmt.Fprintf(tw, "offload\t%s\n", st.Offload)
	sync := "yes"
	if !st.InSync {
		sync = "no (run `packet-steering apply`)"
	}
	fmt.Fprintf(tw, "in sync\t%s\n", sync)
	if la := st.LastApply; la != nil {
		fmt.Fprintf(tw, "last apply\t%s, %s: %d changed, %d failed (%d µs)\n",
			la.Time.Format(time.RFC3339), la.Reason, la.Changed, la.Failed, la.DurationUS)
	}
	if u := st.UnfinishedApply; u != nil {
		fmt.Fprintf(tw, "unfinished apply\t%s, %s (pid %d) did not finish; %s re-applied every device\n",
			u.Started.Format(time.RFC3339), u.Reason, u.PID, u.FoundBy)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range st.ConfigErrors {
		kept := " (last good settings kept)"
		if strings.HasPrefix(g.Error, "packet_steering.adaptive") {
			kept = "" // an adaptive option: the message names the default used
		}
		fmt.Fprintf(w, "config error: %s: %s%s\n", g.Path, g.Error, kept)
	}
	printAdaptive(w, st.Adaptive)
	if len(st.Hints) > 0 {
		fmt.Fprintln(w, "hints:")
		for _, h := range st.Hints {
			dev := ""
			if h.Device != "" {
				dev = h.Device + ": "
			}
			fmt.Fprintf(w, "  - %s%s [%s]\n", dev, h.Text, h.ID)
		}
	}
	if len(st.Writers) > 0 {
		fmt.Fprintln(w, "other writers:")
		for _, o := range st.Writers {
			fmt.Fprintf(w, "  - %s: %s: %s\n", o.Name, o.State, o.Text)
		}
	}
	if len(threads) > 0 {
		fmt.Fprintln(w, "napi threads:")
		tw = table.New(w, 0)
		fmt.Fprintln(tw, "  DEVICE\tQUEUES\tTHREAD\tCPUS")
		for _, t := range threads {
			fmt.Fprintf(tw, "  %s\t%s\t%s [%d]\t%s\n", t.Device, queueRange(t.Queues), t.Thread, t.PID, wantList(t.CPUs, t.WantCPUs))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(st.CPUs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = table.New(w, table.AlignRight)
	fmt.Fprintln(tw, "cpu\tprocessed\tdropped\ttime_squeeze\trps_received\t")
	for _, c := range st.CPUs {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t\n", c.CPU, c.Processed, c.Dropped, c.TimeSqueeze, c.RPSReceived)
	}
	return tw.Flush()
}

// queueRange shows the queues a thread serves: "rx-0", "tx-0..15" for a
// run of consecutive queues, else a comma list; "-" for none.
func queueRange(queues []string) string {
	if len(queues) == 0 {
		return "-"
	}
	if len(queues) > 2 {
		prefix, first, ok := queueNumber(queues[0])
		for i, q := range queues {
			p, n, qok := queueNumber(q)
			ok = ok && qok && p == prefix && n == first+i
		}
		if ok {
			return queues[0] + ".." + outline.Itoa(first+len(queues)-1)
		}
	}
	return strings.Join(queues, ",")
}

// queueNumber splits "tx-12" into "tx" and 12.
func queueNumber(q string) (prefix string, n int, ok bool) {
	prefix, num, found := strings.Cut(q, "-")
	if !found {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	return prefix, n, err == nil
}

// sourceText says where the settings came from, in the user's words.
func sourceText(src string) string {
	switch src {
	case "packet_steering":
		return "from /etc/config/packet_steering"
	case "network":
		return "from network.globals"
	case "live":
		return "set live, not saved"
	}
	return "default"
}
