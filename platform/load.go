package platform

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
)

// Load counters, for the adaptive mode's control loop: cumulative per-CPU
// and per-thread times that are read at intervals and compared.
//
//	proc/stat      "cpuN user nice system idle iowait irq softirq steal
//	               guest guest_nice", in USER_HZ clock ticks
//	               (Documentation/filesystems/proc.rst, 1.8); guest time is
//	               already counted in user
//	proc/softirqs  one row per softirq, one column per possible CPU, the
//	               header naming the columns ("CPU0 CPU1 ...")
//	proc/PID/stat  utime (field 14) and stime (field 15), clock ticks
//	proc/PID/schedstat  "run_ns wait_ns timeslices": wait_ns is the time
//	               the task was runnable but waiting for its CPU
//	               (Documentation/scheduler/sched-stats.rst; needs
//	               CONFIG_SCHED_INFO, so it may be missing)
const (
	// UserHZ is USER_HZ, the unit of proc/stat and proc/PID/stat times:
	// 100 on every Linux architecture's user ABI (OpenWrt's included).
	UserHZ = 100

	procStatPath     = "proc/stat"
	procSoftirqsPath = "proc/softirqs"
)

// CPUTime is one CPU's row of proc/stat: Total is the sum of user, nice,
// system, idle, iowait, irq, softirq and steal; Idle is idle + iowait.
type CPUTime struct {
	CPU     int    `json:"cpu"`
	Total   uint64 `json:"total"`
	Idle    uint64 `json:"idle"`
	Softirq uint64 `json:"softirq"`
}

// ThreadTime is a task's utime + stime in clock ticks and, when the
// kernel reports it (HasWait), the nanoseconds it waited runnable.
type ThreadTime struct {
	_       outline.NoCompare
	PID     int    `json:"pid"`
	Ticks   uint64 `json:"ticks"`
	WaitNS  uint64 `json:"wait_ns"`
	HasWait bool   `json:"has_wait"`
}

// LoadCounters is one reading of the load counters. Threads holds the
// tasks asked for that still exist; NetRX maps CPU to NET_RX softirqs.
type LoadCounters struct {
	Softnet []SoftnetStat
	CPUs    []CPUTime
	NetRX   map[int]uint64
	Threads []ThreadTime
}

// ReadSoftnet reads only proc/net/softnet_stat below root: what an idle
// control loop needs to notice traffic, at the cost of one small file.
func ReadSoftnet(root string) ([]SoftnetStat, error) {
	f, err := NewFS(root)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(f.Path(softnetPath))
	if err != nil {
		return nil, outline.Errorf("platform: %w", err)
	}
	s, err := parseSoftnetBytes(b)
	if err != nil {
		return nil, outline.Errorf("platform: %s: %w", softnetPath, err)
	}
	return s, nil
}

// ReadLoad reads the softnet counters, proc/stat, proc/softirqs and the
// CPU time of the given tasks below root. A task that has exited is left
// out; any other unreadable file is an error.
func ReadLoad(ctx context.Context, root string, pids []int) (*LoadCounters, error) {
	if err := ctx.Err(); err != nil {
		return nil, outline.Errorf("platform: read load: %w", err)
	}
	f, err := NewFS(root)
	if err != nil {
		return nil, err
	}
	lc := &LoadCounters{}
	if lc.Softnet, err = ReadSoftnet(root); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(f.Path(procStatPath))
	if err != nil {
		return nil, outline.Errorf("platform: %w", err)
	}
	if lc.CPUs, err = ParseCPUTimes(b); err != nil {
		return nil, outline.Errorf("platform: %s: %w", procStatPath, err)
	}
	b, err = os.ReadFile(f.Path(procSoftirqsPath))
	if err != nil {
		return nil, outline.Errorf("platform: %w", err)
	}
	if lc.NetRX, err = ParseSoftirqRow(b, "NET_RX"); err != nil {
		return nil, outline.Errorf("platform: %s: %w", procSoftirqsPath, err)
	}
	for _, pid := range pids {
		if pid <= 0 {
			continue
		}
		b, err := os.ReadFile(f.Path(procDir, outline.Itoa(pid), "stat"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || vanished(err) {
				continue
			}
			return nil, outline.Errorf("platform: %w", err)
		}
		ticks, err := ParseTaskTicks(b)
		if err != nil {
			return nil, outline.Errorf("platform: %s/%d/stat: %w", procDir, pid, err)
		}
		tt := ThreadTime{PID: pid, Ticks: ticks}
		if b, err := os.ReadFile(f.Path(procDir, outline.Itoa(pid), "schedstat")); err == nil {
			tt.WaitNS, tt.HasWait = ParseSchedWait(b)
		}
		lc.Threads = append(lc.Threads, tt)
	}
	return lc, nil
}

// ParseCPUTimes parses the per-CPU rows of proc/stat ("cpuN ..."; the
// aggregate "cpu" row and other lines are skipped). A row needs at least
// the first seven columns (user .. softirq; steal exists since 2.6.11).
func ParseCPUTimes(b []byte) ([]CPUTime, error) {
	var out []CPUTime
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		name, rest := nextField(line)
		if len(name) < 4 || !bytes.HasPrefix(name, []byte("cpu")) {
			continue
		}
		cpu, ok := atoiBytes(name[3:])
		if !ok || cpu < 0 || cpu >= cpuset.MaxCPUs {
			return out, outline.Errorf("bad cpu row %q", name)
		}
		ct := CPUTime{CPU: cpu}
		n := 0
		for ; n < 8; n++ {
			var fld []byte
			if fld, rest = nextField(rest); fld == nil {
				break
			}
			v, ok := parseUintBytes(fld)
			if !ok {
				return out, outline.Errorf("cpu%d column %d: bad number %q", cpu, n+1, fld)
			}
			ct.Total += v
			switch n {
			case 3, 4: // idle, iowait
				ct.Idle += v
			case 6:
				ct.Softirq = v
			}
		}
		if n < 7 {
			return out, outline.Errorf("cpu%d: %d columns, want at least 7", cpu, n)
		}
		out = append(out, ct)
	}
	if len(out) == 0 {
		return nil, errors.New("no cpuN rows")
	}
	return out, nil
}

// ParseSoftirqRow returns one row of proc/softirqs ("NET_RX") by CPU, the
// CPU numbers taken from the header.
func ParseSoftirqRow(b []byte, row string) (map[int]uint64, error) {
	var cols []int
	header := true
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if header {
			for f, rest := nextField(line); f != nil; f, rest = nextField(rest) {
				n, ok := atoiBytes(bytes.TrimPrefix(f, []byte("CPU")))
				if !bytes.HasPrefix(f, []byte("CPU")) || !ok || n < 0 || n >= cpuset.MaxCPUs {
					return nil, outline.Errorf("bad header column %q", f)
				}
				cols = append(cols, n)
			}
			header = false
			continue
		}
		name, rest := nextField(line)
		if string(name) != row+":" {
			continue
		}
		out := make(map[int]uint64, len(cols))
		for _, cpu := range cols {
			var f []byte
			if f, rest = nextField(rest); f == nil {
				return nil, outline.Errorf("%s: %d columns, header has %d", row, len(out), len(cols))
			}
			v, ok := parseUintBytes(f)
			if !ok {
				return nil, outline.Errorf("%s cpu%d: bad number %q", row, cpu, f)
			}
			out[cpu] = v
		}
		return out, nil
	}
	return nil, outline.Errorf("no %s row", row)
}

// ParseTaskTicks returns utime + stime of proc/PID/stat. The fields are
// counted after the last ')', so a name with spaces or parentheses cannot
// shift them.
func ParseTaskTicks(b []byte) (uint64, error) {
	closing := bytes.LastIndexByte(b, ')')
	if closing < 0 {
		return 0, errors.New("no (comm) field")
	}
	rest := b[closing+1:]
	// state(3) ... cmajflt(13) utime(14) stime(15): utime is the 12th
	// field after the comm.
	var sum uint64
	for n := 0; n < 13; n++ {
		var f []byte
		if f, rest = nextField(rest); f == nil {
			return 0, outline.Errorf("%d fields after comm, want at least 13", n)
		}
		if n >= 11 {
			v, ok := parseUintBytes(f)
			if !ok {
				return 0, outline.Errorf("bad time %q", f)
			}
			sum += v
		}
	}
	return sum, nil
}

// ParseSchedWait returns the second field of proc/PID/schedstat, the
// nanoseconds the task spent runnable on a run queue; false when the
// contents are not three numbers.
func ParseSchedWait(b []byte) (uint64, bool) {
	run, rest := nextField(b)
	wait, rest := nextField(rest)
	slices, _ := nextField(rest)
	if run == nil || wait == nil || slices == nil {
		return 0, false
	}
	if _, ok := parseUintBytes(run); !ok {
		return 0, false
	}
	if _, ok := parseUintBytes(slices); !ok {
		return 0, false
	}
	return parseUintBytes(wait)
}
