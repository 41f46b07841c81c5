package tune

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
)

// measurement is what one run of the load measured.
type measurement struct {
	// Throughput is bits per second for iperf3 (both directions added with
	// --bidir); for a --load command it is whatever number the command
	// printed, in Unit.
	Throughput float64 `json:"throughput"`
	Unit       string  `json:"unit"`
	// Interrupts are the hardware interrupts during the run, all numbered
	// IRQs of /proc/interrupts (napi.go irqCounting); nil when unread.
	Interrupts *float64 `json:"interrupts,omitempty"`
	// LossPercent is UDP datagram loss seen by the receiver, the worse
	// direction with --bidir; nil when not measured (TCP, plain command).
	LossPercent *float64 `json:"loss_percent,omitempty"`
	// Retransmits is the TCP sender's retransmit count, both directions
	// added; nil when not measured.
	Retransmits *float64 `json:"retransmits,omitempty"`
	// Queues are the run's per-rx-queue counts (queueCounting): qstats rx
	// packets, else interrupts of the queue's own IRQ; QueueError says
	// why a run has none although they were asked for.
	Queues     []QueueDelta `json:"rx_queues,omitempty"`
	QueueError string       `json:"rx_queues_error,omitempty"`
}

// loadDriver drives traffic for one run and measures it.
type loadDriver interface {
	// Run performs run number run (0-based) and returns its measurement.
	Run(ctx context.Context, run int) (measurement, error)
	// Estimate is how long one run takes, for the duration estimate.
	Estimate() time.Duration
	// String describes the load for the report.
	String() string
}

// unitBPS is the unit of iperf3 throughput.
const unitBPS = "bit/s"

// runOverhead is what a run takes beyond its nominal duration (process
// start, connect, the final exchange of results), for estimates.
const runOverhead = 700 * time.Millisecond

// iperf is the built-in iperf3 client driver. Traffic goes only to Host.
type iperf struct {
	_ outline.NoCompare
	// Binary is the iperf3 executable; "" means "iperf3" from PATH.
	Binary string
	// Host is the target as a literal IP address; Port the server port
	// (0: iperf3's default, 5201).
	Host string
	Port int
	// UDP selects UDP (-u); TCP otherwise.
	UDP bool
	// Bitrate is -b as iperf3 takes it ("900M"); "" leaves iperf3's default.
	Bitrate string
	// Length is -l, the datagram or write size in bytes; 0 leaves the default.
	Length int
	// Bidir adds --bidir: traffic both ways at once.
	Bidir bool
	// Reverse adds -R: the server sends, this machine receives.
	Reverse bool
	// Seconds is -t, the duration of a run.
	Seconds int
	// Parallel is -P, parallel flows; 0 or 1 means one.
	Parallel int
	// ClientPort, when non-zero, pins the client port (--cport): run j uses
	// ClientPort+13*j, so every candidate sees the same flows (and so the
	// same RSS hashes) in its run j.
	ClientPort int
}

// Args returns iperf3's arguments for run number run.
func (p *iperf) Args(run int) []string {
	a := []string{"-c", p.Host, "-J", "--connect-timeout", "5000"}
	if p.Port != 0 {
		a = append(a, "-p", outline.Itoa(p.Port))
	}
	if p.UDP {
		a = append(a, "-u")
	}
	if p.Bitrate != "" {
		a = append(a, "-b", p.Bitrate)
	}
	if p.Length > 0 {
		a = append(a, "-l", outline.Itoa(p.Length))
	}
	if p.Bidir {
		a = append(a, "--bidir")
	}
	if p.Reverse {
		a = append(a, "-R")
	}
	if p.Seconds > 0 {
		a = append(a, "-t", outline.Itoa(p.Seconds))
	}
	if p.Parallel > 1 {
		a = append(a, "-P", outline.Itoa(p.Parallel))
	}
	if p.ClientPort > 0 {
		a = append(a, "--cport", outline.Itoa(p.ClientPort+13*run))
	}
	return a
}

// Estimate implements Load.
func (p *iperf) Estimate() time.Duration {
	s := p.Seconds
	if s <= 0 {
		s = 10 // iperf3's default -t
	}
	return time.Duration(s)*time.Second + runOverhead
}

// String implements Load.
func (p *iperf) String() string {
	return "iperf3 " + strings.Join(p.Args(0), " ")
}

// busyRetries is how often a run is retried while the iperf3 server says
// it is busy (it serves one test at a time, and notices a client that was
// killed only after a while), busyWait the pause between tries.
const (
	busyRetries = 5
	busyWait    = time.Second
)

// Run implements Load: it runs iperf3 and parses its JSON. It fails when
// iperf3 reports an error or connected anywhere but Host. While the server
// reports that it is busy with another test, the run is retried a few
// times.
func (p *iperf) Run(ctx context.Context, run int) (measurement, error) {
	for try := 0; ; try++ {
		m, err := p.runOnce(ctx, run)
		if err == nil || try >= busyRetries || !strings.Contains(err.Error(), "server is busy") {
			return m, err
		}
		if serr := sleepCtx(ctx, busyWait); serr != nil {
			return m, outline.Errorf("%w (waiting for a busy server: %w)", err, serr)
		}
	}
}

func (p *iperf) runOnce(ctx context.Context, run int) (measurement, error) {
	bin := p.Binary
	if bin == "" {
		bin = "iperf3"
	}
	ctx, cancel := context.WithTimeout(ctx, p.Estimate()+30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if !strings.Contains(bin, "/") {
		path, err := lookPath(bin)
		if err != nil {
			return measurement{}, outline.Errorf("iperf3: %w", err)
		}
		bin = path
	}
	proc := &process{argv: append([]string{bin}, p.Args(run)...), cancel: syscall.SIGINT, waitDelay: 3 * time.Second,
		stdout: &stdout, stderr: &stderr}
	runErr := proc.run(ctx)
	if ctx.Err() != nil {
		return measurement{}, outline.Errorf("iperf3: %w", ctx.Err())
	}
	m, host, err := parseIperf(stdout.Bytes())
	if err != nil {
		if runErr != nil {
			return measurement{}, outline.Errorf("iperf3 %v: %w (stderr: %s)", runErr, err, firstLine(stderr.String()))
		}
		return measurement{}, err
	}
	if host != "" && host != p.Host {
		return measurement{}, outline.Errorf("iperf3 connected to %s, not the target %s", host, p.Host)
	}
	return m, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// iperfSum is one "sum*" object of iperf3's JSON "end".
type iperfSum struct {
	_             outline.NoCompare
	BitsPerSecond float64  `json:"bits_per_second"`
	Retransmits   *float64 `json:"retransmits"`
	LostPackets   *float64 `json:"lost_packets"`
	Packets       *float64 `json:"packets"`
	LostPercent   *float64 `json:"lost_percent"`
}

type iperfJSON struct {
	_     outline.NoCompare
	Start struct {
		ConnectingTo struct {
			Host string `json:"host"`
		} `json:"connecting_to"`
		TestStart struct {
			Protocol string `json:"protocol"`
		} `json:"test_start"`
	} `json:"start"`
	Error string `json:"error"`
}

// parseIperf reads the JSON iperf3 -J prints (iperf 3.7 and later; older
// UDP reports without sum_received fall back to "sum"). It returns the
// measurement and the host the client connected to. TCP throughput is
// what the receiver got (sum_received); UDP loss is the receiver's
// lost_percent. With --bidir both directions' throughputs and retransmits
// are added and the worse direction's loss is kept.
func parseIperf(b []byte) (measurement, string, error) {
	attrs, err := ubus.AttrsFromJSON(b)
	var j iperfJSON
	if err == nil {
		err = ubus.AttrsToValue(attrs, &j)
	}
	if err != nil {
		return measurement{}, "", outline.Errorf("iperf3 JSON: %w", err)
	}
	end, _ := ubus.Find(attrs, "end")
	if j.Error != "" {
		return measurement{}, j.Start.ConnectingTo.Host, outline.Errorf("iperf3: %s", j.Error)
	}
	udp := strings.EqualFold(j.Start.TestStart.Protocol, "UDP")
	sum := func(key string) (iperfSum, bool) {
		var s iperfSum
		a, ok := ubus.Find(end.Children, key)
		if !ok || end.Type != ubus.TypeTable || a.Type != ubus.TypeTable || ubus.AttrsToValue(a.Children, &s) != nil {
			return s, false
		}
		return s, true
	}
	m := measurement{Unit: unitBPS}
	found := false
	for _, dir := range []string{"", "_bidir_reverse"} {
		recv, ok := sum("sum_received" + dir)
		if !ok && udp {
			recv, ok = sum("sum" + dir)
		}
		if !ok {
			continue
		}
		found = true
		m.Throughput += recv.BitsPerSecond
		if udp {
			loss := 0.0
			switch {
			case recv.LostPercent != nil:
				loss = *recv.LostPercent
			case recv.LostPackets != nil && recv.Packets != nil && *recv.Packets > 0:
				loss = 100 * *recv.LostPackets / *recv.Packets
			}
			if m.LossPercent == nil || loss > *m.LossPercent {
				m.LossPercent = &loss
			}
			continue
		}
		if sent, ok := sum("sum_sent" + dir); ok && sent.Retransmits != nil {
			r := *sent.Retransmits
			if m.Retransmits != nil {
				r += *m.Retransmits
			}
			m.Retransmits = &r
		}
	}
	if !found {
		return measurement{}, j.Start.ConnectingTo.Host, errors.New("iperf3 JSON: no sum_received in end")
	}
	return m, j.Start.ConnectingTo.Host, nil
}

// loadCommand is a user-given load: a shell command run once per run. Its
// output is read as iperf3 JSON, as a JSON object with a "bps" (bits per
// second) or "value" number, or else as text whose last line starts with
// a number. The command gets the target in PS_TUNE_TARGET and the run
// number in PS_TUNE_RUN; where it sends traffic is its own business, so the
// caller must say so to the user.
type loadCommand struct {
	_ outline.NoCompare
	// Shell is the shell; "" means /bin/sh.
	Shell string
	// Line is the command line, run as Shell -c Line.
	Line string
	// Target is passed in PS_TUNE_TARGET.
	Target string
	// Expect is how long one run is expected to take, for the estimate.
	Expect time.Duration
	// Timeout bounds one run; 0 means Expect plus one minute.
	Timeout time.Duration
}

// Estimate implements Load.
func (c *loadCommand) Estimate() time.Duration { return c.Expect }

// String implements Load.
func (c *loadCommand) String() string { return "command: " + c.Line }

// Run implements Load.
func (c *loadCommand) Run(ctx context.Context, run int) (measurement, error) {
	sh := c.Shell
	if sh == "" {
		sh = "/bin/sh"
	}
	to := c.Timeout
	if to == 0 {
		to = c.Expect + time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	var stdout, stderr bytes.Buffer
	// The command runs in its own process group, so that cancelling ends
	// whatever it started too.
	proc := &process{argv: []string{sh, "-c", c.Line},
		env:   append(os.Environ(), "PS_TUNE_TARGET="+c.Target, "PS_TUNE_RUN="+outline.Itoa(run)),
		group: true, cancel: syscall.SIGKILL, waitDelay: 3 * time.Second, stdout: &stdout, stderr: &stderr}
	if err := proc.run(ctx); err != nil {
		if ctx.Err() != nil {
			return measurement{}, outline.Errorf("load command: %w", ctx.Err())
		}
		return measurement{}, outline.Errorf("load command: %w (stderr: %s)", err, firstLine(stderr.String()))
	}
	m, err := parseLoadOutput(stdout.Bytes())
	if err != nil {
		return measurement{}, outline.Errorf("load command output: %w", err)
	}
	return m, nil
}

// parseLoadOutput reads a load command's output (see Command).
func parseLoadOutput(b []byte) (measurement, error) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		obj, err := ubus.AttrsFromJSON(trimmed)
		if err != nil {
			return measurement{}, outline.Errorf("JSON: %w", err)
		}
		if _, ok := ubus.Find(obj, "end"); ok {
			m, _, err := parseIperf(trimmed)
			return m, err
		}
		for _, k := range []string{"bps", "value"} {
			a, ok := ubus.Find(obj, k)
			if !ok {
				continue
			}
			v, ok := a.Number()
			if !ok {
				return measurement{}, outline.Errorf("JSON field %q: not a number", k)
			}
			unit := ""
			if k == "bps" {
				unit = unitBPS
			}
			return measurement{Throughput: v, Unit: unit}, nil
		}
		return measurement{}, errors.New(`JSON object has neither "bps", "value" nor iperf3's "end"`)
	}
	lines := strings.Split(string(trimmed), "\n")
	last := strings.Fields(lines[len(lines)-1])
	if len(last) == 0 {
		return measurement{}, errors.New("no output")
	}
	v, err := strconv.ParseFloat(last[0], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return measurement{}, outline.Errorf("last line %q does not start with a number", lines[len(lines)-1])
	}
	return measurement{Throughput: v}, nil
}
