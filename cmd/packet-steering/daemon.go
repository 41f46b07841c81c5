package main

import (
	"context"

	"github.com/packet-steering/packet-steering/daemon"
	"github.com/packet-steering/packet-steering/internal/ubus"
)

// runDaemon is `packet-steering daemon [--socket PATH] [--root DIR]
// [--debug] [--log auto|syslog|stderr]`: the flags, then package daemon
// (daemon.Run) serves until ctx (SIGTERM, SIGINT) is done.
func runDaemon(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "daemon", "daemon [--socket PATH] [--root DIR] [--debug] [--log auto|syslog|stderr]", "").withRoot()
	fs := c.fs
	socket := fs.String("socket", "", "ubus socket (default "+ubus.DefaultSocket+", then "+ubus.LegacySocket+")")
	debug := fs.Bool("debug", false, "also log refused calls and connection attempts")
	logTo := fs.String("log", "auto", "where to log: syslog, stderr, or auto (syslog when "+daemon.DefaultSyslogPath+" takes it)")
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	switch *logTo {
	case "auto", "syslog", "stderr":
	default:
		return usagef("--log %q: want auto, syslog or stderr", *logTo)
	}
	return daemon.Run(ctx, daemon.Options{Root: c.rootDir(), Socket: *socket, Debug: *debug, Log: *logTo, Stderr: env.stderr})
}
