package main

import (
	"context"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// runSnapshot is `packet-steering snapshot [--root DIR]`: every input of the
// steering decision (hardware, live values, UCI config, what could not be
// read) as indented JSON. The file stands in for the machine later
// (`plan --snapshot FILE`) and belongs in bug reports. It only reads.
func runSnapshot(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "snapshot", "snapshot [--root DIR]",
		"Prints every input of the steering plan as JSON (for bug reports and `plan --snapshot`).").withRoot()
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	snap, err := platform.Read(ctx, c.rootDir())
	if err != nil {
		return err
	}
	if err := writeJSON(env.stdout, snap); err != nil {
		return outline.Errorf("write snapshot: %w", err)
	}
	return nil
}
