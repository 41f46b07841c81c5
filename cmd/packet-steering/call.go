package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// Exit statuses of the stock ubus CLI (cli.c) besides the ubus status
// codes: main returns -1 when it cannot connect or parse the message data
// and -2 on a usage error, which the shell sees as 255 and 254.
const (
	exitCLIFailure = 255
	exitCLIUsage   = 254
)

// runCall is `packet-steering call [--socket PATH] [--timeout S] METHOD
// [JSON]`, for machines without the ubus CLI. It behaves as `ubus call
// packet_steering METHOD JSON` does: the reply printed as the stock CLI
// prints it (tab-indented JSON), "Command failed: <ubus_strerror>" on stderr
// and the ubus status code as the exit status, "Failed to parse message
// data" or "Failed to connect to ubus" with exit status 255, a usage error
// with 254.
func runCall(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "call", "call [--socket PATH] [--timeout S] METHOD [JSON]",
		"methods: status, get_queues, apply, set_mode (see `ubus -v list "+ubusobj.Path+"`)").withArgs(1, 2)
	fs := c.fs
	socket := fs.String("socket", "", "ubus socket (default "+ubus.DefaultSocket+", then "+ubus.LegacySocket+")")
	fs.StringVar(socket, "s", "", "same as --socket (as `ubus -s`)")
	timeout := fs.Int("timeout", 30, "seconds to wait for the reply")
	fs.IntVar(timeout, "t", 30, "same as --timeout (as `ubus -t`)")
	// Bad input exits as the ubus CLI's does (254), not 2: `call` stands in
	// for `ubus call` in scripts.
	help, err := c.parse(args)
	if help {
		return nil
	}
	if err != nil {
		return &exitError{code: exitCLIUsage, msg: err.Error()}
	}
	if *timeout <= 0 {
		fs.Usage()
		return &exitError{code: exitCLIUsage, msg: "--timeout must be positive"}
	}
	method := fs.Arg(0)
	var data []ubus.Attr
	if fs.NArg() == 2 {
		var err error
		if data, err = ubus.AttrsFromJSON([]byte(fs.Arg(1))); err != nil {
			fmt.Fprintln(env.stderr, "Failed to parse message data")
			return &exitError{code: exitCLIFailure}
		}
	}

	ctx, cancel := context.WithTimeout(ctx, time.Duration(*timeout)*time.Second)
	defer cancel()
	conn, err := ubus.Dial(ctx, *socket)
	if err != nil {
		fmt.Fprintln(env.stderr, "Failed to connect to ubus")
		return &exitError{code: exitCLIFailure}
	}
	defer conn.Close()

	reply, err := conn.Call(ctx, ubusobj.Path, method, data)
	if reply != nil {
		out, ferr := ubus.AttrsToJSON(reply, "\t")
		if ferr != nil {
			return outline.Errorf("format reply: %w", ferr)
		}
		out = append(out, '\n')
		if _, werr := env.stdout.Write(out); werr != nil {
			return outline.Errorf("write reply: %w", werr)
		}
	}
	if err == nil {
		return nil
	}
	st := callStatus(err)
	fmt.Fprintf(env.stderr, "Command failed: %s\n", st.String())
	return &exitError{code: int(st)}
}

// callStatus is the ubus status a failed call ends with, as libubus
// reports it: the reply's status, TIMEOUT when no reply came in time,
// CONNECTION_FAILED when the broker went away.
func callStatus(err error) ubus.Status {
	var st ubus.Status
	switch {
	case errors.As(err, &st):
		return st
	case errors.Is(err, context.DeadlineExceeded):
		return ubus.StatusTimeout
	case errors.Is(err, ubus.ErrClosed):
		return ubus.StatusConnectionFailed
	}
	return ubus.StatusUnknownError
}
