package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/table"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// runPlan is `packet-steering plan [--root DIR | --snapshot FILE] [--mode M]
// [--flows N] [--json]`: the full plan for a mode, every knob with its
// current and desired value, the policy that decided and why, and hints.
// It is a dry run: it only reads the machine (or a snapshot file made by
// `packet-steering snapshot`, which gives the same plan anywhere).
func runPlan(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "plan", "plan [--root DIR | --snapshot FILE] [--mode M] [--flows N] [--json]",
		"Shows what a mode would set on every knob, without changing anything.").withRoot().
		withJSON("print the plan as JSON")
	fs := c.fs
	snapFile := fs.String("snapshot", "", "plan the machine described by snapshot `FILE` instead of reading one")
	modeFlag := fs.String("mode", "", "`MODE` to plan: off, legacy, all, auto or custom (default: as configured)")
	flowsFlag := fs.String("flows", "", "rps_flow_cnt per rx queue, `N` in 0.."+outline.Itoa(plan.MaxFlows)+" (default: as configured)")
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	if c.given("root") && c.given("snapshot") {
		return usagef("use --root or --snapshot, not both")
	}

	var req plan.PlanRequest
	if c.given("mode") {
		m, err := plan.ParseMode(*modeFlag)
		if err != nil {
			return usagef("--mode: %v", err)
		}
		req.Mode = m
	}
	if c.given("flows") {
		n, err := plan.ParseFlows(*flowsFlag)
		if err != nil {
			return usagef("--flows: %v", err)
		}
		req.Flows = &n
	}

	var snap *platform.Snapshot
	if c.given("snapshot") {
		s, err := readSnapshotFile(*snapFile)
		if err != nil {
			return err
		}
		snap = s
	} else {
		s, err := platform.Read(ctx, c.rootDir())
		if err != nil {
			return err
		}
		snap = s
	}
	p, err := plan.NewPlan(snap, req)
	if err != nil {
		return err
	}
	return c.output("plan", p, func(w io.Writer) error { return printPlan(w, p) })
}

// readSnapshotFile loads a snapshot written by `packet-steering snapshot`.
func readSnapshotFile(path string) (*platform.Snapshot, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, outline.Errorf("read snapshot: %w", err)
	}
	var s platform.Snapshot
	attrs, err := ubus.AttrsFromJSON(raw)
	if err == nil {
		err = ubus.AttrsToValue(attrs, &s)
	}
	if err != nil {
		return nil, outline.Errorf("snapshot %s: not a snapshot file: %w", path, err)
	}
	return &s, nil
}

// printPlan writes a plan for people: mode, policy and evidence, a table of
// knobs (kind, target, current, desired, "=" when it already holds or
// "change"), a count, then hints.
func printPlan(w io.Writer, p *plan.Plan) error {
	tw := table.New(w, 0)
	fmt.Fprintf(tw, "mode\t%s (flows %d)\n", p.Mode, p.Flows)
	fmt.Fprintf(tw, "policy\t%s\n", p.Policy)
	if p.Evidence != "" {
		fmt.Fprintf(tw, "evidence\t%s\n", p.Evidence)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	changes := 0
	if len(p.Actions) == 0 {
		fmt.Fprintln(w, "nothing to manage in this mode")
	} else {
		tw = table.New(w, 0)
		fmt.Fprintln(tw, "KIND\tTARGET\tCURRENT\tDESIRED\tSTATE")
		for _, a := range p.Actions {
			state := "="
			if !a.Holds() {
				state = "change"
				changes++
			}
			cur := a.Current
			if cur == "" {
				cur = "?"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Kind, a.Target(), cur, a.Value, state)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%d knobs, %d to change\n", len(p.Actions), changes)
	}
	if len(p.Hints) > 0 {
		fmt.Fprintln(w, "hints:")
		for _, h := range p.Hints {
			dev := ""
			if h.Device != "" {
				dev = h.Device + ": "
			}
			fmt.Fprintf(w, "  - %s%s [%s]\n", dev, h.Text, h.ID)
		}
	}
	return nil
}
