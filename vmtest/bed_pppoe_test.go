package vmtest

import (
	"bytes"
	"context"
	_ "embed"
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

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"golang.org/x/sys/unix"
)

// The PPPoE test bed (docs/platforms.md, "Test beds"; `make beds`): a
// 4-vCPU x86_64 guest with Debian's kernel (ppp_generic, pppoe, pppox are
// modules there; the host's kernel has none) is the router. Its
// single-queue virtio NIC is the WAN with a kernel-only PPPoE session
// (vmguest pppoe: no discovery, no LCP, the kernel's data path only); the
// host sends the session's frames into the NIC's tap from an AF_PACKET
// socket: UDP in PPPoE, bedFlows flows, at bedPPS, open loop. The guest
// decapsulates (pppoe_rcv, ppp_input, netif_rx on pppoe-wan), routes and
// sends out of a dummy LAN device, whose tx_packets count the forwarded
// packets. Inside the guest `packet-steering tune` runs the stock rule
// (legacy), auto, off and every RPS mask of pppoe-wan with the rest as
// auto places it, and prints forwarded packets/s per candidate; this test
// prints them as ratios to auto's and checks (a functional check, not a
// timing one) that auto did steer pppoe-wan.

// bedsEnv turns the beds on; `make beds` sets it.
const bedsEnv = "PACKET_STEERING_BEDS"

// bedPPPoEInit is the bed guest's /init.
//
//go:embed bed_pppoe.sh
var bedPPPoEInit []byte

// bedCount is the tune load command inside the guest: forwarded packets/s
// over $1 seconds, as {"value": N}.
const bedCount = `#!/bin/sh
f=/sys/class/net/lan0/statistics/tx_packets
read -r a <$f; read -r t0 _ </proc/uptime
sleep "$1"
read -r b <$f; read -r t1 _ </proc/uptime
awk -v a="$a" -v b="$b" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "{\"value\": %.0f}\n", (b - a) / (t1 - t0) }'
`

// The session's fixed parts: the guest's WAN MAC and the host side's (the
// access concentrator's, locally administered), and the session id.
var (
	bedWANMAC  = net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x02}
	bedPeerMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x01}
)

const (
	bedSID   = 0x1234
	bedFlows = 64
	// bedPPSDefault is the offered load: above what the guest forwards
	// on one vCPU under TCG here, so that the steering decides the rate.
	bedPPSDefault = 150000
)

// pppoeBedGuest is the x86_64 guest with the bed's modules and script.
func pppoeBedGuest(pps, runs, seconds, interleave int) *guest {
	g := guests()[0] // x86_64, the system's kernel
	g.name = "bed-pppoe"
	g.modules = []string{"virtio_pci", "virtio_net", "pppoe", "dummy"}
	g.adaptive = false
	g.timeout = 40 * time.Minute
	g.init = bedPPPoEInit
	g.conf = fmt.Sprintf("BED_WAN_MAC=%s\nBED_PEER_MAC=%s\nBED_SID=%d\nBED_RUNS=%d\nBED_LOAD_SECONDS=%d\nBED_PPS=%d\nBED_INTERLEAVE=%d\n",
		bedWANMAC, bedPeerMAC, bedSID, runs, seconds, pps, interleave)
	g.files = map[string][]byte{"etc/bed-count.sh": []byte(bedCount)}
	return g
}

func TestBedPPPoE(t *testing.T) {
	if os.Getenv(bedsEnv) == "" {
		t.Skipf("set %s=1 (make beds) to run the test beds", bedsEnv)
	}
	if os.Geteuid() != 0 {
		t.Fatal("the PPPoE bed needs root (namespaces and taps)")
	}
	for _, tool := range []string{"ip", "apt-get", "apt-cache", "dpkg-deb", "cpio", "gzip", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the PPPoE bed needs %s (scripts/deps.sh installs it): %v", tool, err)
		}
	}
	pps := envInt(t, "BED_PPS", bedPPSDefault, 1000, 1_000_000)
	runs := envInt(t, "BED_RUNS", 5, 1, 20)
	seconds := envInt(t, "BED_SECONDS", 3, 1, 60)
	// In rounds (tune --interleave) unless BED_INTERLEAVE=0.
	interleave := envInt(t, "BED_INTERLEAVE", 1, 0, 1)
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := newCache(repo)
	if err != nil {
		t.Fatal(err)
	}
	removeStaleNamespaces(t)
	g := pppoeBedGuest(pps, runs, seconds, interleave)
	flood := &pppoeFlood{tap: tapSQ, pps: pps}
	g.watch = flood.line
	t.Cleanup(func() { flood.halt() })

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
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
	t.Logf("guest %v; the host sent %d PPPoE frames (%d refused by the tap socket); console: %s",
		time.Since(start).Round(time.Second), sent, failed, logPath)
	if ferr != nil {
		t.Fatalf("host-side PPPoE flood: %v", ferr)
	}
	con, err := parseConsole(out)
	if err != nil {
		t.Fatal(err)
	}
	if !con.done {
		t.Fatalf("the guest did not finish its script; its console ended with:\n%s", tail(out, 12))
	}
	if body, err := con.get("pppoe"); err != nil || !strings.Contains(body, "pppoe-wan") {
		t.Fatalf("PPPoE session: %v %s", err, body)
	}
	first, err := con.get("count")
	if err != nil {
		t.Fatal(err)
	}
	if v := loadValue(first); v <= 0 {
		t.Fatalf("nothing was forwarded through the PPPoE session (%s)", strings.TrimSpace(first))
	}
	// auto steers the ppp device: its rx-0 RPS is set.
	if m := con.info["ppp_rps_auto"]; m == "" || cpuset.SameMask(m, "0") {
		q, _ := con.get("queues-auto")
		t.Errorf("auto left pppoe-wan rx-0 rps_cpus at %q:\n%s", m, q)
	}
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
	state, _ := con.get("state-auto")
	t.Logf("auto's placement in the guest:\n%s", state)
	header := fmt.Sprintf("PPPoE bed: x86_64 guest, %s vCPUs (TCG), WAN %s with a PPPoE session, %d flows offered at %d pps from the host, forwarded pppoe-wan -> lan0; packets/s, median (min-max) of %d runs of %d s%s",
		con.info["cpus"], con.info["wan"], bedFlows, pps, runs, seconds, map[int]string{1: ", interleaved (every candidate once per round)", 0: ""}[interleave])
	t.Log("\n" + rep.table(header))
}

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
	fmt.Fprintf(&b, "%-16s", "candidate")
	for _, d := range r.Devices {
		fmt.Fprintf(&b, " %14s", d+" rps")
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
		fmt.Fprintf(&b, "%-16s", name)
		for i := range r.Devices {
			m := ""
			if i < len(res.Masks) {
				m = res.Masks[i]
			}
			fmt.Fprintf(&b, " %14s", m)
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

// pppoeFlood sends PPPoE session frames (UDP inside, bedFlows flows) into
// the guest's WAN tap at pps while the guest asks for it ("=== FLOOD
// start" / "=== FLOOD stop" on its console).
type pppoeFlood struct {
	tap string
	pps int

	mu     sync.Mutex
	stop   chan struct{}
	done   chan struct{}
	sent   uint64
	failed uint64
	err    error
}

// line handles one console line; ns is the namespace of the guest's taps.
func (f *pppoeFlood) line(ns *netnstest.NS, l string) {
	switch strings.TrimSpace(l) {
	case "=== FLOOD start":
		f.start(ns)
	case "=== FLOOD stop":
		f.halt()
	}
}

func (f *pppoeFlood) start(ns *netnstest.NS) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop != nil || f.err != nil {
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
func (f *pppoeFlood) run(fd int, stop, done chan struct{}) {
	defer close(done)
	defer unix.Close(fd)
	frames := make([][]byte, bedFlows)
	for i := range frames {
		frames[i] = pppoeFrame(i)
	}
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
			k := int(min(due-(sent+failed), uint64(len(frames))))
			n, err := sendFrames(fd, frames[:k])
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

func (f *pppoeFlood) halt() {
	f.mu.Lock()
	stop, done := f.stop, f.done
	f.stop, f.done = nil, nil
	f.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (f *pppoeFlood) result() (sent, failed uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent, f.failed, f.err
}

// pppoeFrame is flow i's frame: Ethernet to the guest's WAN, PPPoE session
// bedSID, PPP protocol IPv4, UDP from 198.19.0.(1+i):(20000+i) to
// 198.18.42.2:9 (behind the guest's LAN), 18 bytes of payload.
func pppoeFrame(i int) []byte {
	const udpLen, ipLen = 8 + 18, 20 + 8 + 18
	b := make([]byte, 14+6+2+ipLen)
	copy(b[0:], bedWANMAC)
	copy(b[6:], bedPeerMAC)
	binary.BigEndian.PutUint16(b[12:], 0x8864) // PPPoE session
	p := b[14:]
	p[0] = 0x11 // version 1, type 1
	p[1] = 0    // code: session data
	binary.BigEndian.PutUint16(p[2:], bedSID)
	binary.BigEndian.PutUint16(p[4:], 2+ipLen) // PPP protocol + payload
	binary.BigEndian.PutUint16(p[6:], 0x0021)  // PPP_IP
	ip := p[8:]
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
	return b
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

func TestPPPoEFrame(t *testing.T) {
	for _, i := range []int{0, 1, bedFlows - 1} {
		b := pppoeFrame(i)
		ip := b[22:]
		tests := []struct {
			what      string
			got, want int
		}{
			{"length", len(b), 14 + 8 + 46},
			{"ethertype", int(binary.BigEndian.Uint16(b[12:])), 0x8864},
			{"session", int(binary.BigEndian.Uint16(b[16:])), bedSID},
			{"pppoe length", int(binary.BigEndian.Uint16(b[18:])), len(b) - 20},
			{"header checksum over all", int(ipChecksum(ip[:20])), 0},
			{"source port", int(binary.BigEndian.Uint16(ip[20:])), 20000 + i},
		}
		for _, tt := range tests {
			if tt.got != tt.want {
				t.Errorf("flow %d: %s = %#x, want %#x", i, tt.what, tt.got, tt.want)
			}
		}
	}
}
