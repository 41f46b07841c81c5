package main

import (
	"context"
	"errors"
)

// runDemo is being built; see the issue that owns the demo subcommand.
func runDemo(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("demo: not built yet")
}
