package vmtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/packet-steering/packet-steering/internal/netnstest"
	"golang.org/x/sys/unix"
)

// What the test beds share (docs/platforms.md, "Test beds"; `make beds`):
// a guest that forwards what the host sends into one of its NICs out of a
// dummy LAN device lan0, whose tx_packets count the forwarded packets; the
// host's sender (an AF_PACKET socket on the NIC's tap, open loop, started
// and stopped by the guest's console); the guest's `packet-steering tune`
// sweep and the table of its medians as ratios to auto's. The beds:
// bed_pppoe_test.go (a PPPoE session on an x86_64 guest) and
// bed_biglittle_test.go (an arm64 guest with big and little vCPUs).

// bedsEnv turns the beds on; `make beds` sets it.
const bedsEnv = "PACKET_STEERING_BEDS"

// bedCount is the tune load command inside the guest: forwarded packets/s
// over $1 seconds, as {"value": N}.
const bedCount = `#!/bin/sh
f=/sys/class/net/lan0/statistics/tx_packets
read -r a <$f; read -r t0 _ </proc/uptime
sleep "$1"
read -r b <$f; read -r t1 _ </proc/uptime
awk -v a="$a" -v b="$b" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "{\"value\": %.0f}\n", (b - a) / (t1 - t0) }'
`

// bedPeerMAC is the host side's MAC in the frames it sends (locally
// administered); bedFlows is how many UDP flows it sends.
var bedPeerMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x01}

const bedFlows = 64

// requireBeds skips the test unless the beds are turned on.
func requireBeds(t *testing.T) {
	t.Helper()
	if os.Getenv(bedsEnv) == "" {
		t.Skipf("set %s=1 (make beds) to run the test beds", bedsEnv)
	}
}

// bedBoot is a bed guest's run: what the beds do alike, from the checks
// of the host to the guest's first count of forwarded packets. tools are the
// host commands the bed needs besides the guest's QEMU; g.watch, when set,
// sees the console lines after the flood; prepare, when set,
// runs once the checks passed and before the image is built (the
// big.LITTLE bed makes its device tree there). It fails the test unless
// the guest finished its script and forwarded something.
func bedBoot(t *testing.T, g *guest, flood *frameFlood, tools []string, prepare func(ctx context.Context, c *cache) error) *consoleOut {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the %s bed needs root (namespaces and taps)", g.name)
	}
	for _, tool := range append([]string{"ip", "apt-get", "apt-cache", "dpkg-deb", "cpio", "gzip", g.qemu}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the %s bed needs %s (scripts/deps.sh installs it): %v", g.name, tool, err)
		}
	}
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := newCache(repo)
	if err != nil {
		t.Fatal(err)
	}
	removeStaleNamespaces(t)
	if watch := g.watch; watch != nil {
		g.watch = func(ns *netnstest.NS, l string) {
			flood.line(ns, l)
			watch(ns, l)
		}
	} else {
		g.watch = flood.line
	}
	t.Cleanup(func() { flood.halt() })

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if prepare != nil {
		if err := prepare(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	img, err := c.buildImage(ctx, g, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(c.dir, "console-"+g.name+".log")
	out, err := boot(ctx, t, g, img, logPath)
	flood.halt()
	if err != nil {
		t.Fatal(err)
	}
	sent, failed, ferr := flood.result()
	t.Logf("guest %v; the host sent %d frames (%d refused by the tap socket or dropped by the pacer); console: %s",
		time.Since(start).Round(time.Second), sent, failed, logPath)
	if ferr != nil {
		t.Fatalf("host-side flood: %v", ferr)
	}
	con, err := parseConsole(out)
	if err != nil {
		t.Fatal(err)
	}
	if !con.done {
		t.Fatalf("the guest did not finish its script; its console ended with:\n%s", tail(out, 12))
	}
	first, err := con.get("count")
	if err != nil {
		t.Fatal(err)
	}
	if v := loadValue(first); v <= 0 {
		t.Fatalf("nothing was forwarded (%s)", strings.TrimSpace(first))
	}
	t.Logf("forwarded before the sweep: %s packets/s", strings.TrimSpace(first))
	return con
}

// bedSweep reads the guest's tune report from its console; it fails the
// test when the sweep did not complete.
func bedSweep(t *testing.T, con *consoleOut) *bedReport {
	t.Helper()
	body, err := con.get("tune-json")
	if err != nil {
		log, _ := con.get("tune-log")
		t.Fatalf("tune: %v\n%s", err, log)
	}
	rep, err := parseBedReport(body)
	if err != nil {
		log, _ := con.get("tune-log")
		t.Fatalf("tune: %v (rc %s)\n%s", err, con.info["tune_rc"], log)
	}
	return rep
}

// bedInterleaved is the header's note on BED_INTERLEAVE.
var bedInterleaved = map[int]string{1: ", interleaved (every candidate once per round)", 0: ""}

// envInt reads a positive integer setting from the environment.
func envInt(t *testing.T, name string, def, lo, hi int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		t.Fatalf("%s=%q: want %d to %d", name, v, lo, hi)
	}
	return n
}

// loadValue is the number of a bed-count.sh line ({"value": N}); -1 when
// there is none.
func loadValue(s string) float64 {
	var v struct{ Value *float64 }
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &v); err != nil || v.Value == nil {
		return -1
	}
	return *v.Value
}

// bedReport is the part of `packet-steering tune --json` the beds print.
type bedReport struct {
	Devices []string `json:"devices"`
	Results []struct {
		Candidate struct {
			Name string `json:"name"`
		} `json:"candidate"`
		Masks      []string `json:"masks"`
		SameAs     string   `json:"same_plan_as"`
		Error      string   `json:"error"`
		Throughput struct {
			Median, Min, Max float64
			N                int
		} `json:"throughput"`
	} `json:"results"`
	Complete bool `json:"complete"`

	// extra, when set, is a column after the RPS masks: its title and
	// each candidate's value by name (the big.LITTLE bed's NAPI thread
	// CPUs). Not part of tune's report.
	extra struct {
		title string
		value func(candidate string) string
	}
}

func parseBedReport(s string) (*bedReport, error) {
	var r bedReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &r); err != nil {
		return nil, fmt.Errorf("tune --json: %w", err)
	}
	if !r.Complete || len(r.Results) == 0 {
		return nil, fmt.Errorf("tune --json: the sweep did not complete (%d results)", len(r.Results))
	}
	return &r, nil
}

// table prints every candidate with its masks, its median and range and
// its ratio to auto, then auto against the stock rule and against the
// best candidate of the sweep.
func (r *bedReport) table(header string) string {
	var b bytes.Buffer
	fmt.Fprintln(&b, header)
	width := 16
	for _, res := range r.Results {
		width = max(width, len(res.Candidate.Name)+1)
	}
	fmt.Fprintf(&b, "%-*s", width, "candidate")
	for _, d := range r.Devices {
		fmt.Fprintf(&b, " %14s", d+" rps")
	}
	if r.extra.value != nil {
		fmt.Fprintf(&b, " %14s", r.extra.title)
	}
	fmt.Fprintf(&b, " %24s %8s\n", "packets/s", "/ auto")
	var auto, stock, best float64
	bestName := ""
	for _, res := range r.Results {
		switch res.Candidate.Name {
		case "auto":
			auto = res.Throughput.Median
		case "legacy":
			stock = res.Throughput.Median
		}
	}
	for _, res := range r.Results {
		name := res.Candidate.Name
		if res.SameAs != "" {
			name += " (=" + res.SameAs + ")"
		}
		fmt.Fprintf(&b, "%-*s", width, name)
		for i := range r.Devices {
			m := ""
			if i < len(res.Masks) {
				m = res.Masks[i]
			}
			fmt.Fprintf(&b, " %14s", m)
		}
		if r.extra.value != nil {
			fmt.Fprintf(&b, " %14s", r.extra.value(res.Candidate.Name))
		}
		if res.Error != "" {
			fmt.Fprintf(&b, " error: %s\n", res.Error)
			continue
		}
		tp := res.Throughput
		fmt.Fprintf(&b, " %24s %8s\n", fmt.Sprintf("%.0f (%.0f-%.0f)", tp.Median, tp.Min, tp.Max), ratio(tp.Median, auto))
		if tp.Median > best {
			best, bestName = tp.Median, res.Candidate.Name
		}
	}
	fmt.Fprintf(&b, "auto / stock rule (legacy): %s\n", ratio(auto, stock))
	fmt.Fprintf(&b, "auto / best of the sweep (%s): %s (goal: at least 0.95)\n", bestName, ratio(auto, best))
	return b.String()
}

// ratio is a/b with two decimals, "-" without b.
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// frameFlood sends frames (one per flow, in turn) into a tap of the
// guest's at pps, open loop, while the guest asks for it ("=== FLOOD
// start" / "=== FLOOD stop" on its console), from an AF_PACKET socket in
// the test's namespace.
type frameFlood struct {
	tap    string
	pps    int
	frames [][]byte

	mu     sync.Mutex
	stop   chan struct{}
	done   chan struct{}
	sent   uint64
	failed uint64
	err    error
}

// line handles one console line; ns is the namespace of the guest's taps.
func (f *frameFlood) line(ns *netnstest.NS, l string) {
	switch strings.TrimSpace(l) {
	case "=== FLOOD start":
		f.start(ns)
	case "=== FLOOD stop":
		f.halt()
	}
}

func (f *frameFlood) start(ns *netnstest.NS) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop != nil || f.err != nil {
		return
	}
	if len(f.frames) == 0 {
		f.err = fmt.Errorf("flood into %s: no frames", f.tap)
		return
	}
	fd := -1
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(f.tap)
		if err != nil {
			return err
		}
		// Protocol 0: the socket sends and receives nothing.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind to %s: %w", f.tap, err)
		}
		return nil
	})
	if err != nil {
		f.err = err
		return
	}
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go f.run(fd, f.stop, f.done)
}

// run sends at f.pps, catching up on the time that passed, until stop.
func (f *frameFlood) run(fd int, stop, done chan struct{}) {
	defer close(done)
	defer unix.Close(fd)
	var sent, failed uint64
	defer func() {
		f.mu.Lock()
		f.sent += sent
		f.failed += failed
		f.mu.Unlock()
	}()
	begin := time.Now()
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		due := uint64(time.Since(begin).Seconds() * float64(f.pps))
		// At most 50 ms worth at once: a stalled host does not burst.
		if lag := uint64(f.pps / 20); due > sent+failed+lag {
			failed += due - (sent + failed + lag)
		}
		for sent+failed < due {
			k := int(min(due-(sent+failed), uint64(len(f.frames))))
			n, err := sendFrames(fd, f.frames[:k])
			sent += uint64(n)
			if err != nil || n < k {
				failed += uint64(k - n) // ENOBUFS: the tap's queue is full
			}
		}
	}
}

// mmsghdr is struct mmsghdr.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// sendFrames sends the frames with one sendmmsg (x/sys v0.35 has no
// wrapper) and returns how many were sent.
func sendFrames(fd int, frames [][]byte) (int, error) {
	iov := make([]unix.Iovec, len(frames))
	msgs := make([]mmsghdr, len(frames))
	for i, f := range frames {
		iov[i].Base = &f[0]
		iov[i].SetLen(len(f))
		msgs[i].hdr.Iov = &iov[i]
		msgs[i].hdr.SetIovlen(1)
	}
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), 0, 0, 0)
	runtime.KeepAlive(frames)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func (f *frameFlood) halt() {
	f.mu.Lock()
	stop, done := f.stop, f.done
	f.stop, f.done = nil, nil
	f.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (f *frameFlood) result() (sent, failed uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent, f.failed, f.err
}

// bedFrames is one frame per flow, frame(i) for flow i.
func bedFrames(frame func(i int) []byte) [][]byte {
	out := make([][]byte, bedFlows)
	for i := range out {
		out[i] = frame(i)
	}
	return out
}

// udpLen and ipLen are the sizes of the beds' UDP datagram (18 bytes of
// payload) and of its IPv4 packet.
const (
	udpLen = 8 + 18
	ipLen  = 20 + udpLen
)

// ipv4UDP is flow i's IPv4 packet: UDP from 198.19.0.(1+i):(20000+i) to
// 198.18.42.2:9 (behind the guest's LAN), 18 bytes of payload, no UDP
// checksum.
func ipv4UDP(i int) []byte {
	ip := make([]byte, ipLen)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], ipLen)
	ip[8] = 64 // TTL
	ip[9] = 17 // UDP
	copy(ip[12:], net.IPv4(198, 19, 0, byte(1+i%250)).To4())
	copy(ip[16:], net.IPv4(198, 18, 42, 2).To4())
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:20]))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], uint16(20000+i))
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], udpLen) // checksum 0: none
	return ip
}

// ipChecksum is the IPv4 header checksum of h (its checksum field zero).
func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}
