package main

import (
	"context"
	"fmt"

	"github.com/packet-steering/packet-steering/platform"
)

// runSnapshot is `packet-steering snapshot [--root DIR]`: every input of the
// steering decision (hardware, live values, UCI config, what could not be
// read) as indented JSON. The file stands in for the machine later
// (`plan --snapshot FILE`) and belongs in bug reports. It only reads.
func runSnapshot(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "snapshot")
	root := fs.String("root", "/", "machine root `DIR` (a fixture root in tests)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: packet-steering snapshot [--root DIR]")
		fmt.Fprintln(env.stderr, "Prints every input of the steering plan as JSON (for bug reports and `plan --snapshot`).")
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	snap, err := platform.Read(ctx, *root)
	if err != nil {
		return err
	}
	if err := writeJSON(env.stdout, snap); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}
