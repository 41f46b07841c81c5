package tune

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/platform"
)

// CPUCounters are the cumulative per-CPU counters tune samples before and
// after each run. Which files they come from, and what they can and cannot
// say, is documented on each field.
type CPUCounters struct {
	CPU int `json:"cpu"`
	// Processed, Dropped, TimeSqueeze and RPSReceived are columns 1, 2, 3
	// and 10 of /proc/net/softnet_stat (platform.ParseSoftnet): packets
	// processed, packets dropped because the backlog was full, NET_RX runs
	// that ran out of budget or time, and RPS inter-processor interrupts
	// received.
	Processed   uint64 `json:"processed"`
	Dropped     uint64 `json:"dropped"`
	TimeSqueeze uint64 `json:"time_squeeze"`
	RPSReceived uint64 `json:"rps_received"`
	// NetRX is the NET_RX row of /proc/softirqs: how many times the NET_RX
	// softirq ran on the CPU. It is a count, not a time: the kernel does not
	// expose NET_RX time per CPU without tracing.
	NetRX uint64 `json:"net_rx"`
	// SoftirqTicks is the softirq column of the CPU's line in /proc/stat:
	// time spent in ALL softirq kinds (NET_RX, NET_TX, timers, RCU...), in
	// USER_HZ ticks (1/100 s on Linux).
	SoftirqTicks uint64 `json:"softirq_ticks"`
}

// UserHZ is the unit of /proc/stat times (USER_HZ), 100 on every
// architecture OpenWrt builds for.
const UserHZ = 100

// ReadCounters reads the per-CPU counters below root (the real "/" or a
// fixture root), ordered by CPU. A CPU missing from one of the files gets
// zeros for that file's fields.
func ReadCounters(root string) ([]CPUCounters, error) {
	byCPU := map[int]*CPUCounters{}
	get := func(cpu int) *CPUCounters {
		c := byCPU[cpu]
		if c == nil {
			c = &CPUCounters{CPU: cpu}
			byCPU[cpu] = c
		}
		return c
	}
	read := func(rel string, parse func(io.Reader) error) error {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return fmt.Errorf("read counters: %w", err)
		}
		if err := parse(bytes.NewReader(b)); err != nil {
			return fmt.Errorf("parse %s: %w", rel, err)
		}
		return nil
	}
	if err := read("proc/net/softnet_stat", func(r io.Reader) error {
		rows, err := platform.ParseSoftnet(r)
		for _, s := range rows {
			c := get(s.CPU)
			c.Processed, c.Dropped, c.TimeSqueeze, c.RPSReceived = s.Processed, s.Dropped, s.TimeSqueeze, s.RPSReceived
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := read("proc/softirqs", func(r io.Reader) error {
		m, err := ParseSoftirqs(r, "NET_RX")
		for cpu, n := range m {
			get(cpu).NetRX = n
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := read("proc/stat", func(r io.Reader) error {
		m, err := ParseStatSoftirq(r)
		for cpu, n := range m {
			get(cpu).SoftirqTicks = n
		}
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]CPUCounters, 0, len(byCPU))
	for _, c := range byCPU {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU < out[j].CPU })
	return out, nil
}

// ParseSoftirqs returns one row of /proc/softirqs ("NET_RX") by CPU number.
// The header names the CPU of each column ("CPU0 CPU1 ..."), since the
// kernel prints a column per possible CPU (kernel/softirq.c,
// fs/proc/softirqs.c).
func ParseSoftirqs(r io.Reader, row string) (map[int]uint64, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		return nil, fmt.Errorf("empty file")
	}
	var cpus []int
	for _, h := range strings.Fields(sc.Text()) {
		n, err := strconv.Atoi(strings.TrimPrefix(h, "CPU"))
		if err != nil || !strings.HasPrefix(h, "CPU") {
			return nil, fmt.Errorf("header field %q is not CPUn", h)
		}
		cpus = append(cpus, n)
	}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != row+":" {
			continue
		}
		if len(f)-1 != len(cpus) {
			return nil, fmt.Errorf("row %s has %d columns, header %d", row, len(f)-1, len(cpus))
		}
		out := make(map[int]uint64, len(cpus))
		for i, s := range f[1:] {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("row %s column %d: %w", row, i+1, err)
			}
			out[cpus[i]] = n
		}
		return out, nil
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	return nil, fmt.Errorf("no %s row", row)
}

// ParseStatSoftirq returns the softirq time of each "cpuN" line of
// /proc/stat (the 7th value: user nice system idle iowait irq softirq ...,
// fs/proc/stat.c), in USER_HZ ticks, by CPU number.
func ParseStatSoftirq(r io.Reader) (map[int]uint64, error) {
	out := map[int]uint64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil {
			return out, fmt.Errorf("line %q: bad cpu number: %w", f[0], err)
		}
		if len(f) < 8 {
			return out, fmt.Errorf("line %s: %d values, want at least 7", f[0], len(f)-1)
		}
		n, err := strconv.ParseUint(f[7], 10, 64)
		if err != nil {
			return out, fmt.Errorf("line %s softirq: %w", f[0], err)
		}
		out[cpu] = n
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("scan: %w", err)
	}
	if len(out) == 0 {
		return out, fmt.Errorf("no cpuN lines")
	}
	return out, nil
}

// CPUDelta is what one run added to a CPU's counters.
type CPUDelta struct {
	CPU         int    `json:"cpu"`
	Processed   uint64 `json:"processed"`
	Dropped     uint64 `json:"dropped"`
	TimeSqueeze uint64 `json:"time_squeeze"`
	RPSReceived uint64 `json:"rps_received"`
	NetRX       uint64 `json:"net_rx"`
	// SoftirqMS is the time in all softirq kinds, in milliseconds (from
	// USER_HZ ticks, so in steps of 10 ms).
	SoftirqMS float64 `json:"softirq_ms"`
}

// Deltas subtracts before from after per CPU. A CPU only in after (it came
// online) counts from zero. The softnet columns are 32-bit counters in the
// kernel, so one that went backwards is taken to have wrapped once; the
// 64-bit /proc/softirqs and /proc/stat counters never wrap, so one of those
// that went backwards gives zero.
func Deltas(before, after []CPUCounters) []CPUDelta {
	prev := map[int]CPUCounters{}
	for _, c := range before {
		prev[c.CPU] = c
	}
	sub32 := func(a, b uint64) uint64 {
		if a >= b {
			return a - b
		}
		if b <= 0xffffffff && a <= 0xffffffff {
			return a + (1 << 32) - b
		}
		return a
	}
	sub := func(a, b uint64) uint64 {
		if a >= b {
			return a - b
		}
		return 0
	}
	out := make([]CPUDelta, 0, len(after))
	for _, a := range after {
		b := prev[a.CPU]
		out = append(out, CPUDelta{
			CPU:         a.CPU,
			Processed:   sub32(a.Processed, b.Processed),
			Dropped:     sub32(a.Dropped, b.Dropped),
			TimeSqueeze: sub32(a.TimeSqueeze, b.TimeSqueeze),
			RPSReceived: sub32(a.RPSReceived, b.RPSReceived),
			NetRX:       sub(a.NetRX, b.NetRX),
			SoftirqMS:   float64(sub(a.SoftirqTicks, b.SoftirqTicks)) * 1000 / UserHZ,
		})
	}
	return out
}
