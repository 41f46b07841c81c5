package daemon

import (
	"context"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
)

// Watching procd's service events. procd notifies the subscribers of its
// ubus object "service" when it registers a service ("service.start",
// data {"service": NAME}) or starts or stops an instance ("instance.start",
// "instance.stop", data {"service": NAME, "instance": ...})
// (openwrt/procd service/service.c service_event, service/instance.c).
// netifd's package scripts start its packet_steering service on every
// upgrade of netifd, enabled or not; the daemon notices at once and takes
// steering back through the init script (whose reload disables and stops
// the stock service and applies). A start or stop of irqbalance changes
// who places the IRQs (plan/otherwriters.go), so it re-applies.
const (
	procdServiceObject = "service"
	// stockService is netifd's service, the one packet-steering replaces.
	stockService = "packet_steering"
	// ownInit is the init script whose reload takes over again; rpcd's
	// rc object runs it by its name, ownInitName.
	ownInit     = "/etc/init.d/packet-steering"
	ownInitName = "packet-steering"
	// rcObject is rpcd's ubus object for the init scripts.
	rcObject = "rc"
	// takeoverTimeout bounds one run of the takeover command.
	takeoverTimeout = 30 * time.Second
)

// serviceWatch reacts to procd's service events.
type serviceWatch struct {
	log *Logger
	// takeover takes steering back from the stock service, with apply
	// to re-apply itself where it must; apply re-applies with a reason.
	takeover func(ctx context.Context, apply func(reason string))
	apply    func(reason string)

	mu      outline.Mutex
	running bool // a takeover runs
	again   bool // another start came in while it ran
}

// subscribe subscribes to procd's object on conn (after each connect);
// without procd (a test broker, a development machine) there is nothing to
// watch.
func (w *serviceWatch) subscribe(ctx context.Context, conn *ubus.Conn) {
	if _, err := conn.Subscribe(ctx, procdServiceObject, w.notified); err != nil {
		w.log.Debug("not watching procd's services", "err", err)
		return
	}
	w.log.Debug("watching procd's services")
}

// notified handles one notification of procd's service object.
func (w *serviceWatch) notified(typ string, data []ubus.Attr) {
	name := ""
	for _, a := range data {
		if a.Name == "service" && a.Type == ubus.TypeString {
			name = a.Str
		}
	}
	switch {
	case name == stockService && (typ == "service.start" || typ == "instance.start"):
		w.log.Notice("netifd's packet_steering service started; taking over again")
		w.startTakeover()
	case name == "irqbalance" && (typ == "instance.start" || typ == "instance.stop" || typ == "service.stop"):
		w.apply("irqbalance " + typ)
	}
}

// startTakeover runs the takeover on its own goroutine, one at a time;
// starts that come in meanwhile cause one more run after it.
func (w *serviceWatch) startTakeover() {
	w.mu.Lock()
	if w.running {
		w.again = true
		w.mu.Unlock()
		return
	}
	w.running = true
	w.mu.Unlock()
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), takeoverTimeout)
			w.takeover(ctx, w.apply)
			cancel()
			w.mu.Lock()
			if !w.again {
				w.running = false
				w.mu.Unlock()
				return
			}
			w.again = false
			w.mu.Unlock()
		}
	}()
}

// runTakeover is the takeover on a router: `/etc/init.d/packet-steering
// reload` (ps_takeover, then an apply through ubus), run by rpcd on
// request over ubus (`ubus call rc init '{"name":"packet-steering",
// "action":"reload"}'`; rpcd's rc object runs the init scripts of
// /etc/init.d/ with start, stop, restart, reload, enable or disable). The
// daemon itself neither forks nor execs: fork/exec cost the mipsle router
// binary about 25 KB. It runs outside the apply path, on the watcher's
// goroutine, on a connection of its own; ctx bounds the call.
//
// Where rpcd cannot do it (not on ubus: restarting, or, as seen under the
// real procd, gone from ubus after ubusd was restarted, since rpcd does
// not register its objects again), procd itself stops the stock service
// (`ubus call service delete '{"name":"packet_steering"}'`, what its init
// script's stop does: its triggers go with it) and the daemon re-applies
// (reason "takeover"). The stock service stays as enabled or disabled as
// it was: netifd's upgrade starts it without enabling it.
func runTakeover(log *Logger, socket string) func(ctx context.Context, apply func(reason string)) {
	return func(ctx context.Context, apply func(reason string)) {
		err := callInitReload(ctx, socket)
		if err == nil {
			return
		}
		log.Warn("takeover through rpcd failed; stopping the stock service through procd", "err", err)
		// procd's object "service": stop netifd's packet_steering service.
		if err := callOnce(ctx, socket, procdServiceObject, "delete", ubus.String("name", stockService)); err != nil {
			log.Error("taking over from netifd's packet_steering service failed", "err", err)
			return
		}
		apply("takeover")
	}
}

// callInitReload asks rpcd's rc object on the broker at socket to reload
// the init script ownInit.
func callInitReload(ctx context.Context, socket string) error {
	return callOnce(ctx, socket, rcObject, "init", ubus.String("name", ownInitName), ubus.String("action", "reload"))
}

// callOnce calls object's method with args (string attributes) on a
// connection of its own; an error names the call as the ubus CLI would
// write it ("ubus call rc init packet-steering reload: ...").
func callOnce(ctx context.Context, socket, object, method string, args ...ubus.Attr) error {
	conn, err := ubus.Dial(ctx, socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Call(ctx, object, method, args); err != nil {
		name := "ubus call " + object + " " + method
		for _, a := range args {
			name += " " + a.Str
		}
		return outline.Errorf("%s: %w", name, err)
	}
	return nil
}
