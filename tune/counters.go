package tune

import (
	"bytes"
	"os"
	"sort"

	"github.com/packet-steering/packet-steering/internal/outline"
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

// ReadCounters reads the per-CPU counters below root (with platform's
// parsers of each file) (the real "/" or a
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
	read := func(rel string, parse func([]byte) error) error {
		b, err := os.ReadFile(outline.JoinPath(root, rel))
		if err != nil {
			return outline.Errorf("read counters: %w", err)
		}
		if err := parse(b); err != nil {
			return outline.Errorf("parse %s: %w", rel, err)
		}
		return nil
	}
	if err := read("proc/net/softnet_stat", func(b []byte) error {
		rows, err := platform.ParseSoftnet(bytes.NewReader(b))
		for _, s := range rows {
			c := get(s.CPU)
			c.Processed, c.Dropped, c.TimeSqueeze, c.RPSReceived = s.Processed, s.Dropped, s.TimeSqueeze, s.RPSReceived
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := read("proc/softirqs", func(b []byte) error {
		m, err := platform.ParseSoftirqRow(b, "NET_RX")
		for cpu, n := range m {
			get(cpu).NetRX = n
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := read("proc/stat", func(b []byte) error {
		ts, err := platform.ParseCPUTimes(b)
		for _, c := range ts {
			get(c.CPU).SoftirqTicks = c.Softirq
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

// CPUDelta is what one run added to a CPU's counters.
type CPUDelta struct {
	_           outline.NoCompare
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
			SoftirqMS:   float64(sub(a.SoftirqTicks, b.SoftirqTicks)) * 1000 / platform.UserHZ,
		})
	}
	return out
}
