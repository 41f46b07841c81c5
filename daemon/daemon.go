package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	rtdebug "runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// Package daemon is the packet_steering ubus service: it serves the object
// (package ubusobj) over a reconnecting client, applies at start and on
// SIGHUP, runs the adaptive mode's control loop while the mode is adaptive
// (adaptiveRunner), hands memory back when idle (idleTrimmer), watches
// procd's services to take steering back from netifd's (serviceWatch) and
// logs to syslog or stderr (Logger). cmd/packet-steering parses the
// command line and calls Run; the demo calls Serve over its in-process
// broker.

// gcPercent is the daemon's GOGC unless the environment sets one.
const gcPercent = 25

// memoryLimit is the daemon's GOMEMLIMIT unless the environment sets
// one: a soft limit on the Go runtime's memory that makes the collector work
// harder instead of growing past it. The daemon needs 4-7 MiB even under an
// invoke flood (README, "Reliability"); the limit keeps a surprise within a
// small router's budget.
const memoryLimit = 16 << 20

// Config is one run of the daemon (Serve).
type Config struct {
	// Socket is the broker's socket ("" tries the default paths).
	Socket string
	// Engine is what the object serves (a *steering.Engine; tests hand in
	// engines that fail or stall).
	Engine ubusobj.Engine
	// Loop runs the adaptive mode's control loop (a *steering.Engine, the
	// Engine's); nil runs none, whatever the mode.
	Loop AdaptiveLoop
	Log  *Logger
	// Hup delivers SIGHUP: re-apply with reason "sighup".
	Hup <-chan os.Signal
	// ConnectWait bounds how long the start apply waits for the broker, so
	// its event reaches listeners when the broker is up; steering is
	// applied regardless.
	ConnectWait time.Duration
	// DrainWait bounds how long a stop waits for the calls in progress.
	DrainWait time.Duration
	// TrimIdle > 0: Trim runs once the engine has been idle that long after
	// a call or an apply (see idleTrimmer); 0 never trims.
	TrimIdle time.Duration
	Trim     func()
	// Takeover, when set, takes steering back from netifd's service when
	// procd announces that it started (serviceWatch); nil watches nothing.
	Takeover func(ctx context.Context, apply func(reason string))
	// Adaptive, when set, configures the adaptive mode's loop instead of
	// the `config adaptive` section of UCI (zero: from UCI).
	Adaptive adaptive.Config
}

// DrainWait bounds how long a stop waits for the calls in progress:
// well inside the 5 s procd waits after SIGTERM before it kills the
// instance (term_timeout, set to 5 in /etc/init.d/packet-steering), so
// that the daemon always exits on its own. An apply takes milliseconds.
const DrainWait = 3 * time.Second

// Options are the daemon's command line: `packet-steering daemon
// [--socket PATH] [--root DIR] [--debug] [--log auto|syslog|stderr]`.
type Options struct {
	// Root is the machine's root ("/" on a router).
	Root string
	// Socket is the broker's socket ("" tries the default paths).
	Socket string
	// Debug also logs refused calls and connection attempts.
	Debug bool
	// Log is where to log: "syslog", "stderr", or "auto" (syslog when
	// DefaultSyslogPath takes it, else stderr).
	Log string
	// Stderr is the process's standard error.
	Stderr io.Writer
}

// Run is the daemon: connect to ubus (reconnecting whenever the broker
// goes away), register packet_steering, apply once (reason "start") and
// serve. SIGHUP re-applies; ctx (SIGTERM and SIGINT) stops it after the
// calls in progress have replied. It refuses to run where the rpcd
// plugin serves the object.
func Run(ctx context.Context, o Options) error {
	if o.Log != "auto" && o.Log != "syslog" && o.Log != "stderr" {
		return outline.Errorf("--log %q: want auto, syslog or stderr", o.Log)
	}
	eng := steering.NewEngine(o.Root)
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
		rtdebug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		rtdebug.SetMemoryLimit(memoryLimit)
	}
	log := NewLogger(o.Stderr, o.Debug)
	if o.Log != "stderr" {
		sys, err := DialSyslog(DefaultSyslogPath, "packet-steering")
		if err != nil && o.Log == "syslog" {
			return err
		}
		if err == nil {
			defer sys.Close()
			log = NewSyslogLogger(sys, o.Stderr, o.Debug)
		}
	}
	var takeover func(context.Context, func(string))
	if _, err := os.Stat(ownInit); err == nil && o.Root == "/" {
		takeover = runTakeover(log, o.Socket)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return Serve(ctx, Config{
		Socket:      o.Socket,
		Engine:      eng,
		Loop:        eng,
		Log:         log,
		Takeover:    takeover,
		Hup:         hup,
		ConnectWait: 2 * time.Second,
		DrainWait:   DrainWait,
		TrimIdle:    2 * time.Second,
		Trim:        rtdebug.FreeOSMemory,
	})
}

// Serve runs the daemon until ctx is done. It wakes only for calls,
// signals and connection changes: no timers run while it is idle and
// connected.
func Serve(ctx context.Context, cfg Config) error {
	// The adaptive loop runs on the engine itself; its moves go through
	// the object (logged and announced) and the served engine below.
	var obj *ubusobj.Object
	runner := &adaptiveRunner{log: cfg.Log, run: func(context.Context, adaptive.Config) error { return nil }}
	if l := cfg.Loop; l != nil {
		runner.config = func() adaptive.Config { return l.AdaptiveSettings().Config }
		if cfg.Adaptive != (adaptive.Config{}) {
			runner.config = func() adaptive.Config { return cfg.Adaptive }
		}
		runner.run = func(ctx context.Context, acfg adaptive.Config) error {
			return l.RunAdaptive(ctx, acfg, obj.Adapt)
		}
	}
	defer runner.stop()
	served := &servedEngine{Engine: cfg.Engine, r: runner}
	if cfg.TrimIdle > 0 && cfg.Trim != nil {
		served.t = &idleTrimmer{after: cfg.TrimIdle, trim: cfg.Trim}
		defer served.t.stop()
	}
	cfg.Engine = served
	connected := make(chan struct{})
	var once sync.Once
	var watch *serviceWatch
	client := ubus.NewClient(cfg.Socket, ubus.WithLogger(cfg.Log),
		ubus.WithOnConnect(func(ctx context.Context, conn *ubus.Conn) {
			once.Do(func() { close(connected) })
			if watch != nil {
				watch.subscribe(ctx, conn)
			}
		}))
	obj = ubusobj.New(cfg.Engine, ubusobj.Options{Events: client, Logger: cfg.Log})
	if cfg.Takeover != nil {
		watch = &serviceWatch{log: cfg.Log, takeover: cfg.Takeover, apply: func(reason string) {
			if _, err := obj.Apply(context.WithoutCancel(ctx), steering.ApplyRequest{Reason: reason}); err != nil {
				cfg.Log.Error("apply failed", "reason", reason, "err", err)
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

	wait := time.NewTimer(cfg.ConnectWait)
	select {
	case <-connected:
	case <-wait.C:
		cfg.Log.Warn("ubus not reachable yet, applying anyway", "socket", socketName(cfg.Socket))
	case <-ctx.Done():
	}
	wait.Stop()
	apply := func(reason string) {
		if _, err := obj.Apply(ctx, steering.ApplyRequest{Reason: reason}); err != nil {
			cfg.Log.Error("apply failed", "reason", reason, "err", err)
		}
	}
	if ctx.Err() == nil {
		apply("start")
		if st, err := cfg.Engine.Status(ctx); err == nil && st.UnfinishedApply != nil {
			u := st.UnfinishedApply
			cfg.Log.Warn("the previous apply did not finish (killed midway); the start apply re-applied every device",
				"reason", u.Reason, "pid", u.PID, "started", u.Started.Format(time.RFC3339))
		}
		cfg.Log.Info("serving", "object", ubusobj.Path, "pid", os.Getpid())
	}
	for {
		select {
		case <-ctx.Done():
			cfg.Log.Info("stopping")
			runner.stop()
			dctx, cancel := context.WithTimeout(context.Background(), cfg.DrainWait)
			err := obj.Drain(dctx)
			cancel()
			if err != nil {
				cfg.Log.Warn("calls still in progress at exit", "err", err)
			}
			return nil
		case <-cfg.Hup:
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

	mu    outline.Mutex
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

// servedEngine is the engine as the object sees it: each call pokes the
// idleTrimmer (t, nil when the daemon does not trim) when it returns, and
// every apply and mode change tells the adaptive runner its mode, so that
// the loop runs exactly while the mode is adaptive.
type servedEngine struct {
	_ outline.NoCompare
	ubusobj.Engine
	r *adaptiveRunner
	t *idleTrimmer
}

//go:noinline
func (e *servedEngine) poke() {
	if e.t != nil {
		e.t.poke()
	}
}

func (e *servedEngine) Status(ctx context.Context) (*steering.Status, error) {
	defer e.poke()
	return e.Engine.Status(ctx)
}

func (e *servedEngine) Queues(ctx context.Context, device string) ([]steering.DeviceQueues, error) {
	defer e.poke()
	return e.Engine.Queues(ctx, device)
}

func (e *servedEngine) StatusQueues(ctx context.Context) (*steering.Status, []steering.DeviceQueues, error) {
	defer e.poke()
	return e.Engine.StatusQueues(ctx)
}

func (e *servedEngine) Apply(ctx context.Context, req steering.ApplyRequest) (*steering.Result, error) {
	defer e.poke()
	res, err := e.Engine.Apply(ctx, req)
	if err == nil && !req.DryRun {
		e.r.sync(res.Mode, res.Seq)
	}
	return res, err
}

func (e *servedEngine) SetMode(ctx context.Context, req steering.SetModeRequest) (*steering.Result, error) {
	defer e.poke()
	res, err := e.Engine.SetMode(ctx, req)
	if err == nil {
		e.r.sync(res.Mode, res.Seq)
	}
	return res, err
}

// Adapt passes the loop's moves to the engine; it never syncs the runner
// (the loop itself calls it).
func (e *servedEngine) Adapt(ctx context.Context, moves []adaptive.Move) (*steering.Result, error) {
	defer e.poke()
	a, ok := e.Engine.(ubusobj.Adapter)
	if !ok {
		return nil, errors.New("the engine cannot apply adaptive moves")
	}
	return a.Adapt(ctx, moves)
}
