package main

import (
	"context"
	"errors"
)

// runApply is being built; see the issue that owns the apply subcommand.
func runApply(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("apply: not built yet")
}
