package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
)

// Device is one device's rx queues as packet_steering get_queues shows
// them: the part of its reply the traffic model reads.
type Device struct {
	Name string    `json:"name"`
	Rx   []RxQueue `json:"rx"`
}

// RxQueue is one rx queue with its live RPS mask and the CPUs of its NAPI
// thread and IRQ (nil when it has none).
type RxQueue struct {
	Queue   string `json:"queue"`
	RPSCPUs string `json:"rps_cpus"`
	NAPI    *CPUs  `json:"napi,omitempty"`
	IRQ     *CPUs  `json:"irq,omitempty"`
}

// CPUs is a thread's or an IRQ's live cpu list.
type CPUs struct {
	CPUs string `json:"cpus"`
}

// QueueSource is the live view of every device's rx queues.
type QueueSource interface {
	Queues(ctx context.Context) ([]Device, error)
}

// BusQueues reads the queues with packet_steering get_queues over a Bus,
// as the LuCI page does.
type BusQueues struct{ Bus Bus }

// Queues implements QueueSource.
func (b BusQueues) Queues(ctx context.Context) ([]Device, error) {
	st, out, err := b.Bus.Call(ctx, "packet_steering", "get_queues", json.RawMessage(`{}`))
	if err != nil {
		return nil, err
	}
	if st != 0 {
		return nil, fmt.Errorf("packet_steering get_queues: ubus status %d", st)
	}
	var reply struct {
		Devices []Device `json:"devices"`
	}
	if err := json.Unmarshal(out, &reply); err != nil {
		return nil, fmt.Errorf("packet_steering get_queues: %w", err)
	}
	return reply.Devices, nil
}

// Traffic simulates receive traffic on a fixture root, for the demo only:
// every Tick it adds packets to the "processed" column of the root's
// proc/net/softnet_stat, on the CPUs where the live steering sends each rx
// queue's packets. With an RPS mask they are processed on its CPUs; without
// one, on the CPUs of the queue's NAPI thread, else of its IRQ. So the
// page's per-CPU counters move, and move elsewhere when the mode changes.
//
// It models placement only: no squeeze, no drops, no cost of RPS. It must
// never be pointed at a real machine's root; it refuses "/".
type Traffic struct {
	Root   string
	Queues QueueSource
	// PPS is the offered load per rx queue of each device that has a NAPI
	// thread or an IRQ per queue (ethernet rings), in packets per second.
	PPS float64
	// Vary is the amplitude (0-1) of a slow sine on each queue's rate, so the
	// load has some shape; 0 keeps it constant.
	Vary float64
	// Tick is the update period (default 1 s).
	Tick time.Duration
}

// Run updates the counters every Tick until ctx is done. It returns nil on
// cancellation and the first error otherwise.
func (t Traffic) Run(ctx context.Context) error {
	if filepath.Clean(t.Root) == "/" || t.Root == "" {
		return fmt.Errorf("demo traffic: refusing root %q", t.Root)
	}
	tick := t.Tick
	if tick <= 0 {
		tick = time.Second
	}
	tk := time.NewTicker(tick)
	defer tk.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tk.C:
			if err := t.Step(ctx, now, now.Sub(last)); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			last = now
		}
	}
}

// Step adds dt worth of packets at time now.
func (t Traffic) Step(ctx context.Context, now time.Time, dt time.Duration) error {
	devs, err := t.Queues.Queues(ctx)
	if err != nil {
		return fmt.Errorf("demo traffic: %w", err)
	}
	add := map[int]float64{}
	for _, d := range devs {
		if !carriesTraffic(d) {
			continue
		}
		for qi, rx := range d.Rx {
			rate := t.PPS
			if t.Vary > 0 {
				phase := float64(len(d.Name)*7+qi) * 1.3
				rate *= 1 + t.Vary*math.Sin(float64(now.UnixMilli())/9000+phase)
			}
			cpus := queueCPUs(rx)
			if len(cpus) == 0 {
				continue
			}
			per := rate * dt.Seconds() / float64(len(cpus))
			for _, c := range cpus {
				add[c] += per
			}
		}
	}
	return addProcessed(filepath.Join(t.Root, "proc", "net", "softnet_stat"), add)
}

// carriesTraffic: devices with a NAPI thread or an IRQ of their own per
// queue, i.e. the hardware rings the demo feeds.
func carriesTraffic(d Device) bool {
	for _, rx := range d.Rx {
		if rx.NAPI != nil || rx.IRQ != nil {
			return true
		}
	}
	return false
}

// queueCPUs is where an rx queue's packets are processed under the live
// values.
func queueCPUs(rx RxQueue) []int {
	if s, err := cpuset.ParseMask(rx.RPSCPUs); err == nil && !s.IsEmpty() {
		return s.CPUs()
	}
	if rx.NAPI != nil {
		if s, err := cpuset.ParseList(rx.NAPI.CPUs); err == nil && !s.IsEmpty() {
			return s.CPUs()
		}
	}
	if rx.IRQ != nil {
		if s, err := cpuset.ParseList(rx.IRQ.CPUs); err == nil && !s.IsEmpty() {
			return s.CPUs()
		}
	}
	return nil
}

// addProcessed adds packets to the first column of the rows of a
// softnet_stat file (the CPU is the 13th column when there is one, else the
// row number) and replaces the file atomically. Values wrap at 32 bits as
// the kernel prints them.
func addProcessed(path string, add map[int]float64) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("demo traffic: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		cpu := i
		if len(f) >= 13 {
			if v, err := strconv.ParseUint(f[12], 16, 32); err == nil {
				cpu = int(v)
			}
		}
		n := uint64(math.Round(add[cpu]))
		if n == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 16, 32)
		if err != nil {
			return fmt.Errorf("demo traffic: %s line %d: %w", path, i+1, err)
		}
		f[0] = fmt.Sprintf("%08x", uint32(v+n))
		lines[i] = strings.Join(f, " ")
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".softnet_stat-")
	if err != nil {
		return fmt.Errorf("demo traffic: %w", err)
	}
	_, werr := tmp.WriteString(strings.Join(lines, "\n") + "\n")
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("demo traffic: write %s: %v %v", path, werr, cerr)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("demo traffic: %w", err)
	}
	return nil
}
