//go:build !router

// The browser demo, the one feature the router build leaves out (its HTTP
// server, html/template and the LuCI assets): this file, in the style of
// tailscale's feature files, imports it and registers its command; with
// -tags router neither is linked and `demo` is not a command.

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/packet-steering/packet-steering/cmd/packet-steering/internal/demorun"
	"github.com/packet-steering/packet-steering/platform/fixture"
)

func init() {
	features["demo"] = command{"run a demo router with the LuCI page in a browser", runDemo}
}

// runDemo is `packet-steering demo [--port 8080] [--dir DIR] [--preset NAME]
// [--pps N]`: a simulated router (a fixture preset, by default "demo", a
// 4-CPU ipq807x with wifi, built in DIR/root), an in-process ubus
// broker on DIR/ubus.sock, the daemon (package daemon, as on a router:
// the start apply, the adaptive loop in mode adaptive) serving
// packet_steering on it, and the LuCI page on http://127.0.0.1:PORT/. It runs until
// ctx is cancelled (Ctrl-C), then stops everything and, unless --dir was
// given, removes the temporary directory.
func runDemo(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "demo", "demo [--port 8080] [--dir DIR] [--preset demo] [--pps 20000]",
		"\nRuns a simulated 4-CPU router with the packet_steering ubus object and\n"+
			"serves its LuCI page on 127.0.0.1. Ctrl-C stops it and cleans up.\n")
	fs := c.fs
	port := fs.Int("port", 8080, "TCP port on 127.0.0.1 for the page (0: any free port)")
	dir := fs.String("dir", "", "directory for the demo root and socket, kept at exit (default: a temporary directory, removed at exit)")
	preset := fs.String("preset", "demo", "router shape to simulate: "+strings.Join(fixture.PresetNames(), ", "))
	pps := fs.Int("pps", 20000, "simulated packets per second on each rx ring, counted in softnet_stat where the live steering sends them (0: none)")
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	if *port < 0 || *port > 65535 {
		return usagef("--port %d: want 0-65535", *port)
	}
	if *pps < 0 || *pps > 100_000_000 {
		return usagef("--pps %d: want 0-100000000", *pps)
	}

	if _, ok := fixture.Preset(*preset); !ok {
		return usagef("--preset %q: want one of %s", *preset, strings.Join(fixture.PresetNames(), ", "))
	}

	d, err := demorun.Start(ctx, demorun.Config{Dir: *dir, Port: *port, PPS: *pps, Preset: *preset, Log: env.stderr})
	if err != nil {
		return err
	}
	d.PrintIntro(env.stdout)
	<-ctx.Done()
	fmt.Fprintln(env.stdout, "packet-steering demo: stopping")
	if err := d.Stop(); err != nil {
		return err
	}
	if d.RemoveDir {
		fmt.Fprintf(env.stdout, "packet-steering demo: stopped, removed %s\n", d.Dir)
	} else {
		fmt.Fprintf(env.stdout, "packet-steering demo: stopped, kept %s\n", d.Dir)
	}
	return nil
}
