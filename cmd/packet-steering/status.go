package main

import (
	"context"
	"errors"
)

// runStatus is being built; see the issue that owns the status subcommand.
func runStatus(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("status: not built yet")
}
