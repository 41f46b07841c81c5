package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/daemon"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// pluginName is the name the binary answers rpcd's exec protocol under:
// rpcd runs /usr/libexec/rpcd/packet_steering, a symlink to
// /usr/sbin/packet-steering, and names the object after the file.
const pluginName = ubusobj.Path

// pluginCallTimeout bounds one call of the plugin, so that it answers
// (rather than being killed mid-way) within rpcd's timeout: 30 s in the
// OpenWrt package's /etc/config/rpcd, 120 s in rpcd itself. A call blocked
// that long (another apply holding the lock) fails with NO_DATA.
const pluginCallTimeout = 20 * time.Second

// pluginRootEnv names the environment variable that gives the plugin
// another root than / (a fixture root, for tests and measurements with a
// real rpcd): rpcd passes its environment to the plugins it runs.
const pluginRootEnv = "PACKET_STEERING_ROOT"

// pluginRoot is the root the plugin serves: / unless pluginRootEnv says.
func pluginRoot() string {
	if r := os.Getenv(pluginRootEnv); r != "" {
		return r
	}
	return "/"
}

// isPlugin reports whether argv0 names the rpcd exec plugin.
func isPlugin(argv0 string) bool { return filepath.Base(argv0) == pluginName }

// pluginConfig is one run of the plugin.
type pluginConfig struct {
	root    string
	timeout time.Duration
}

// runPlugin is the binary run by rpcd as /usr/libexec/rpcd/packet_steering:
// `list` prints the method signatures (or {} while the daemon owns the
// object), `call METHOD` answers one call with the daemon's validation,
// engine (locks, persistence, apply) and reply (see ubusobj.ExecCall). The
// exit status is 0, or the ubus status the daemon would have replied, for
// people running it by hand; rpcd reads only stdout.
func runPlugin(ctx context.Context, env *cliEnv, args []string, cfg pluginConfig) int {
	verb := strings.Join(args, " ")
	if verb != "list" && (len(args) != 2 || args[0] != "call") {
		fmt.Fprintln(env.stderr, "usage: "+pluginName+" list | "+pluginName+" call METHOD  (the rpcd exec plugin protocol; arguments as JSON on stdin)")
		return 2
	}
	eng := oneShotEngine(cfg.root, steering.WithLockWait(cfg.timeout))
	var err error
	if verb == "list" {
		err = ubusobj.ExecList(env.stdout, pluginServes(ctx, eng, cfg.root))
	} else {
		ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
		// rpcd discards stderr: on a router, applies and failures go to
		// the system log as the daemon's do.
		log := daemon.NewLogger(env.stderr, false)
		if cfg.root == "/" {
			if sys, err := daemon.DialSyslog(daemon.DefaultSyslogPath, "packet-steering"); err == nil {
				defer sys.Close()
				log = daemon.NewSyslogLogger(sys, env.stderr, false)
			}
		}
		obj := ubusobj.New(eng, ubusobj.Options{Server: steering.ServerRPCD, Logger: log})
		err = obj.ExecCall(ctx, args[1], env.stdin, env.stdout)
	}
	if err == nil {
		return 0
	}
	fmt.Fprintf(env.stderr, "%s %s: %v\n", pluginName, verb, err)
	return int(ubus.StatusOf(err))
}

// pluginServes decides whether `list` registers the object: as the init
// script last recorded it (steering.OwnerFile), else, before the init
// script ran at boot, as steering.ResolveServer decides. When in doubt it
// does not: the daemon may own the name.
func pluginServes(ctx context.Context, eng *steering.Engine, root string) bool {
	if b, err := os.ReadFile(outline.JoinPath(root, steering.OwnerFile)); err == nil {
		return strings.TrimSpace(string(b)) == string(steering.ServerRPCD)
	}
	c, err := eng.Server(ctx)
	return err == nil && c.Server == steering.ServerRPCD
}

// runOwner is `packet-steering owner [--root DIR]`: prints who serves the
// ubus object, "daemon" or "rpcd" (steering.ResolveServer), for the init
// script; a value of the option it does not understand is named on stderr.
func runOwner(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "owner", "owner [--root DIR]", "").withRoot()
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	sc, err := steering.NewEngine(c.rootDir()).Server(ctx)
	if err != nil {
		return err
	}
	if sc.Problem != "" {
		fmt.Fprintln(env.stderr, sc.Problem)
	}
	_, err = fmt.Fprintln(env.stdout, sc.Server)
	return err
}

// oneShotEngine is the engine of a process that serves one request (the
// rpcd plugin, `apply`, `status`): the daemon's engine, keeping its live
// settings and last apply in steering.StateFile below root so that the
// next process sees them.
func oneShotEngine(root string, opts ...steering.Option) *steering.Engine {
	return steering.NewEngine(root, append([]steering.Option{steering.WithStateFile(outline.JoinPath(root, steering.StateFile))}, opts...)...)
}
