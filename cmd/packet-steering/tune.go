package main

import (
	"context"
	"errors"
)

// runTune is being built; see the issue that owns the tune subcommand.
func runTune(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("tune: not built yet")
}
