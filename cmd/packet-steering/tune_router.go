//go:build router && !tune

package main

import "context"

// tuneSummary is tune's line in the usage of the small router build.
const tuneSummary = "(not in this build: install the packet-steering-tune variant)"

// runTune is the small router build's `tune`. The measured sweep (an iperf3
// driver, statistics, the report) costs about 0.4-0.5 MB, which docs/design.md's
// 3 MiB budget for the router binary does not hold; the OpenWrt package
// packet-steering-tune is the same program built with -tags router,tune.
func runTune(ctx context.Context, env *cliEnv, args []string) error {
	return &exitError{code: 2, msg: "tune is not in this build; install packet-steering-tune (the same program with tune), or build with -tags router,tune"}
}
