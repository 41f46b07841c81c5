package main

import (
	"context"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

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
// who places the IRQs (steering/writers.go), so it re-applies.
const (
	procdServiceObject = "service"
	// stockService is netifd's service, the one packet-steering replaces.
	stockService = "packet_steering"
	// ownInit is the init script whose reload takes over again.
	ownInit = "/etc/init.d/packet-steering"
	// takeoverTimeout bounds one run of the takeover command.
	takeoverTimeout = 30 * time.Second
)

// serviceWatch reacts to procd's service events.
type serviceWatch struct {
	log *lineLogger
	// takeover takes steering back from the stock service; apply
	// re-applies with a reason.
	takeover func(ctx context.Context)
	apply    func(reason string)

	mu      sync.Mutex
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
			w.takeover(ctx)
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

// runInitReload is the takeover on a router: `/etc/init.d/packet-steering
// reload` (ps_takeover, then an apply through ubus), with its output on
// /dev/null. It runs outside the apply path, on the watcher's goroutine;
// syscall's fork/exec keeps os/exec (about 130 KB) out of the router
// binary. ctx bounds the wait: the script is killed when it runs longer.
func runInitReload(log *lineLogger) func(ctx context.Context) {
	return func(ctx context.Context) {
		if err := runWait(ctx, ownInit, "reload"); err != nil {
			log.Error("taking over from netifd's packet_steering service failed", "err", err)
		}
	}
}

// runWait runs path with args, stdin and output on /dev/null, and waits
// for it; when ctx ends first the process is killed.
func runWait(ctx context.Context, path string, args ...string) error {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	fd := null.Fd()
	pid, err := syscall.ForkExec(path, append([]string{path}, args...), &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{fd, fd, fd},
	})
	if err != nil {
		return &os.PathError{Op: "exec", Path: path, Err: err}
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	switch {
	case err != nil:
		return &os.PathError{Op: "wait", Path: path, Err: err}
	case ws.Signaled():
		return &exitStatusError{path: path, status: "killed by " + ws.Signal().String()}
	case ws.ExitStatus() != 0:
		return &exitStatusError{path: path, status: "exit status " + strconv.Itoa(ws.ExitStatus())}
	}
	return nil
}

// exitStatusError is a command that failed.
type exitStatusError struct{ path, status string }

func (e *exitStatusError) Error() string { return e.path + ": " + e.status }
