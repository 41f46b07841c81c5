package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/packet-steering/packet-steering/daemon"
	"github.com/packet-steering/packet-steering/internal/table"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// runApply is `packet-steering apply`: one apply of the configured plan under
// the same locks as the daemon (and the stock hotplug script).
func runApply(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "apply", "apply [--root DIR] [--reason TEXT] [--device DEV] [--dry-run] [--json]", "").withRoot().
		withJSON("print the result as JSON")
	fs := c.fs
	reason := fs.String("reason", "cli", "why this apply runs (shown in status)")
	device := fs.String("device", "", "apply only this netdev `DEV` (and its NAPI threads and IRQs)")
	dryRun := fs.Bool("dry-run", false, "show what would change, write nothing")
	toSyslog := fs.Bool("syslog", false, "also log the apply to the system log, as the daemon does")
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	eng := oneShotEngine(c.rootDir())
	res, err := eng.Apply(ctx, steering.ApplyRequest{Reason: *reason, Device: *device, DryRun: *dryRun})
	if *toSyslog && !*dryRun {
		syslogApply(env, *reason, res, err)
	}
	if err != nil {
		return err
	}
	if err := c.output("result", res, func(w io.Writer) error { return printResult(w, res, *dryRun) }); err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d action(s) failed; their devices were rolled back", len(res.Failed))}
	}
	return nil
}

// syslogApply logs a one-shot apply, or why it failed, to the system log
// with the daemon's lines and priorities (ubusobj.LogApply): where no
// daemon serves (rpcd's plugin on a single-CPU router, early boot, a
// respawn), the init and hotplug scripts' applies show in logread as the
// daemon's do. Without a syslog socket it says so on stderr.
func syslogApply(env *cliEnv, reason string, res *steering.Result, applyErr error) {
	path := env.syslogPath
	if path == "" {
		path = daemon.DefaultSyslogPath
	}
	sys, err := daemon.DialSyslog(path, "packet-steering")
	if err != nil {
		fmt.Fprintf(env.stderr, "packet-steering apply: not logged: %v\n", err)
		return
	}
	defer sys.Close()
	log := daemon.NewSyslogLogger(sys, env.stderr, false)
	if applyErr != nil {
		log.Error("apply failed", "reason", reason, "err", applyErr)
		return
	}
	ubusobj.LogApply(log, reason, res)
}

// printResult writes a Result as a summary line and one row per action that
// changed, failed or was skipped.
func printResult(w io.Writer, res *steering.Result, dryRun bool) error {
	verb := "changed"
	if dryRun {
		verb = "would change"
	}
	if _, err := fmt.Fprintf(w, "mode %s: %d %s, %d unchanged, %d failed, %d skipped (%d µs)\n",
		res.Mode, len(res.Changed), verb, res.Unchanged, len(res.Failed), len(res.Skipped), res.DurationUS); err != nil {
		return err
	}
	if len(res.Changed)+len(res.Failed)+len(res.Skipped)+len(res.Refused) == 0 {
		return nil
	}
	tw := table.New(w, 0)
	for _, a := range res.Changed {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s -> %s\n", verb, a.Kind, actionTarget(a), orDash(a.Current), a.Value)
	}
	for _, f := range res.Failed {
		fmt.Fprintf(tw, "  failed\t%s\t%s\t%s\n", f.Action.Kind, actionTarget(f.Action), f.Error)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(tw, "  skipped\t%s\t%s\t%s\n", s.Action.Kind, actionTarget(s.Action), s.Reason)
	}
	for _, f := range res.Refused {
		fmt.Fprintf(tw, "  refused\t%s\t%s\t%s (the IRQ cannot move: recorded, not retried)\n", f.Action.Kind, actionTarget(f.Action), f.Error)
	}
	return tw.Flush()
}

// actionTarget names the knob an action sets, for humans.
func actionTarget(a plan.Action) string {
	switch a.Kind {
	case plan.KindNAPIAffinity:
		return fmt.Sprintf("%s (pid %d)", a.Thread, a.PID)
	case plan.KindIRQAffinity:
		if a.Name != "" {
			return fmt.Sprintf("irq %d (%s)", a.IRQ, a.Name)
		}
		return fmt.Sprintf("irq %d", a.IRQ)
	case plan.KindSysctl:
		return a.Key
	case plan.KindNAPIDeferHardIRQs, plan.KindNAPIGROFlushTimeout, plan.KindNAPIThreaded:
		return a.Target()
	}
	return strings.TrimSpace(a.Device + " " + a.Queue)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
