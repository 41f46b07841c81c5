//go:build !router || tune

package main

import (
	"context"
	"errors"
	"flag"
	"strings"

	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/tune"
)

// tuneSummary is tune's line in the usage.
const tuneSummary = "measure steering alternatives and recommend one"

// runTune is `packet-steering tune`: a measured sweep of steering
// candidates with a recommendation (package tune does the work).
func runTune(ctx context.Context, env *cliEnv, args []string) error {
	err := tune.Main(ctx, args, env.stdout, env.stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return nil
	case errors.Is(err, tune.ErrUsage):
		return usagef("%s", strings.TrimPrefix(err.Error(), tune.ErrUsage.Error()+": "))
	case errors.Is(err, steering.ErrInvalid):
		return usagef("%v", err)
	}
	return err
}
