package main

import (
	"context"
	"errors"
)

// runSnapshot is being built; see the issue that owns the snapshot subcommand.
func runSnapshot(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("snapshot: not built yet")
}
