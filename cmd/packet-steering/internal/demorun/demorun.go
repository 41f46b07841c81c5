// Package demorun is `packet-steering demo`: a simulated router (a fixture
// preset built in a directory), an in-process ubus broker, the real daemon
// (package daemon) serving packet_steering on it, and the LuCI page over
// HTTP (internal/demo). It is left out of the router build
// (cmd/packet-steering/feature_demo.go).
package demorun

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

// Run is a running demo; Stop undoes Start in reverse order.
type Run struct {
	// Dir holds the demo: Root (the simulated router) and Sock (the
	// broker's socket). RemoveDir: Dir is temporary and Stop removes it.
	Dir, Root, Sock string
	RemoveDir       bool
	// URL is the HTTP server's, Page the LuCI page's.
	URL  string
	Page string

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

// startWait bounds how long Start waits for the daemon's start apply.
const startWait = 10 * time.Second

// Config is one demo.
type Config struct {
	// Dir is where the demo lives, kept at exit; "" is a temporary
	// directory, removed by Stop.
	Dir string
	// Port is the HTTP server's on 127.0.0.1 (0: any free port).
	Port int
	// PPS > 0 simulates that many packets per second on each rx ring.
	PPS int
	// Preset is the fixture preset to simulate.
	Preset string
	// Log receives the daemon's log.
	Log io.Writer
}

// Start starts a demo; on error what was started is stopped again.
func Start(ctx context.Context, cfg Config) (d *Run, err error) {
	d = &Run{Dir: cfg.Dir, pps: cfg.PPS}
	port, pps, preset, log := cfg.Port, cfg.PPS, cfg.Preset, cfg.Log
	defer func() {
		if err != nil {
			_ = d.Stop()
		}
	}()
	if d.Dir == "" {
		if d.Dir, err = os.MkdirTemp("", "packet-steering-demo-"); err != nil {
			return d, fmt.Errorf("demo: %w", err)
		}
		d.RemoveDir = true
	} else if err = os.MkdirAll(d.Dir, 0o755); err != nil {
		return d, fmt.Errorf("demo: %w", err)
	}
	if d.Dir, err = filepath.Abs(d.Dir); err != nil {
		return d, fmt.Errorf("demo: %w", err)
	}
	d.Root = filepath.Join(d.Dir, "root")
	d.Sock = filepath.Join(d.Dir, "ubus.sock")
	if len(d.Sock) >= 108 {
		return d, fmt.Errorf("demo: socket path %s is too long for a unix socket; use a shorter --dir", d.Sock)
	}

	spec, ok := fixture.Preset(preset)
	if !ok {
		return d, fmt.Errorf("demo: no fixture preset %q", preset)
	}
	if _, err := os.Stat(d.Root); err == nil {
		return d, fmt.Errorf("demo: %s exists; use an empty --dir", d.Root)
	}
	if err := fixture.Build(d.Root, spec); err != nil {
		return d, fmt.Errorf("demo: build the demo router: %w", err)
	}

	if d.broker, err = ubustest.Listen(d.Sock); err != nil {
		return d, fmt.Errorf("demo: ubus broker: %w", err)
	}

	// The daemon, as on a router: it connects, registers packet_steering,
	// applies (reason "start") and serves, and runs the adaptive loop
	// while the mode is adaptive.
	engine := steering.NewEngine(d.Root)
	dctx, stopDaemon := context.WithCancel(context.Background())
	d.stopDaemon, d.daemonDone = stopDaemon, make(chan error, 1)
	go func() {
		d.daemonDone <- daemon.Serve(dctx, daemon.Config{
			Socket: d.Sock, Engine: engine, Loop: engine, Log: daemon.NewLogger(log, false),
			ConnectWait: 2 * time.Second, DrainWait: daemon.DrainWait,
		})
	}()
	// The web side: a second client, as uhttpd is on a router.
	if d.bridge, err = ubus.Dial(ctx, d.Sock); err != nil {
		return d, fmt.Errorf("demo: bridge connection: %w", err)
	}
	if err := waitStarted(ctx, d.bridge, startWait); err != nil {
		return d, err
	}
	srv, err := demo.NewServer(demo.Config{
		Bus:      demo.UbusBus{C: d.bridge},
		App:      luciapp.Files(),
		Hostname: demoHostname(d.Root),
	})
	if err != nil {
		return d, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return d, fmt.Errorf("demo: %w", err)
	}
	d.URL = "http://" + ln.Addr().String() + "/"
	d.Page = "http://" + ln.Addr().String() + srv.PagePath()
	sctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.served = make(chan error, 1)
	go func() { d.served <- srv.Serve(sctx, ln) }()
	if pps > 0 {
		d.traffic = make(chan error, 1)
		tr := demo.Traffic{Root: d.Root, Queues: demo.BusQueues{Bus: demo.UbusBus{C: d.bridge}}, PPS: float64(pps), Vary: 0.3}
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

// PrintIntro writes what the demo runs and how to try it.
func (d *Run) PrintIntro(w io.Writer) {
	fmt.Fprintf(w, "packet-steering demo: a simulated router in %s\n", d.Root)
	fmt.Fprintf(w, "  open  %s\n", d.URL)
	fmt.Fprintf(w, "  try   packet-steering call --socket %s status\n", d.Sock)
	fmt.Fprintf(w, "        packet-steering call --socket %s get_queues '{\"device\":\"eth0\"}'\n", d.Sock)
	fmt.Fprintf(w, "        packet-steering call --socket %s set_mode '{\"mode\":\"legacy\"}'\n", d.Sock)
	// As with uhttpd and rpcd: log in first (root or viewer, empty
	// password), then call with the session id the login returned.
	fmt.Fprintf(w, "        curl -s %subus -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"call\",\"params\":[\"%s\",\"session\",\"login\",{\"username\":\"root\",\"password\":\"\"}]}'\n",
		d.URL, demo.DefaultSID)
	fmt.Fprintf(w, "        curl -s %subus -d '{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"call\",\"params\":[\"SID\",\"packet_steering\",\"status\",{}]}'   (SID: ubus_rpc_session from the login)\n",
		d.URL)
	fmt.Fprintf(w, "        curl -s %subus/list   (the objects and their methods, as uhttpd answers GET)\n", d.URL)
	fmt.Fprintf(w, "  read-only user: %s?user=viewer\n", d.Page)
	if d.pps > 0 {
		fmt.Fprintf(w, "  load  simulated: about %d packets/s on each rx ring, counted in proc/net/softnet_stat\n", d.pps)
		fmt.Fprintf(w, "        on the CPUs the live steering sends them to (placement only, no performance model)\n")
	}
	if d.RemoveDir {
		fmt.Fprintf(w, "  Ctrl-C stops the demo and removes %s\n", d.Dir)
	} else {
		fmt.Fprintf(w, "  Ctrl-C stops the demo; %s is kept\n", d.Dir)
	}
}

// Stop shuts down what Start started, newest first, and removes the
// temporary directory. It is safe on a partly started demo.
func (d *Run) Stop() error {
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
	if d.RemoveDir && d.Dir != "" {
		if err := os.RemoveAll(d.Dir); err != nil {
			errs = append(errs, fmt.Errorf("demo: %w", err))
		}
	}
	return errors.Join(errs...)
}
