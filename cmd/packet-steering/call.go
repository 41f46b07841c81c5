package main

import (
	"context"
	"errors"
)

// runCall is being built; see the issue that owns the call subcommand.
func runCall(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("call: not built yet")
}
