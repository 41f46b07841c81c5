//go:build !router

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/daemon"
	"github.com/packet-steering/packet-steering/internal/demo"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	luciapp "github.com/packet-steering/packet-steering/luci-app-packet-steering"
	"github.com/packet-steering/packet-steering/platform/fixture"
	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// demoSummary is the demo's line in the usage.
const demoSummary = "run a demo router with the LuCI page in a browser"

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

	d, err := startDemo(ctx, *dir, *port, *pps, *preset, env.stderr)
	if err != nil {
		return err
	}
	d.printIntro(env)
	<-ctx.Done()
	fmt.Fprintln(env.stdout, "packet-steering demo: stopping")
	if err := d.stop(); err != nil {
		return err
	}
	if d.removeDir {
		fmt.Fprintf(env.stdout, "packet-steering demo: stopped, removed %s\n", d.dir)
	} else {
		fmt.Fprintf(env.stdout, "packet-steering demo: stopped, kept %s\n", d.dir)
	}
	return nil
}

// demoRun is a running demo; stop undoes startDemo in reverse order.
type demoRun struct {
	dir, root, sock string
	removeDir       bool
	url             string
	page            string // the LuCI page's URL

	broker *ubustest.Broker
	// stopDaemon ends the daemon (as SIGTERM does); daemonDone reports
	// its return.
	stopDaemon context.CancelFunc
	daemonDone chan error
	bridge     *ubus.Conn
	cancel     context.CancelFunc
	served     chan error
	// pps > 0 runs the simulated load; traffic reports its end.
	pps     int
	traffic chan error
}

// demoStartWait bounds how long startDemo waits for the daemon's start
// apply.
const demoStartWait = 10 * time.Second

// startDemo starts the demo; the daemon logs to log.
func startDemo(ctx context.Context, dir string, port, pps int, preset string, log io.Writer) (d *demoRun, err error) {
	d = &demoRun{dir: dir, pps: pps}
	defer func() {
		if err != nil {
			_ = d.stop()
		}
	}()
	if d.dir == "" {
		if d.dir, err = os.MkdirTemp("", "packet-steering-demo-"); err != nil {
			return d, fmt.Errorf("demo: %w", err)
		}
		d.removeDir = true
	} else if err = os.MkdirAll(d.dir, 0o755); err != nil {
		return d, fmt.Errorf("demo: %w", err)
	}
	if d.dir, err = filepath.Abs(d.dir); err != nil {
		return d, fmt.Errorf("demo: %w", err)
	}
	d.root = filepath.Join(d.dir, "root")
	d.sock = filepath.Join(d.dir, "ubus.sock")
	if len(d.sock) >= 108 {
		return d, fmt.Errorf("demo: socket path %s is too long for a unix socket; use a shorter --dir", d.sock)
	}

	spec, ok := fixture.Preset(preset)
	if !ok {
		return d, fmt.Errorf("demo: no fixture preset %q", preset)
	}
	if _, err := os.Stat(d.root); err == nil {
		return d, fmt.Errorf("demo: %s exists; use an empty --dir", d.root)
	}
	if err := fixture.Build(d.root, spec); err != nil {
		return d, fmt.Errorf("demo: build the demo router: %w", err)
	}

	if d.broker, err = ubustest.Listen(d.sock); err != nil {
		return d, fmt.Errorf("demo: ubus broker: %w", err)
	}

	// The daemon, as on a router: it connects, registers packet_steering,
	// applies (reason "start") and serves, and runs the adaptive loop
	// while the mode is adaptive.
	engine := steering.NewEngine(d.root)
	dctx, stopDaemon := context.WithCancel(context.Background())
	d.stopDaemon, d.daemonDone = stopDaemon, make(chan error, 1)
	go func() {
		d.daemonDone <- daemon.Serve(dctx, daemon.Config{
			Socket: d.sock, Engine: engine, Loop: engine, Log: daemon.NewLogger(log, false),
			ConnectWait: 2 * time.Second, DrainWait: daemon.DrainWait,
		})
	}()
	// The web side: a second client, as uhttpd is on a router.
	if d.bridge, err = ubus.Dial(ctx, d.sock); err != nil {
		return d, fmt.Errorf("demo: bridge connection: %w", err)
	}
	if err := waitStarted(ctx, d.bridge, demoStartWait); err != nil {
		return d, err
	}
	srv, err := demo.NewServer(demo.Config{
		Bus:      demo.UbusBus{C: d.bridge},
		App:      luciapp.Files(),
		Hostname: demoHostname(d.root),
	})
	if err != nil {
		return d, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return d, fmt.Errorf("demo: %w", err)
	}
	d.url = "http://" + ln.Addr().String() + "/"
	d.page = "http://" + ln.Addr().String() + srv.PagePath()
	sctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.served = make(chan error, 1)
	go func() { d.served <- srv.Serve(sctx, ln) }()
	if pps > 0 {
		d.traffic = make(chan error, 1)
		tr := demo.Traffic{Root: d.root, Queues: demo.BusQueues{Bus: demo.UbusBus{C: d.bridge}}, PPS: float64(pps), Vary: 0.3}
		go func() { d.traffic <- tr.Run(sctx) }()
	}
	return d, nil
}

// waitStarted waits until the daemon's start apply is done: its status
// shows a last apply.
func waitStarted(ctx context.Context, c *ubus.Conn, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		out, err := c.Call(ctx, ubusobj.Path, "status", nil)
		if err == nil {
			for _, a := range out {
				if a.Name == "last_apply" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: the daemon did not apply within %v (last: %v)", wait, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// demoHostname is the board's model as the fixture root shows it.
func demoHostname(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "tmp", "sysinfo", "model"))
	if s := strings.TrimSpace(string(b)); err == nil && s != "" {
		return s
	}
	return "OpenWrt"
}

func (d *demoRun) printIntro(env *cliEnv) {
	w := env.stdout
	fmt.Fprintf(w, "packet-steering demo: a simulated router in %s\n", d.root)
	fmt.Fprintf(w, "  open  %s\n", d.url)
	fmt.Fprintf(w, "  try   packet-steering call --socket %s status\n", d.sock)
	fmt.Fprintf(w, "        packet-steering call --socket %s get_queues '{\"device\":\"eth0\"}'\n", d.sock)
	fmt.Fprintf(w, "        packet-steering call --socket %s set_mode '{\"mode\":\"legacy\"}'\n", d.sock)
	// As with uhttpd and rpcd: log in first (root or viewer, empty
	// password), then call with the session id the login returned.
	fmt.Fprintf(w, "        curl -s %subus -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"call\",\"params\":[\"%s\",\"session\",\"login\",{\"username\":\"root\",\"password\":\"\"}]}'\n",
		d.url, demo.DefaultSID)
	fmt.Fprintf(w, "        curl -s %subus -d '{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"call\",\"params\":[\"SID\",\"packet_steering\",\"status\",{}]}'   (SID: ubus_rpc_session from the login)\n",
		d.url)
	fmt.Fprintf(w, "        curl -s %subus/list   (the objects and their methods, as uhttpd answers GET)\n", d.url)
	fmt.Fprintf(w, "  read-only user: %s?user=viewer\n", d.page)
	if d.pps > 0 {
		fmt.Fprintf(w, "  load  simulated: about %d packets/s on each rx ring, counted in proc/net/softnet_stat\n", d.pps)
		fmt.Fprintf(w, "        on the CPUs the live steering sends them to (placement only, no performance model)\n")
	}
	if d.removeDir {
		fmt.Fprintf(w, "  Ctrl-C stops the demo and removes %s\n", d.dir)
	} else {
		fmt.Fprintf(w, "  Ctrl-C stops the demo; %s is kept\n", d.dir)
	}
}

// stop shuts down what startDemo started, newest first, and removes the
// temporary directory. It is safe on a partly started demo.
func (d *demoRun) stop() error {
	var errs []error
	if d.cancel != nil {
		d.cancel()
		if err := <-d.served; err != nil {
			errs = append(errs, err)
		}
		if d.traffic != nil {
			if err := <-d.traffic; err != nil {
				errs = append(errs, err)
			}
			d.traffic = nil
		}
		d.cancel = nil
	}
	if d.bridge != nil {
		_ = d.bridge.Close()
		d.bridge = nil
	}
	if d.stopDaemon != nil {
		d.stopDaemon()
		if err := <-d.daemonDone; err != nil {
			errs = append(errs, fmt.Errorf("demo: daemon: %w", err))
		}
		d.stopDaemon = nil
	}
	if d.broker != nil {
		if err := d.broker.Close(); err != nil {
			errs = append(errs, fmt.Errorf("demo: broker: %w", err))
		}
		d.broker = nil
	}
	if d.removeDir && d.dir != "" {
		if err := os.RemoveAll(d.dir); err != nil {
			errs = append(errs, fmt.Errorf("demo: %w", err))
		}
	}
	return errors.Join(errs...)
}
