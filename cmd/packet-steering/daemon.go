package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	rtdebug "runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// daemonGCPercent is the daemon's GOGC unless the environment sets one.
const daemonGCPercent = 25

// daemonMemoryLimit is the daemon's GOMEMLIMIT unless the environment sets
// one: a soft limit on the Go runtime's memory that makes the collector work
// harder instead of growing past it. The daemon needs 4-7 MiB even under an
// invoke flood (README, "Reliability"); the limit keeps a surprise within a
// small router's budget.
const daemonMemoryLimit = 16 << 20

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
	// trimIdle > 0: trim runs once the engine has been idle that long after
	// a call or an apply (see idleTrimmer); 0 never trims.
	trimIdle time.Duration
	trim     func()
	// takeover, when set, takes steering back from netifd's service when
	// procd announces that it started (serviceWatch); nil watches nothing.
	takeover func(ctx context.Context, apply func(reason string))
	// adaptive, when set, configures the adaptive mode's loop instead of
	// the `config adaptive` section of UCI (zero: from UCI).
	adaptive steering.AdaptiveConfig
}

// daemonDrainWait bounds how long a stop waits for the calls in progress:
// well inside the 5 s procd waits after SIGTERM before it kills the
// instance (term_timeout, set to 5 in /etc/init.d/packet-steering), so
// that the daemon always exits on its own. An apply takes milliseconds.
const daemonDrainWait = 3 * time.Second

// runDaemon is `packet-steering daemon [--socket PATH] [--root DIR]`:
// connect to ubus (reconnecting whenever the broker goes away), register
// packet_steering, apply once (reason "start") and serve. SIGHUP re-applies;
// SIGTERM and SIGINT (ctx) stop after the calls in progress have replied.
func runDaemon(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "daemon", "daemon [--socket PATH] [--root DIR] [--debug] [--log auto|syslog|stderr]", "").withRoot()
	fs := c.fs
	socket := fs.String("socket", "", "ubus socket (default "+ubus.DefaultSocket+", then "+ubus.LegacySocket+")")
	debug := fs.Bool("debug", false, "also log refused calls and connection attempts")
	logTo := fs.String("log", "auto", "where to log: syslog, stderr, or auto (syslog when "+defaultSyslogPath+" takes it)")
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	eng := steering.NewEngine(c.rootDir())
	// Never both: where rpcd's exec plugin serves the object (its `list`
	// registered it), a daemon could not register it anyway.
	if sc, err := eng.Server(ctx); err != nil {
		return err
	} else if sc.Server != steering.ServerDaemon {
		return errors.New("rpcd serves packet_steering here (packet_steering.globals.daemon " + sc.Setting + "): set the option to 1 to run the daemon")
	}
	if os.Getenv("GOGC") == "" {
		// A smaller heap goal than Go's default 100: the daemon's live heap
		// is well under 1 MiB, and the goal bounds how far a burst of calls
		// grows the process before idleTrimmer hands the pages back.
		rtdebug.SetGCPercent(daemonGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		rtdebug.SetMemoryLimit(daemonMemoryLimit)
	}
	log := newDaemonLogger(env.stderr, *debug)
	switch *logTo {
	case "stderr":
	case "auto", "syslog":
		sys, err := dialSyslog(defaultSyslogPath, "packet-steering")
		if err != nil {
			if *logTo == "syslog" {
				return err
			}
			break
		}
		defer sys.Close()
		log = newSyslogLogger(sys, env.stderr, *debug)
	default:
		return usagef("--log %q: want auto, syslog or stderr", *logTo)
	}
	var takeover func(context.Context, func(string))
	if _, err := os.Stat(ownInit); err == nil && c.rootDir() == "/" {
		takeover = runTakeover(log, *socket)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serveDaemon(ctx, daemonConfig{
		socket:      *socket,
		engine:      eng,
		log:         log,
		takeover:    takeover,
		hup:         hup,
		connectWait: 2 * time.Second,
		drainWait:   daemonDrainWait,
		trimIdle:    2 * time.Second,
		trim:        rtdebug.FreeOSMemory,
	})
}

// serveDaemon runs the daemon until ctx is done. It wakes only for calls,
// signals and connection changes: no timers run while it is idle and
// connected.
func serveDaemon(ctx context.Context, cfg daemonConfig) error {
	// The adaptive loop runs on the engine itself; its moves go through
	// the object (logged and announced) and the wrappers below.
	var obj *ubusobj.Object
	runner := &adaptiveRunner{log: cfg.log, run: func(context.Context, steering.AdaptiveConfig) error { return nil }}
	if l, ok := cfg.engine.(adaptiveLooper); ok {
		runner.config = func() steering.AdaptiveConfig { return l.AdaptiveSettings().Config }
		if cfg.adaptive != (steering.AdaptiveConfig{}) {
			runner.config = func() steering.AdaptiveConfig { return cfg.adaptive }
		}
		runner.run = func(ctx context.Context, acfg steering.AdaptiveConfig) error {
			return l.RunAdaptive(ctx, acfg, obj.Adapt)
		}
	}
	defer runner.stop()
	if cfg.trimIdle > 0 && cfg.trim != nil {
		t := &idleTrimmer{after: cfg.trimIdle, trim: cfg.trim}
		defer t.stop()
		cfg.engine = trimmingEngine{Engine: cfg.engine, t: t}
	}
	cfg.engine = modeEngine{Engine: cfg.engine, r: runner}
	connected := make(chan struct{})
	var once sync.Once
	var watch *serviceWatch
	client := ubus.NewClient(cfg.socket, ubus.WithLogger(cfg.log),
		ubus.WithOnConnect(func(ctx context.Context, conn *ubus.Conn) {
			once.Do(func() { close(connected) })
			if watch != nil {
				watch.subscribe(ctx, conn)
			}
		}))
	obj = ubusobj.New(cfg.engine, ubusobj.Options{Events: client, Logger: cfg.log})
	if cfg.takeover != nil {
		watch = &serviceWatch{log: cfg.log, takeover: cfg.takeover, apply: func(reason string) {
			if _, err := obj.Apply(context.WithoutCancel(ctx), steering.ApplyRequest{Reason: reason}); err != nil {
				cfg.log.Error("apply failed", "reason", reason, "err", err)
			}
		}}
	}
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
		if st, err := cfg.engine.Status(ctx); err == nil && st.UnfinishedApply != nil {
			u := st.UnfinishedApply
			cfg.log.Warn("the previous apply did not finish (killed midway); the start apply re-applied every device",
				"reason", u.Reason, "pid", u.PID, "started", u.Started.Format(time.RFC3339))
		}
		cfg.log.Info("serving", "object", ubusobj.Path, "pid", os.Getpid())
	}
	for {
		select {
		case <-ctx.Done():
			cfg.log.Info("stopping")
			runner.stop()
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

// idleTrimmer runs trim (debug.FreeOSMemory in the daemon) once the daemon
// has been idle for after since its last call or apply. A burst of calls
// (LuCI polling, a hotplug storm) grows the heap to the garbage collector's
// goal, about 4 MiB, and the runtime keeps those pages while nothing
// allocates; trimming them keeps an idle daemon near its start-up RSS. The
// timer is one-shot and re-armed only by work, so an idle daemon has no
// timer running and no wake-ups.
type idleTrimmer struct {
	after time.Duration
	trim  func()

	mu    sync.Mutex
	timer *time.Timer
}

// poke (re)starts the wait: trim runs after the last of a series of pokes.
func (t *idleTrimmer) poke() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer == nil {
		t.timer = time.AfterFunc(t.after, t.trim)
		return
	}
	t.timer.Reset(t.after)
}

// stop cancels a pending trim.
func (t *idleTrimmer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
	}
}

// trimmingEngine pokes its idleTrimmer when each engine call returns.
type trimmingEngine struct {
	ubusobj.Engine
	t *idleTrimmer
}

func (e trimmingEngine) Status(ctx context.Context) (*steering.Status, error) {
	defer e.t.poke()
	return e.Engine.Status(ctx)
}

func (e trimmingEngine) Queues(ctx context.Context, device string) ([]steering.DeviceQueues, error) {
	defer e.t.poke()
	return e.Engine.Queues(ctx, device)
}

func (e trimmingEngine) Apply(ctx context.Context, req steering.ApplyRequest) (*steering.Result, error) {
	defer e.t.poke()
	return e.Engine.Apply(ctx, req)
}

func (e trimmingEngine) SetMode(ctx context.Context, req steering.SetModeRequest) (*steering.Result, error) {
	defer e.t.poke()
	return e.Engine.SetMode(ctx, req)
}

func (e trimmingEngine) Adapt(ctx context.Context, moves []steering.Move) (*steering.Result, error) {
	defer e.t.poke()
	return adapt(ctx, e.Engine, moves)
}
