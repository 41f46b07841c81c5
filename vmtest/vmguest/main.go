// Command vmguest is the VM test's helper inside a guest (see package
// vmtest). It is built for the guest's architecture and put into the
// initramfs next to the router build of packet-steering:
//
//	vmguest broker SOCKET
//	    a ubus broker (internal/ubus/ubustest, the stock ubusd protocol) on
//	    SOCKET until SIGTERM, so the daemon serves its object on a real bus
//	vmguest load -cpu N -dst ADDR:PORT -count N [-window W] [-size B] [-timeout D]
//	    send UDP datagrams to an echo server from a thread pinned to CPU N
//	    (so XPS picks that CPU's tx queue) and count the replies
//	vmguest hog -cpu N
//	    keep CPU N busy (a process pinned to it, spinning) until SIGTERM
//	vmguest keepalive -cpu N -port P -dst ADDR:PORT [-every D]
//	    from a thread pinned to CPU N, send one small datagram from UDP
//	    port P to ADDR:PORT every D until SIGTERM, and never read: the
//	    host's tap then sends that flow's datagrams (the host side's
//	    flood) into the rx queue paired with the tx queue XPS picks for
//	    CPU N, and the guest's kernel does all their receive work
//	vmguest events SOCKET PATTERN
//	    print each ubus event matching PATTERN as one line, "EVENT JSON",
//	    until SIGTERM
//	vmguest calls SOCKET PID N
//	    N calls to packet_steering over one connection, each answered before
//	    the next (status, get_queues, set_mode adaptive and set_mode auto,
//	    not persisted, in turn, as scripts/flood makes them), then PID's
//	    memory as JSON: VmRSS, RssAnon and RssFile in kB before the calls,
//	    after them and 3 s later, once the daemon's idle trim has run
//	vmguest pppoe -dev DEV -peer MAC -sid N -name NAME
//	    a kernel-only PPPoE session over DEV to MAC with session id N and
//	    its ppp netdev named NAME (no discovery, no LCP: the test beds
//	    send the session's frames themselves), kept until SIGTERM
//
// It is a test tool, not part of the router package.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"golang.org/x/sys/unix"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "vmguest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: vmguest broker SOCKET | vmguest load [flags]")
	}
	switch args[0] {
	case "broker":
		if len(args) != 2 {
			return errors.New("usage: vmguest broker SOCKET")
		}
		return broker(ctx, args[1])
	case "load":
		return load(ctx, args[1:], out)
	case "hog":
		return hog(ctx, args[1:])
	case "keepalive":
		return keepalive(ctx, args[1:])
	case "pppoe":
		return pppoe(ctx, args[1:], out)
	case "calls":
		return calls(ctx, args[1:], out)
	case "events":
		if len(args) != 3 {
			return errors.New("usage: vmguest events SOCKET PATTERN")
		}
		return events(ctx, args[1], args[2], out)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// broker serves a ubus broker on socket until ctx ends.
func broker(ctx context.Context, socket string) error {
	b, err := ubustest.Listen(socket)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	<-ctx.Done()
	if err := b.Close(); err != nil {
		return fmt.Errorf("broker: close: %w", err)
	}
	return nil
}

// loadConfig is one `vmguest load`.
type loadConfig struct {
	cpu     int
	dst     string
	count   int
	window  int
	size    int
	timeout time.Duration
}

// load sends cfg.count datagrams in windows of cfg.window, waiting for the
// replies of each window (or a short timeout) before sending the next, and
// prints "sent N received M".
func load(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	var cfg loadConfig
	fs.IntVar(&cfg.cpu, "cpu", 0, "CPU to send from")
	fs.StringVar(&cfg.dst, "dst", "", "echo server ADDR:PORT")
	fs.IntVar(&cfg.count, "count", 2000, "datagrams to send")
	fs.IntVar(&cfg.window, "window", 16, "datagrams in flight")
	fs.IntVar(&cfg.size, "size", 512, "payload bytes")
	fs.DurationVar(&cfg.timeout, "timeout", 20*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case cfg.cpu < 0 || cfg.cpu >= 1024:
		return fmt.Errorf("load: bad -cpu %d", cfg.cpu)
	case cfg.count < 1 || cfg.count > 1_000_000:
		return fmt.Errorf("load: bad -count %d", cfg.count)
	case cfg.window < 1 || cfg.window > 1024:
		return fmt.Errorf("load: bad -window %d", cfg.window)
	case cfg.size < 1 || cfg.size > 1400:
		return fmt.Errorf("load: bad -size %d", cfg.size)
	}
	dst, err := net.ResolveUDPAddr("udp4", cfg.dst)
	if err != nil {
		return fmt.Errorf("load: -dst: %w", err)
	}
	// The goroutine stays on this thread, and the thread on the CPU: every
	// send syscall runs there, so the kernel's XPS picks that CPU's queue.
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cfg.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("load: pin to CPU %d: %w", cfg.cpu, err)
	}
	conn, err := net.DialUDP("udp4", nil, dst)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	buf := make([]byte, cfg.size)
	sent, received := 0, 0
	for sent < cfg.count && ctx.Err() == nil {
		n := min(cfg.window, cfg.count-sent)
		for range n {
			if _, err := conn.Write(buf); err != nil {
				return fmt.Errorf("load: send: %w", err)
			}
			sent++
		}
		for got := 0; got < n; got++ {
			if err := conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
				return fmt.Errorf("load: %w", err)
			}
			if _, err := conn.Read(buf); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break // lost in this window: send the next one
				}
				return fmt.Errorf("load: receive: %w", err)
			}
			received++
		}
	}
	fmt.Fprintf(out, "sent %d received %d cpu %d\n", sent, received, cfg.cpu)
	return nil
}

// hog keeps one CPU busy until ctx ends: a user process that leaves the
// network work on that CPU less time.
func hog(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hog", flag.ContinueOnError)
	cpu := fs.Int("cpu", 0, "CPU to keep busy")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpu < 0 || *cpu >= 1024 {
		return fmt.Errorf("hog: bad -cpu %d", *cpu)
	}
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(*cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("hog: pin to CPU %d: %w", *cpu, err)
	}
	for n := 0; ctx.Err() == nil; n++ {
		// Spin; look at ctx now and then.
		for i := 0; i < 1<<16; i++ {
			n ^= i
		}
	}
	return nil
}

// events prints the events matching pattern, one line each, until ctx
// ends.
func events(ctx context.Context, socket, pattern string, out io.Writer) error {
	conn, err := ubus.Dial(ctx, socket)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	defer conn.Close()
	var mu sync.Mutex
	stop, err := conn.Listen(ctx, pattern, func(ev string, data []ubus.Attr) {
		b, err := ubus.AttrsToJSON(data, "")
		if err != nil {
			b = []byte(fmt.Sprintf("%q", err.Error()))
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %s\n", ev, b)
	})
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	// Tell the caller the listener is registered.
	fmt.Fprintln(os.Stderr, "listening")
	select {
	case <-ctx.Done():
	case <-conn.Done():
	}
	_ = stop()
	return nil
}

// keepalive sends one byte from a fixed port every interval, from one CPU,
// until ctx ends; what comes back is left unread.
func keepalive(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("keepalive", flag.ContinueOnError)
	cpu := fs.Int("cpu", 0, "CPU to send from")
	port := fs.Int("port", 0, "local UDP port")
	dst := fs.String("dst", "", "ADDR:PORT to send to")
	every := fs.Duration("every", 500*time.Millisecond, "interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *cpu < 0 || *cpu >= 1024:
		return fmt.Errorf("keepalive: bad -cpu %d", *cpu)
	case *port < 1 || *port > 65535:
		return fmt.Errorf("keepalive: bad -port %d", *port)
	case *every < 10*time.Millisecond:
		return fmt.Errorf("keepalive: -every %v is too short", *every)
	}
	raddr, err := net.ResolveUDPAddr("udp4", *dst)
	if err != nil {
		return fmt.Errorf("keepalive: -dst: %w", err)
	}
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(*cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("keepalive: pin to CPU %d: %w", *cpu, err)
	}
	conn, err := net.DialUDP("udp4", &net.UDPAddr{Port: *port}, raddr)
	if err != nil {
		return fmt.Errorf("keepalive: %w", err)
	}
	defer conn.Close()
	t := time.NewTicker(*every)
	defer t.Stop()
	for {
		// A refused datagram (ICMP) is no reason to stop.
		_, _ = conn.Write([]byte{1})
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
