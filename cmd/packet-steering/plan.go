package main

import (
	"context"
	"errors"
)

// runPlan is being built; see the issue that owns the plan subcommand.
func runPlan(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("plan: not built yet")
}
