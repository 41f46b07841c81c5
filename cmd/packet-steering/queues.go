package main

import (
	"context"
	"errors"
)

// runQueues is being built; see the issue that owns the queues subcommand.
func runQueues(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("queues: not built yet")
}
