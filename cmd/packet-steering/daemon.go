package main

import (
	"context"
	"errors"
)

// runDaemon is being built; see the issue that owns the daemon subcommand.
func runDaemon(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("daemon: not built yet")
}
