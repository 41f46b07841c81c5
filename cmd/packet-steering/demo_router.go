//go:build router

package main

import "context"

// demoSummary is the demo's line in the usage of a router build.
const demoSummary = "(not in this build: build without -tags router)"

// runDemo is the router build's `demo`. The demo (an HTTP server, the LuCI
// page's assets, an in-process broker and a simulated router) is left out of
// binaries built with -tags router to keep them small; this only says so.
func runDemo(ctx context.Context, env *cliEnv, args []string) error {
	return &exitError{code: 2, msg: "demo is not in this build; build without -tags router"}
}
