package main

import (
	"context"
	"fmt"
	"io"

	"github.com/packet-steering/packet-steering/steering"
)

// releaseSummary is the command's line in the usage.
const releaseSummary = "set the knobs only packet-steering manages back to kernel defaults"

// runRelease is `packet-steering release`: before steering is handed back
// to netifd's service (package removal), XPS masks, IRQ and NAPI thread
// affinities and net.core.rps_sock_flow_entries go back to the kernel's
// defaults, so that the machine is as the stock rule alone leaves it.
func runRelease(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "release", "release [--root DIR] [--dry-run] [--json]", "").withRoot().
		withJSON("print the result as JSON")
	dryRun := c.fs.Bool("dry-run", false, "show what would change, write nothing")
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	res, err := steering.NewEngine(c.rootDir()).Release(ctx, *dryRun)
	if err != nil {
		return err
	}
	if err := c.output("result", res, func(w io.Writer) error { return printResult(w, res, *dryRun) }); err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d action(s) failed", len(res.Failed))}
	}
	return nil
}
