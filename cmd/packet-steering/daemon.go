package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// daemonConfig is one run of the daemon.
type daemonConfig struct {
	// socket is the broker's socket ("" tries the default paths).
	socket string
	engine ubusobj.Engine
	log    *lineLogger
	// hup delivers SIGHUP: re-apply with reason "sighup".
	hup <-chan os.Signal
	// connectWait bounds how long the start apply waits for the broker, so
	// its event reaches listeners when the broker is up; steering is
	// applied regardless.
	connectWait time.Duration
	// drainWait bounds how long a stop waits for the calls in progress.
	drainWait time.Duration
}

// runDaemon is `packet-steering daemon [--socket PATH] [--root DIR]`:
// connect to ubus (reconnecting whenever the broker goes away), register
// packet_steering, apply once (reason "start") and serve. SIGHUP re-applies;
// SIGTERM and SIGINT (ctx) stop after the calls in progress have replied.
func runDaemon(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	socket := fs.String("socket", "", "ubus socket (default "+ubus.DefaultSocket+", then "+ubus.LegacySocket+")")
	root := fs.String("root", "/", "root of the machine to steer (a fixture directory in tests)")
	debug := fs.Bool("debug", false, "also log refused calls and connection attempts")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: packet-steering daemon [--socket PATH] [--root DIR] [--debug]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if fi, err := os.Stat(*root); err != nil || !fi.IsDir() {
		return usagef("--root %s: not a directory", *root)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serveDaemon(ctx, daemonConfig{
		socket:      *socket,
		engine:      steering.NewEngine(*root),
		log:         newDaemonLogger(env.stderr, *debug),
		hup:         hup,
		connectWait: 2 * time.Second,
		drainWait:   30 * time.Second,
	})
}

// serveDaemon runs the daemon until ctx is done. It wakes only for calls,
// signals and connection changes: no timers run while it is idle and
// connected.
func serveDaemon(ctx context.Context, cfg daemonConfig) error {
	connected := make(chan struct{})
	var once sync.Once
	client := ubus.NewClient(cfg.socket, ubus.WithLogger(cfg.log),
		ubus.WithOnConnect(func(context.Context, *ubus.Conn) { once.Do(func() { close(connected) }) }))
	obj := ubusobj.New(cfg.engine, ubusobj.Options{Events: client, Logger: cfg.log})
	client.Register(obj.UbusObject())

	// The connection outlives ctx until the calls in progress have replied.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	runDone := make(chan error, 1)
	go func() { runDone <- client.Run(runCtx) }()
	defer func() {
		stopRun()
		<-runDone
	}()

	wait := time.NewTimer(cfg.connectWait)
	select {
	case <-connected:
	case <-wait.C:
		cfg.log.Warn("ubus not reachable yet, applying anyway", "socket", socketName(cfg.socket))
	case <-ctx.Done():
	}
	wait.Stop()
	apply := func(reason string) {
		if _, err := obj.Apply(ctx, steering.ApplyRequest{Reason: reason}); err != nil {
			cfg.log.Error("apply failed", "reason", reason, "err", err)
		}
	}
	if ctx.Err() == nil {
		apply("start")
		cfg.log.Info("serving", "object", ubusobj.Path, "pid", os.Getpid())
	}
	for {
		select {
		case <-ctx.Done():
			cfg.log.Info("stopping")
			dctx, cancel := context.WithTimeout(context.Background(), cfg.drainWait)
			err := obj.Drain(dctx)
			cancel()
			if err != nil {
				cfg.log.Warn("calls still in progress at exit", "err", err)
			}
			return nil
		case <-cfg.hup:
			apply("sighup")
		}
	}
}

func socketName(s string) string {
	if s == "" {
		return ubus.DefaultSocket + " or " + ubus.LegacySocket
	}
	return s
}
