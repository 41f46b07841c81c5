// Command packet-steering decides where the kernel's packet-receive work runs
// on an OpenWrt router, applies it safely and serves it over ubus as the
// object packet_steering. This file only dispatches to the subcommands; each
// lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns an error; a usageError exits with status 2.
type command struct {
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv carries the process's streams so tests can run subcommands in-process.
type cliEnv struct {
	_      outline.NoCompare
	stdout io.Writer
	stderr io.Writer
	stdin  io.Reader
	// syslogPath is the system log socket of `apply --syslog` ("":
	// daemon.DefaultSyslogPath, /dev/log).
	syslogPath string
}

// usageError is bad input from the caller: exit status 2, nothing changed.
// An error wrapping steering.ErrInvalid (an unknown mode or device, flows
// out of range) exits 2 the same way; any other error exits 1, and so does
// an apply in which some actions failed (exitError).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

//go:noinline
func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func commands() map[string]command {
	cmds := map[string]command{
		"snapshot": {"print every input of the plan as JSON", runSnapshot},
		"queues":   {"show each device's queues, RPS/XPS masks, NAPI and IRQ CPUs", runQueues},
		"plan":     {"show the plan for a mode without applying it", runPlan},
		"apply":    {"apply the configured plan once", runApply},
		"release":  {releaseSummary, runRelease},
		"status":   {"show mode, policy, sync state, hints and softnet counters", runStatus},
		"report":   {reportSummary, runReport},
		"daemon":   {"serve the ubus object packet_steering", runDaemon},
		"owner":    {"print who serves the ubus object: daemon or rpcd", runOwner},
		"call":     {"call a packet_steering method like `ubus call`", runCall},
		"tune":     {tuneSummary, runTune},
	}
	for name, c := range features {
		cmds[name] = c
	}
	return cmds
}

// features are the commands of optional features, registered by their
// files (feature_*.go) at init and never changed after: the demo, left out
// of the router build.
var features = map[string]command{}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: packet-steering COMMAND [flags]")
	fmt.Fprintln(w)
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	outline.SortStrings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `packet-steering COMMAND -h` for a command's flags.")
}

// run is main without os.Exit, for tests.
func run(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "packet-steering: unknown command %q\n\n", args[0])
		usage(env.stderr)
		return 2
	}
	err := cmd.run(ctx, env, args[1:])
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(env.stderr, "packet-steering %s: %s\n", args[0], ee.msg)
		}
		return ee.code
	}
	fmt.Fprintf(env.stderr, "packet-steering %s: %v\n", args[0], err)
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, plan.ErrInvalid) {
		return 2
	}
	return 1
}

// exitError carries a specific exit status (e.g. the ubus status code of `call`).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}
	if isPlugin(os.Args[0]) {
		os.Exit(runPlugin(ctx, env, os.Args[1:], pluginConfig{root: pluginRoot(), timeout: pluginCallTimeout}))
	}
	os.Exit(run(ctx, env, os.Args[1:]))
}
