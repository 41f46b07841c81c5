package main

import (
	"context"
	"fmt"

	"github.com/packet-steering/packet-steering/steering"
)

// releaseSummary is the command's line in the usage.
const releaseSummary = "set the knobs only packet-steering manages back to kernel defaults"

// runRelease is `packet-steering release`: before steering is handed back
// to netifd's service (package removal), XPS masks, IRQ and NAPI thread
// affinities and net.core.rps_sock_flow_entries go back to the kernel's
// defaults, so that the machine is as the stock rule alone leaves it.
func runRelease(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "release")
	root := fs.String("root", "/", "machine root `DIR` (a fixture root in tests)")
	dryRun := fs.Bool("dry-run", false, "show what would change, write nothing")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: packet-steering release [--root DIR] [--dry-run] [--json]")
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if err := checkRoot(*root); err != nil {
		return err
	}
	res, err := steering.NewEngine(*root).Release(ctx, *dryRun)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(env.stdout, res); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	} else if err := printResult(env.stdout, res, *dryRun); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	if len(res.Failed) > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d action(s) failed", len(res.Failed))}
	}
	return nil
}
