package main

import (
	"context"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/ubusobj"
)

const reportSummary = "print snapshot, plan, status and queues as one JSON (for fleets; `plan --snapshot` replays it)"

// report is what `packet-steering report` prints: the snapshot's members at
// the top level, so that `plan --snapshot FILE` reads the file as the
// snapshot it is (it ignores the other members), then the plan of the
// configured mode made from that snapshot, and the status and queues.
type report struct {
	_ outline.NoCompare
	*platform.Snapshot
	Report reportInfo `json:"report"`
	Plan   any        `json:"plan"`
	// Status and Queues are the daemon's ubus replies to status and
	// get_queues when it answered, else the same read here.
	Status any `json:"status"`
	Queues any `json:"queues"`
}

// reportInfo says when the report was made and where status and queues
// come from.
type reportInfo struct {
	_       outline.NoCompare
	Version int       `json:"version"`
	Time    time.Time `json:"time"`
	// From is "daemon" (its replies, with what it keeps in memory: the
	// last apply, a live set_mode, the adaptive state) or "local" (read by
	// this command, as `status --json` and `queues --json` do).
	From string `json:"from"`
	// DaemonError says why the daemon's replies are not used ("" when
	// they are).
	DaemonError string `json:"daemon_error,omitempty"`
}

// reportVersion changes when a member changes meaning.
const reportVersion = 1

// runReport is `packet-steering report [--root DIR] [--socket PATH]
// [--timeout S]`. It only reads.
func runReport(ctx context.Context, env *cliEnv, args []string) error {
	c := newSubcommand(env, "report", "report [--root DIR] [--socket PATH] [--timeout S]",
		"Prints the snapshot, the plan of the configured mode, the status and the queues as one JSON\n"+
			"object; `packet-steering plan --snapshot FILE` replays it on any machine.").withRoot()
	socket := c.fs.String("socket", "", "ubus socket of the daemon (default "+ubus.DefaultSocket+", then "+ubus.LegacySocket+")")
	timeout := c.fs.Int("timeout", 5, "seconds to wait for the daemon's replies")
	if help, err := c.parse(args); help || err != nil {
		return err
	}
	if *timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	e := oneShotEngine(c.rootDir())
	snap, p, err := planConfigured(ctx, e.Plan)
	if err != nil {
		return err
	}
	r := report{Snapshot: snap, Plan: p, Report: reportInfo{Version: reportVersion, Time: time.Now().UTC(), From: "daemon"}}
	r.Status, r.Queues, err = daemonViews(ctx, *socket, time.Duration(*timeout)*time.Second)
	if err != nil {
		r.Report.From, r.Report.DaemonError = "local", err.Error()
		st, err := e.Status(ctx)
		if err != nil {
			return err
		}
		devs, err := e.Queues(ctx, "")
		if err != nil {
			return err
		}
		r.Status, r.Queues = st, map[string]any{"devices": devs}
	}
	if err := writeJSON(env.stdout, r); err != nil {
		return outline.Errorf("write report: %w", err)
	}
	return nil
}

// planConfigured calls an engine's Plan with the zero request: the
// configured mode (a live set_mode included) and flows. Taking the method
// as a value leaves the request's type to the engine's package.
func planConfigured[R, P any](ctx context.Context, plan func(context.Context, R) (*platform.Snapshot, P, error)) (*platform.Snapshot, P, error) {
	var configured R
	return plan(ctx, configured)
}

// daemonViews asks the object's status and get_queues over ubus.
func daemonViews(ctx context.Context, socket string, timeout time.Duration) (status, queues any, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := ubus.Dial(ctx, socket)
	if err != nil {
		return nil, nil, outline.Errorf("connect to ubus: %w", err)
	}
	defer conn.Close()
	var out [2]map[string]any
	for i, method := range []string{"status", "get_queues"} {
		reply, err := conn.Call(ctx, ubusobj.Path, method, nil)
		if err != nil {
			return nil, nil, outline.Errorf("%s %s: %w", ubusobj.Path, method, err)
		}
		if err := ubus.AttrsToValue(reply, &out[i]); err != nil {
			return nil, nil, outline.Errorf("%s %s reply: %w", ubusobj.Path, method, err)
		}
	}
	return out[0], out[1], nil
}
