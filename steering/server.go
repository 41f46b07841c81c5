package steering

import (
	"context"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// Server is the program that serves the ubus object packet_steering: the
// resident daemon, or rpcd running the same binary as an exec plugin for
// each call (no resident process, no events).
type Server string

// The two servers, as `packet-steering owner` prints them and the status
// reply's service.served_by names them.
const (
	ServerDaemon Server = "daemon"
	ServerRPCD   Server = "rpcd"
)

// OwnerFile records, below the root, who the init script last made serve
// the object: "daemon", "rpcd", or "stopped" once the service stopped.
// While it exists the plugin's `list` follows it (it lists the methods only
// for "rpcd"); at boot, before the init script ran, ResolveServer decides.
// /var/run is a tmpfs: the record does not outlive a reboot.
const OwnerFile = "var/run/packet-steering/owner"

// ServerChoice is who serves the object and why.
type ServerChoice struct {
	Server Server
	// Setting is packet_steering.globals.daemon as it was read ("auto"
	// when unset); Problem says why a value was not understood.
	Setting string
	Problem string
	// CPUs is the number of online CPUs auto decided on.
	CPUs int
}

// ResolveServer decides who serves the object from
// packet_steering.globals.daemon: "1" the daemon, "0" rpcd's exec plugin,
// "auto" (also unset, and any other value, which is reported) the daemon
// where at least 2 CPUs are online and the plugin on a single-CPU router,
// where steering manages nothing (profile single-cpu) and a resident
// process would only spend memory. The init script, the plugin's `list`
// and the daemon all ask this one function, so that exactly one of them
// registers the object.
func ResolveServer(snap *platform.Snapshot) ServerChoice {
	c := ServerChoice{Setting: "auto"}
	for _, cpu := range snap.CPUs {
		if cpu.Online {
			c.CPUs++
		}
	}
	if st := snap.Config.Steering; st != nil {
		if v := strings.TrimSpace(st.Daemon); v != "" {
			c.Setting = v
		}
	}
	switch c.Setting {
	case "1":
		c.Server = ServerDaemon
		return c
	case "0":
		c.Server = ServerRPCD
		return c
	case "auto":
	default:
		c.Problem = "packet_steering.globals.daemon: unknown value " + outline.Quote(c.Setting) + ", using auto (accepted: auto, 1, 0)"
	}
	c.Server = ServerRPCD
	if c.CPUs >= 2 {
		c.Server = ServerDaemon
	}
	return c
}

// Server reads the machine and decides who serves the object
// (ResolveServer).
func (e *Engine) Server(ctx context.Context) (ServerChoice, error) {
	snap, err := e.inputs(ctx)
	if err != nil {
		return ServerChoice{}, err
	}
	return ResolveServer(snap), nil
}
