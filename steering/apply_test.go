package steering

import (
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"golang.org/x/sys/unix"
)

// memWriter is an in-memory Writer that records every read and write and
// fails the operations the test names.
type memWriter struct {
	files   map[string]string // path -> value
	threads map[int]string    // pid -> cpu list
	comms   map[int]string    // pid -> comm
	// failWrite maps a path (or "pid N") to the error its next write gets;
	// failRead likewise for reads.
	failWrite map[string]error
	failRead  map[string]error
	reads     []string
	writes    []string // "path=value" in order
}

func newMemWriter() *memWriter {
	return &memWriter{files: map[string]string{}, threads: map[int]string{}, comms: map[int]string{},
		failWrite: map[string]error{}, failRead: map[string]error{}}
}

func (m *memWriter) ReadKnob(rel string) (string, error) {
	m.reads = append(m.reads, rel)
	if err := m.failRead[rel]; err != nil {
		return "", err
	}
	v, ok := m.files[rel]
	if !ok {
		return "", &fs.PathError{Op: "open", Path: rel, Err: unix.ENOENT}
	}
	return v, nil
}

func (m *memWriter) WriteKnob(rel, value string) error {
	if err := m.failWrite[rel]; err != nil {
		delete(m.failWrite, rel)
		return &fs.PathError{Op: "write", Path: rel, Err: err}
	}
	if _, ok := m.files[rel]; !ok {
		return &fs.PathError{Op: "open", Path: rel, Err: unix.ENOENT}
	}
	m.writes = append(m.writes, rel+"="+value)
	m.files[rel] = value
	return nil
}

func (m *memWriter) ThreadAffinity(pid int, comm string) (string, error) {
	key := fmt.Sprintf("pid %d", pid)
	m.reads = append(m.reads, key)
	if err := m.failRead[key]; err != nil {
		return "", err
	}
	if m.comms[pid] != comm {
		return "", fmt.Errorf("pid %d: %w", pid, ErrNotKernelThread)
	}
	return m.threads[pid], nil
}

func (m *memWriter) SetThreadAffinity(pid int, comm, cpus string) error {
	key := fmt.Sprintf("pid %d", pid)
	if err := m.failWrite[key]; err != nil {
		delete(m.failWrite, key)
		return err
	}
	if m.comms[pid] != comm {
		return fmt.Errorf("pid %d: %w", pid, ErrNotKernelThread)
	}
	m.writes = append(m.writes, key+"="+cpus)
	m.threads[pid] = cpus
	return nil
}

// twoDeviceMachine is a 4-CPU machine with eth0 (2 rx, 2 tx queues, two NAPI
// threads, one IRQ per queue) and eth1 (1 rx, 1 tx), the knobs holding the
// kernel's defaults, and the plan that steers both.
func twoDeviceMachine() (*platform.Snapshot, *memWriter, []plan.Action) {
	snap := &platform.Snapshot{
		Root: "/fixture",
		Devices: []platform.Device{
			{Name: "eth0", RxQueues: []platform.RxQueue{{Index: 0, Name: "rx-0"}, {Index: 1, Name: "rx-1"}},
				TxQueues: []platform.TxQueue{{Index: 0, Name: "tx-0"}, {Index: 1, Name: "tx-1"}}},
			{Name: "eth1", RxQueues: []platform.RxQueue{{Index: 0, Name: "rx-0"}},
				TxQueues: []platform.TxQueue{{Index: 0, Name: "tx-0"}}},
		},
		NAPIThreads: []platform.NAPIThread{
			{PID: 300, Name: "napi/eth0-257", Device: "eth0"},
			{PID: 301, Name: "napi/eth0-258", Device: "eth0"},
		},
		IRQs: []platform.IRQ{{Number: 60, Name: "eth0-rx-0", Device: "eth0", Queue: 0}},
	}
	w := newMemWriter()
	for _, p := range []string{
		"sys/class/net/eth0/queues/rx-0/rps_cpus", "sys/class/net/eth0/queues/rx-1/rps_cpus",
		"sys/class/net/eth0/queues/tx-0/xps_cpus", "sys/class/net/eth0/queues/tx-1/xps_cpus",
		"sys/class/net/eth1/queues/rx-0/rps_cpus", "sys/class/net/eth1/queues/tx-0/xps_cpus",
	} {
		w.files[p] = "0"
	}
	w.files["sys/class/net/eth0/queues/rx-0/rps_flow_cnt"] = "0"
	w.files["sys/class/net/eth1/queues/rx-0/rps_flow_cnt"] = "0"
	w.files["proc/irq/60/smp_affinity"] = "f"
	w.files["proc/sys/net/core/rps_sock_flow_entries"] = "0"
	w.threads[300], w.threads[301] = "0-3", "0-3"
	w.comms[300], w.comms[301] = "napi/eth0-257", "napi/eth0-258"
	acts := []plan.Action{
		{Kind: plan.KindRPSCPUs, Device: "eth0", Queue: "rx-0", Value: "0"},
		{Kind: plan.KindRPSCPUs, Device: "eth0", Queue: "rx-1", Value: "00000000"},
		{Kind: plan.KindRPSFlowCnt, Device: "eth0", Queue: "rx-0", Value: "1000"},
		{Kind: plan.KindXPSCPUs, Device: "eth0", Queue: "tx-0", Value: "1"},
		{Kind: plan.KindXPSCPUs, Device: "eth0", Queue: "tx-1", Value: "2"},
		{Kind: plan.KindNAPIAffinity, Device: "eth0", PID: 300, Thread: "napi/eth0-257", Value: "0"},
		{Kind: plan.KindNAPIAffinity, Device: "eth0", PID: 301, Thread: "napi/eth0-258", Value: "1"},
		{Kind: plan.KindIRQAffinity, Device: "eth0", IRQ: 60, Name: "eth0-rx-0", Value: "1"},
		{Kind: plan.KindRPSCPUs, Device: "eth1", Queue: "rx-0", Value: "e"},
		{Kind: plan.KindRPSFlowCnt, Device: "eth1", Queue: "rx-0", Value: "1000"},
		{Kind: plan.KindXPSCPUs, Device: "eth1", Queue: "tx-0", Value: "f"},
		{Kind: plan.KindSysctl, Key: "net.core.rps_sock_flow_entries", Value: "2000"},
	}
	return snap, w, acts
}

func kinds(acts []plan.Action) []string {
	var out []string
	for _, a := range acts {
		out = append(out, string(a.Kind)+" "+knobID(a))
	}
	return out
}

func TestApplyPlanWritesOnlyDifferences(t *testing.T) {
	snap, w, acts := twoDeviceMachine()
	res := ApplyPlan(context.Background(), w, snap, acts, false)
	if len(res.Failed) != 0 || len(res.Skipped) != 0 {
		t.Fatalf("failed %v skipped %v", res.Failed, res.Skipped)
	}
	// eth0 rx-0 and rx-1 already hold an empty mask ("0" == "00000000").
	if res.Unchanged != 2 || len(res.Changed) != 10 {
		t.Fatalf("unchanged %d changed %d, want 2 and 10: %v", res.Unchanged, len(res.Changed), kinds(res.Changed))
	}
	// One read per knob, at most one write per knob.
	if len(w.reads) != len(acts) {
		t.Errorf("%d reads for %d knobs: %v", len(w.reads), len(acts), w.reads)
	}
	seen := map[string]bool{}
	for _, wr := range w.writes {
		k, _, _ := strings.Cut(wr, "=")
		if seen[k] {
			t.Errorf("knob %s written twice", k)
		}
		seen[k] = true
	}
	// Thread and IRQ placement first within eth0; the sysctl last.
	want := []string{"pid 300=0", "pid 301=1", "proc/irq/60/smp_affinity=1"}
	if !slices.Equal(w.writes[:3], want) {
		t.Errorf("first writes %v, want %v", w.writes[:3], want)
	}
	if last := w.writes[len(w.writes)-1]; last != "proc/sys/net/core/rps_sock_flow_entries=2000" {
		t.Errorf("last write %q, want the sysctl", last)
	}
	// Changed actions carry the value they replaced.
	for _, a := range res.Changed {
		if a.Kind == plan.KindIRQAffinity && a.Current != "f" {
			t.Errorf("irq action current %q, want f", a.Current)
		}
	}

	// The kernel rounds flow counts up to a power of two; a second apply
	// sees what it would read back and changes nothing.
	w.files["sys/class/net/eth0/queues/rx-0/rps_flow_cnt"] = "1024"
	w.files["sys/class/net/eth1/queues/rx-0/rps_flow_cnt"] = "1024"
	w.files["proc/sys/net/core/rps_sock_flow_entries"] = "2048"
	w.threads[301] = "1" // as sched_getaffinity shows it
	w.writes = nil
	res = ApplyPlan(context.Background(), w, snap, acts, false)
	if len(res.Changed) != 0 || res.Unchanged != len(acts) || len(w.writes) != 0 {
		t.Fatalf("second apply: changed %v, unchanged %d, writes %v", kinds(res.Changed), res.Unchanged, w.writes)
	}
}

func TestApplyPlanFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup injects the fault.
		setup func(w *memWriter)
		// wantFailed and wantSkipped are the counts; wantState the files
		// after the apply.
		wantFailed, wantSkipped int
		wantState               map[string]string
		wantReason              string // a substring of some skip reason
	}{
		{
			name:        "EINVAL on one queue rolls that device back, other device applied",
			setup:       func(w *memWriter) { w.failWrite["sys/class/net/eth0/queues/tx-0/xps_cpus"] = unix.EINVAL },
			wantFailed:  1,
			wantSkipped: 4 + 1, // pid 300, pid 301, irq 60, rps_flow_cnt undone; tx-1 not attempted
			wantState: map[string]string{
				"proc/irq/60/smp_affinity":                    "f",
				"sys/class/net/eth0/queues/rx-0/rps_flow_cnt": "0",
				"sys/class/net/eth0/queues/tx-0/xps_cpus":     "0",
				"sys/class/net/eth0/queues/tx-1/xps_cpus":     "0",
				"pid 300": "0-3",
				"pid 301": "0-3",
				"sys/class/net/eth1/queues/rx-0/rps_cpus":     "e",
				"sys/class/net/eth1/queues/tx-0/xps_cpus":     "f",
				"proc/sys/net/core/rps_sock_flow_entries":     "2000",
				"sys/class/net/eth1/queues/rx-0/rps_flow_cnt": "1000",
				"sys/class/net/eth0/queues/rx-0/rps_cpus":     "0",
				"sys/class/net/eth0/queues/rx-1/rps_cpus":     "0",
			},
			wantReason: "rolled back: xps_cpus on eth0 failed",
		},
		{
			name: "ENOENT mid-device is a skip, the rest of the device applied",
			setup: func(w *memWriter) {
				delete(w.files, "sys/class/net/eth0/queues/tx-0/xps_cpus")
			},
			wantFailed:  0,
			wantSkipped: 1,
			wantState: map[string]string{
				"sys/class/net/eth0/queues/tx-1/xps_cpus": "2",
				"proc/irq/60/smp_affinity":                "1",
				"pid 300":                                 "0",
			},
			wantReason: "vanished",
		},
		{
			name:        "ENODEV on write is a skip",
			setup:       func(w *memWriter) { w.failWrite["sys/class/net/eth1/queues/rx-0/rps_cpus"] = unix.ENODEV },
			wantSkipped: 1,
			wantState: map[string]string{
				"sys/class/net/eth1/queues/rx-0/rps_cpus": "0",
				"sys/class/net/eth1/queues/tx-0/xps_cpus": "f",
			},
			wantReason: "vanished",
		},
		{
			name:        "EPERM on a thread fails eth0 before anything was written",
			setup:       func(w *memWriter) { w.failWrite["pid 300"] = unix.EPERM },
			wantFailed:  1,
			wantSkipped: 7, // the other seven eth0 actions: not attempted
			wantState: map[string]string{
				"pid 300":                  "0-3",
				"pid 301":                  "0-3",
				"proc/irq/60/smp_affinity": "f",
				"sys/class/net/eth1/queues/rx-0/rps_cpus": "e",
			},
			wantReason: "not attempted: napi_affinity on eth0 failed",
		},
		{
			name:        "a thread that became another process is skipped",
			setup:       func(w *memWriter) { w.comms[301] = "sh" },
			wantSkipped: 1,
			wantState:   map[string]string{"pid 301": "0-3", "pid 300": "0"},
			wantReason:  "vanished",
		},
		{
			name: "a read error other than ENOENT fails the device",
			setup: func(w *memWriter) {
				w.failRead["proc/irq/60/smp_affinity"] = &fs.PathError{Op: "read", Path: "x", Err: unix.EIO}
			},
			wantFailed:  1,
			wantSkipped: 2 + 5, // two threads undone, five queue knobs not attempted
			wantState:   map[string]string{"pid 300": "0-3", "sys/class/net/eth1/queues/tx-0/xps_cpus": "f"},
			wantReason:  "rolled back",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, w, acts := twoDeviceMachine()
			tc.setup(w)
			res := ApplyPlan(context.Background(), w, snap, acts, false)
			if len(res.Failed) != tc.wantFailed || len(res.Skipped) != tc.wantSkipped {
				t.Fatalf("failed %d skipped %d, want %d and %d\nfailed %+v\nskipped %+v",
					len(res.Failed), len(res.Skipped), tc.wantFailed, tc.wantSkipped, res.Failed, res.Skipped)
			}
			for k, want := range tc.wantState {
				var got string
				var pid int
				if _, err := fmt.Sscanf(k, "pid %d", &pid); err == nil {
					got = w.threads[pid]
				} else {
					got = w.files[k]
				}
				if got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			found := false
			for _, s := range res.Skipped {
				if strings.Contains(s.Reason, tc.wantReason) {
					found = true
				}
			}
			if !found {
				t.Errorf("no skip reason with %q: %+v", tc.wantReason, res.Skipped)
			}
			for _, f := range res.Failed {
				if f.Error == "" {
					t.Errorf("failure without the kernel's error: %+v", f)
				}
			}
			// Nothing of a failed device may stay changed.
			for _, f := range res.Failed {
				for _, c := range res.Changed {
					if c.Device == f.Action.Device {
						t.Errorf("%s reported changed although %s failed", knobID(c), f.Action.Device)
					}
				}
			}
		})
	}
}

func TestApplyPlanFailureKeepsKernelError(t *testing.T) {
	snap, w, acts := twoDeviceMachine()
	w.failWrite["sys/class/net/eth1/queues/tx-0/xps_cpus"] = unix.EINVAL
	res := ApplyPlan(context.Background(), w, snap, acts, false)
	if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Error, "invalid argument") {
		t.Fatalf("failed = %+v, want the EINVAL text", res.Failed)
	}
	// eth1 rx-0 rps_cpus and rps_flow_cnt were written before tx-0 and
	// must be back at their old values.
	if got := w.files["sys/class/net/eth1/queues/rx-0/rps_cpus"]; got != "0" {
		t.Errorf("eth1 rx-0 rps_cpus %q after rollback, want 0", got)
	}
	if got := w.files["sys/class/net/eth1/queues/rx-0/rps_flow_cnt"]; got != "0" {
		t.Errorf("eth1 rx-0 rps_flow_cnt %q after rollback, want 0", got)
	}
	// The rollback writes come in reverse order of the writes they undo.
	n := len(w.writes)
	got := w.writes[n-3 : n-1]
	want := []string{"sys/class/net/eth1/queues/rx-0/rps_flow_cnt=0", "sys/class/net/eth1/queues/rx-0/rps_cpus=0"}
	if !slices.Equal(got, want) {
		t.Errorf("rollback writes %v, want %v", got, want)
	}
}

func TestApplyPlanRejectsUnsafeNames(t *testing.T) {
	snap, w, _ := twoDeviceMachine()
	for _, name := range []string{"../../etc", "..", "."} {
		snap.Devices = append(snap.Devices, platform.Device{Name: name, RxQueues: []platform.RxQueue{{Name: "rx-0"}}})
	}
	for _, a := range []plan.Action{
		{Kind: plan.KindRPSCPUs, Device: "eth9", Queue: "rx-0", Value: "1"},
		{Kind: plan.KindRPSCPUs, Device: "../../etc", Queue: "rx-0", Value: "1"},
		{Kind: plan.KindRPSCPUs, Device: "..", Queue: "rx-0", Value: "1"},
		{Kind: plan.KindRPSFlowCnt, Device: ".", Queue: "rx-0", Value: "1"},
		{Kind: plan.KindRPSCPUs, Device: "eth0", Queue: "rx-0/../../x", Value: "1"},
		{Kind: plan.KindRPSCPUs, Device: "eth0", Queue: "tx-0", Value: "1"},
		{Kind: plan.KindXPSCPUs, Device: "eth0", Queue: "rx-0", Value: "1"},
		{Kind: plan.KindRPSCPUs, Device: "eth0", Queue: "rx-7", Value: "1"},
		{Kind: plan.KindNAPIAffinity, Device: "eth0", PID: 1, Thread: "init", Value: "0"},
		{Kind: plan.KindIRQAffinity, Device: "eth0", IRQ: 61, Value: "1"},
		{Kind: plan.KindSysctl, Key: "kernel.core_pattern", Value: "|/bin/sh"},
		{Kind: "bogus", Device: "eth0", Value: "1"},
	} {
		t.Run(string(a.Kind)+" "+a.Device+" "+a.Queue+a.Key, func(t *testing.T) {
			w.reads, w.writes = nil, nil
			res := ApplyPlan(context.Background(), w, snap, []plan.Action{a}, false)
			if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Error, "invalid argument") {
				t.Fatalf("failed %+v, want one invalid-argument failure", res.Failed)
			}
			if len(w.reads)+len(w.writes) != 0 {
				t.Fatalf("touched %v %v for an invalid action", w.reads, w.writes)
			}
		})
	}
}

func TestApplyPlanDryRunAndCancel(t *testing.T) {
	snap, w, acts := twoDeviceMachine()
	res := ApplyPlan(context.Background(), w, snap, acts, true)
	if len(w.writes) != 0 {
		t.Fatalf("dry run wrote %v", w.writes)
	}
	if len(res.Changed) != 10 || res.Unchanged != 2 {
		t.Fatalf("dry run: %d would change, %d unchanged; want 10, 2", len(res.Changed), res.Unchanged)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res = ApplyPlan(ctx, w, snap, acts, false)
	if len(w.writes) != 0 || len(res.Skipped) != len(acts) {
		t.Fatalf("cancelled apply wrote %v, skipped %d of %d", w.writes, len(res.Skipped), len(acts))
	}
}

func TestSameValue(t *testing.T) {
	for _, tc := range []struct {
		kind       plan.ActionKind
		live, want string
		same       bool
	}{
		{plan.KindRPSCPUs, "00000000", "0", true},
		{plan.KindRPSCPUs, "0f", "f", true},
		{plan.KindRPSCPUs, "00000001,00000000", "1,00000000", true},
		{plan.KindRPSCPUs, "e", "f", false},
		{plan.KindIRQAffinity, "ff", "f", false},
		{plan.KindNAPIAffinity, "0-3", "0,1,2,3", true},
		{plan.KindNAPIAffinity, "0-3", "0-2", false},
		{plan.KindRPSFlowCnt, "1024", "1000", true},
		{plan.KindRPSFlowCnt, "0", "0", true},
		{plan.KindRPSFlowCnt, "0", "1", false},
		{plan.KindRPSFlowCnt, "1", "1", true},
		{plan.KindSysctl, "4096", "4096", true},
		{plan.KindSysctl, "", "0", false},
		{plan.KindRPSCPUs, "zz", "0", false},
	} {
		if got := plan.SameValue(tc.kind, tc.live, tc.want); got != tc.same {
			t.Errorf("plan.SameValue(%s, %q, %q) = %v, want %v", tc.kind, tc.live, tc.want, got, tc.same)
		}
	}
}

func TestVanished(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&fs.PathError{Op: "open", Err: unix.ENOENT}, true},
		{fmt.Errorf("x: %w", unix.ENODEV), true},
		{unix.ESRCH, true},
		{fmt.Errorf("pid: %w", ErrNotKernelThread), true},
		{&fs.PathError{Op: "write", Err: unix.EINVAL}, false},
		{errors.New("other"), false},
	} {
		if got := vanished(tc.err); got != tc.want {
			t.Errorf("vanished(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// FuzzResolveKnob hands resolveKnob names from a hostile snapshot (as a
// --snapshot file could hold): whatever it accepts must be a path below
// sys/class/net/<one name>/queues/<rx-N|tx-N>/ or one of the fixed procfs
// knobs.
func FuzzResolveKnob(f *testing.F) {
	f.Add(string(plan.KindRPSCPUs), "eth0", "rx-0", 0)
	f.Add(string(plan.KindXPSCPUs), "..", "tx-1", 0)
	f.Add(string(plan.KindRPSFlowCnt), ".", "rx-0", 0)
	f.Add(string(plan.KindRPSCPUs), "a/b", "rx-0/../../x", 0)
	f.Add(string(plan.KindIRQAffinity), "", "", 60)
	f.Add(string(plan.KindSysctl), "", "", 0)
	f.Fuzz(func(t *testing.T, kind, dev, queue string, irq int) {
		snap := &platform.Snapshot{
			Devices: []platform.Device{{Name: dev, RxQueues: []platform.RxQueue{{Name: queue}}, TxQueues: []platform.TxQueue{{Name: queue}}}},
			IRQs:    []platform.IRQ{{Number: irq}},
		}
		k, err := newKnobIndex(snap).resolveKnob(plan.Action{Kind: plan.ActionKind(kind), Device: dev, Queue: queue, IRQ: irq, Key: queue})
		if err != nil || k.thread {
			return
		}
		parts := strings.Split(k.path, "/")
		switch {
		case strings.HasPrefix(k.path, "sys/class/net/"):
			if len(parts) != 7 || parts[4] != "queues" || !plan.ValidDeviceName(parts[3]) ||
				!(validQueueName(parts[5], "rx-") || validQueueName(parts[5], "tx-")) {
				t.Fatalf("path %q from %q %q", k.path, dev, queue)
			}
		case k.path == "proc/irq/"+fmt.Sprint(irq)+"/smp_affinity" && irq >= 0:
		case k.path == "proc/sys/net/core/rps_sock_flow_entries":
		default:
			t.Fatalf("unexpected path %q", k.path)
		}
		for _, p := range parts {
			if p == "" || p == "." || p == ".." {
				t.Fatalf("path %q has an empty, . or .. element", k.path)
			}
		}
	})
}

// TestNoExecOnApplyPath guards the design rule that an apply never forks or
// execs: no non-test file of the packages on the path (steering, platform,
// internal/uci) imports os/exec or calls a fork/exec function.
func TestNoExecOnApplyPath(t *testing.T) {
	for _, dir := range []string{".", "../platform", "../internal/uci"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				if imp.Path.Value == `"os/exec"` {
					t.Errorf("%s imports os/exec", f)
				}
			}
			for _, call := range []string{"ForkExec", "StartProcess", "syscall.Exec", "unix.Exec"} {
				if strings.Contains(string(src), call+"(") {
					t.Errorf("%s calls %s", f, call)
				}
			}
		}
	}
}

// TestResultDevicesThroughThreadsAndIRQs: an apply whose only changes are
// NAPI thread and IRQ moves names their device (the applied event's
// devices come from Result.Devices).
func TestResultDevicesThroughThreadsAndIRQs(t *testing.T) {
	root := fixturetest.Root(t, "ipq807x", nil)
	snap, err := platform.Read(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.NewPlan(snap, plan.PlanRequest{Mode: plan.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	var moves []plan.Action
	for _, a := range p.Actions {
		if (a.Kind == plan.KindNAPIAffinity || a.Kind == plan.KindIRQAffinity) && !a.Holds() {
			moves = append(moves, a)
		}
	}
	if len(moves) == 0 {
		t.Fatal("the ipq807x plan moves no thread or IRQ")
	}
	res := ApplyPlan(context.Background(), NewFSWriter(root), snap, moves, false)
	if len(res.Changed) != len(moves) || len(res.Failed) != 0 {
		t.Fatalf("changed %d of %d, failed %v", len(res.Changed), len(moves), res.Failed)
	}
	for _, a := range res.Changed {
		if a.Device != "" {
			t.Fatalf("a thread or IRQ action with a device %q: the test needs none", a.Device)
		}
	}
	if strings.Join(res.Devices, ",") != "eth0" {
		t.Errorf("Devices = %v, want [eth0]", res.Devices)
	}
}
