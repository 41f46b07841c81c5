// Command flood measures the daemon under an invoke flood: the router build
// of packet-steering (-tags router) serves the demo fixture router on the
// in-process broker (internal/ubus/ubustest, set to drop rather than
// disconnect a client that does not read, as the stock ubusd does); one
// client sends N get_queues calls as fast as it can and never reads a
// reply, while a second client calls status every 50 ms. It prints the
// daemon's RSS before, after 1,000 answered calls (status, get_queues and
// set_mode between auto and adaptive, one at a time, before the flood),
// at peak (VmHWM) and after, its fds and threads, the
// slowest status answer during and after the flood, and how long RSS took
// to come back under the target. Exit status 1 when a target is missed.
//
// The budget of 6 MiB after 1,000 calls is the 32-bit mipsel_24kc router
// build's; make test-vm checks it in its 32-bit MIPS guest (vmtest
// checkMemory). A 64-bit build here is checked against it only when the
// host is 32-bit: 64-bit pointers and Go's larger 64-bit heap metadata cost
// about half a MiB more, and its figure is printed beside the budget.
//
// The budget of 6 MiB after 1,000 calls is the 32-bit mipsel_24kc router
// build's; make test-vm checks it in its 32-bit MIPS guest (vmtest
// checkMemory). A 64-bit build here is checked against it only when the
// host is 32-bit: 64-bit pointers and Go's larger 64-bit heap metadata cost
// about half a MiB more, and its figure is printed beside the budget.
//
//	go run ./scripts/flood [-calls 20000] [-bin ./packet-steering-router]
//
// Run from the repository root; without -bin it builds the router binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/packet-steering/packet-steering/internal/procmem"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/platform/fixture"
)

// Targets (README, "Reliability").
const (
	statusTarget = time.Second
	peakTarget   = 16 << 20
	settleTarget = 8 << 20
	settleWithin = 10 * time.Second
	// callsTarget bounds RSS after callsCount ordinary calls (issue 20:
	// the daemon, adaptive mode and tune included, in 6 MiB on
	// mipsel_24kc; checked here only on a 32-bit host, see above).
	callsTarget   = 6 << 20
	callsCount    = 1000
	probeInterval = 50 * time.Millisecond
)

func main() {
	calls := flag.Int("calls", 20000, "get_queues calls in the flood")
	bin := flag.String("bin", "", "daemon binary (default: build the router build into a temporary directory)")
	method := flag.String("method", "get_queues", "method the flood calls")
	flag.Parse()
	if err := run(*calls, *bin, *method); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
}

func run(calls int, bin, method string) error {
	dir, err := os.MkdirTemp("", "ps-flood")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "packet-steering-router")
		build := exec.Command("go", "build", "-tags", "router", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/packet-steering")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if err := build.Run(); err != nil {
			return fmt.Errorf("build the router binary: %w", err)
		}
	}
	spec, ok := fixture.Preset("demo")
	if !ok {
		return errors.New("no demo preset")
	}
	root := filepath.Join(dir, "root")
	if err := fixture.Build(root, spec); err != nil {
		return fmt.Errorf("fixture: %w", err)
	}
	sock := filepath.Join(dir, "ubus.sock")
	broker, err := ubustest.Listen(sock)
	if err != nil {
		return err
	}
	broker.DropWhenFull()
	defer broker.Close()

	var logBuf lineCounter
	daemon := exec.Command(bin, "daemon", "--socket", sock, "--root", root, "--log", "stderr")
	daemon.Stderr = &logBuf
	if err := daemon.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	pid := daemon.Process.Pid
	defer func() {
		_ = daemon.Process.Kill()
		_ = daemon.Wait()
	}()

	ctx := context.Background()
	prober, objID, err := waitObject(ctx, sock)
	if err != nil {
		return err
	}
	defer prober.Close()
	// The start apply, then the idle trim (2 s after the last work).
	time.Sleep(3 * time.Second)
	base, err := procStatus(pid)
	if err != nil {
		return err
	}
	fmt.Printf("daemon %s (pid %d), demo fixture router\n", filepath.Base(bin), pid)
	fmt.Printf("before:  VmRSS %s (anon %s, file %s), fds %d, threads %d\n", kib(base.rss), kib(base.anon), kib(base.file), fds(pid), base.threads)

	// 1,000 ordinary calls, each answered before the next: RSS after them.
	if err := callMany(prober, objID, callsCount); err != nil {
		return err
	}
	afterCalls, err := procStatus(pid)
	if err != nil {
		return err
	}
	fmt.Printf("calls:   VmRSS %s (anon %s, file %s) after %d answered calls (target %s), VmHWM %s\n", kib(afterCalls.rss), kib(afterCalls.anon), kib(afterCalls.file), callsCount, kib(callsTarget), kib(afterCalls.hwm))
	// And once the idle trimmer has handed the calls' pages back (2 s
	// after the last call): the figure the target is checked on, the
	// daemon as it stays between bursts of calls.
	time.Sleep(3 * time.Second)
	idle, err := procStatus(pid)
	if err != nil {
		return err
	}
	fmt.Printf("         VmRSS %s (anon %s, file %s) 3 s later (idle, trimmed; %s)\n", kib(idle.rss), kib(idle.anon), kib(idle.file), callsCheck())

	// The prober: status every probeInterval, each answer timed.
	p := &probe{}
	stopProbe := make(chan struct{})
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		p.loop(prober, objID, stopProbe)
	}()
	// Peak fds and threads, sampled.
	var peakFDs, peakThreads int
	stopSample := make(chan struct{})
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		for {
			if n := fds(pid); n > peakFDs {
				peakFDs = n
			}
			if st, err := procStatus(pid); err == nil && st.threads > peakThreads {
				peakThreads = st.threads
			}
			select {
			case <-stopSample:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	cpuBefore := cpuTime(pid)
	// The flood: one connection that writes and never reads.
	flood, err := ubus.DialUnix(ctx, sock)
	if err != nil {
		return fmt.Errorf("flood client: %w", err)
	}
	defer flood.Close()
	start := time.Now()
	sent, err := sendFlood(flood, objID, method, calls)
	floodTime := time.Since(start)
	if err != nil {
		fmt.Printf("flood: write stopped after %d calls: %v\n", sent, err)
	}
	fmt.Printf("flood:   %d %s calls written in %v by a client that never reads\n", sent, method, floodTime.Round(time.Millisecond))

	// Settle: how long until RSS is back under the target.
	settleStart := time.Now()
	var settled time.Duration = -1
	for time.Since(settleStart) < settleWithin+5*time.Second {
		st, err := procStatus(pid)
		if err != nil {
			return err
		}
		if st.rss < settleTarget && settled < 0 {
			settled = time.Since(settleStart)
		}
		if settled >= 0 && time.Since(settleStart) > 3*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stopSample)
	<-sampleDone
	close(stopProbe)
	<-probeDone
	after, err := procStatus(pid)
	if err != nil {
		return err
	}
	fmt.Printf("peak:    VmHWM %s, fds %d, threads %d (sampled every 5 ms)\n", kib(after.hwm), peakFDs, peakThreads)
	fmt.Printf("cpu:     the daemon used %v of CPU from the flood's start (the status calls included)\n", cpuTime(pid)-cpuBefore)
	fmt.Printf("after:   VmRSS %s %v after the flood was written\n", kib(after.rss), time.Since(settleStart).Round(time.Millisecond))
	if settled >= 0 {
		fmt.Printf("settle:  VmRSS under %s %v after the flood was written\n", kib(settleTarget), settled.Round(time.Millisecond))
	} else {
		fmt.Printf("settle:  VmRSS not under %s within %v\n", kib(settleTarget), settleWithin+5*time.Second)
	}
	p.mu.Lock()
	fmt.Printf("status:  %d answered, %d failed, slowest %v (median %v)\n", len(p.lat), p.failed, p.max().Round(time.Microsecond), p.median().Round(time.Microsecond))
	p.mu.Unlock()
	fmt.Printf("log:     %d lines from the daemon; lines about refused calls:\n", logBuf.count())
	for _, l := range logBuf.matching("refus") {
		fmt.Println("  " + l)
	}

	var missed []string
	p.mu.Lock()
	if p.failed > 0 || p.max() > statusTarget {
		missed = append(missed, fmt.Sprintf("status within %v", statusTarget))
	}
	p.mu.Unlock()
	if idle.rss > callsTarget && strconv.IntSize == 32 {
		missed = append(missed, fmt.Sprintf("RSS at most %s after %d calls, idle", kib(callsTarget), callsCount))
	}
	if after.hwm >= peakTarget {
		missed = append(missed, "peak RSS under "+kib(peakTarget))
	}
	if settled < 0 || settled > settleWithin {
		missed = append(missed, fmt.Sprintf("RSS under %s within %v", kib(settleTarget), settleWithin))
	}
	if len(missed) > 0 {
		return fmt.Errorf("targets missed: %s", strings.Join(missed, ", "))
	}
	fmt.Println("targets met: status within 1 s, peak RSS under 16 MiB, RSS under 8 MiB within 10 s" + map[bool]string{true: ", RSS at most 6 MiB after 1000 calls (idle)", false: ""}[strconv.IntSize == 32])
	return nil
}

// callsCheck says how the idle figure after the calls is checked.
func callsCheck() string {
	if strconv.IntSize == 32 {
		return "checked against the target"
	}
	return "a 64-bit build: the target is the 32-bit mipsel_24kc build's, checked by make test-vm's MIPS guest"
}

// waitObject connects the prober and waits for packet_steering on the bus.
func waitObject(ctx context.Context, sock string) (*ubus.Conn, uint32, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := ubus.Dial(ctx, sock)
		if err == nil {
			id, lerr := c.LookupID(ctx, "packet_steering")
			if lerr == nil {
				return c, id, nil
			}
			c.Close()
			err = lerr
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("packet_steering not on the bus: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// callMany makes n calls one after the other, each answered: status,
// get_queues and set_mode (not persisted) between auto and adaptive, in
// turn, so that the adaptive loop starts and stops as it does on a router.
// The daemon is left in the mode it started in.
func callMany(c *ubus.Conn, objID uint32, n int) error {
	for i := 0; i < n; i++ {
		method, args := "status", []ubus.Attr(nil)
		switch i % 4 {
		case 1:
			method = "get_queues"
		case 2:
			method, args = "set_mode", []ubus.Attr{ubus.String("mode", "adaptive"), ubus.Bool("persist", false)}
		case 3:
			method, args = "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Bool("persist", false)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.Invoke(ctx, objID, method, args)
		cancel()
		if err != nil {
			return fmt.Errorf("call %d (%s): %w", i+1, method, err)
		}
	}
	return nil
}

// sendFlood writes calls INVOKE messages in batches, without reading.
func sendFlood(t ubus.Transport, objID uint32, method string, calls int) (int, error) {
	data, err := ubus.BlobmsgAttr(ubus.AttrData, nil)
	if err != nil {
		return 0, err
	}
	var buf []byte
	sent := 0
	for sent < calls {
		buf = buf[:0]
		n := min(500, calls-sent)
		for i := range n {
			m := &ubus.Message{Type: ubus.MsgInvoke, Seq: uint16(sent + i + 1), Peer: objID, Attrs: []ubus.MsgAttr{
				ubus.U32Attr(ubus.AttrObjID, objID), ubus.StringAttr(ubus.AttrMethod, method), data}}
			if buf, err = m.AppendBinary(buf); err != nil {
				return sent, err
			}
		}
		_ = t.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := t.Write(buf); err != nil {
			return sent, err
		}
		sent += n
	}
	return sent, nil
}

// probe times status calls.
type probe struct {
	mu     sync.Mutex
	lat    []time.Duration
	failed int
}

func (p *probe) loop(c *ubus.Conn, objID uint32, stop <-chan struct{}) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t0 := time.Now()
		_, err := c.Invoke(ctx, objID, "status", nil)
		d := time.Since(t0)
		cancel()
		p.mu.Lock()
		if err != nil {
			p.failed++
			fmt.Printf("status failed after %v: %v\n", d.Round(time.Millisecond), err)
		} else {
			p.lat = append(p.lat, d)
		}
		p.mu.Unlock()
		select {
		case <-stop:
			return
		case <-time.After(probeInterval):
		}
	}
}

func (p *probe) max() time.Duration {
	var m time.Duration
	for _, d := range p.lat {
		m = max(m, d)
	}
	return m
}

func (p *probe) median() time.Duration {
	if len(p.lat) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), p.lat...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

type status struct {
	rss, hwm int // bytes
	// anon and file split rss: the heap and stacks, and the binary's
	// pages touched.
	anon, file int
	threads    int
}

// procStatus reads VmRSS, VmHWM, RssAnon, RssFile and Threads of pid.
func procStatus(pid int) (status, error) {
	st, err := procmem.Read(pid)
	if err != nil {
		return status{}, fmt.Errorf("daemon status: %w", err)
	}
	return status{rss: st.RSS << 10, hwm: st.HWM << 10, anon: st.Anon << 10, file: st.File << 10, threads: st.Threads}, nil
}

// cpuTime is utime+stime of pid (proc(5), fields 14 and 15, in clock
// ticks of 10 ms on Linux).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return time.Duration(u+k) * 10 * time.Millisecond
}

func fds(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

func kib(n int) string { return fmt.Sprintf("%d kB", n>>10) }

// lineCounter keeps the daemon's log.
type lineCounter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lineCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), "\n")
}

func (l *lineCounter) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}
