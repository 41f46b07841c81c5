package steering

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform/fixture"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// userNAPIProcesses returns the status files of user processes named like
// NAPI threads, which must never be touched.
func userNAPIStatus(t *testing.T, root string, spec fixture.Spec) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, p := range spec.Processes {
		if !p.Kernel && strings.HasPrefix(p.Comm, "napi/") {
			b, err := os.ReadFile(filepath.Join(root, "proc", fmt.Sprint(p.PID), "status"))
			if err != nil {
				t.Fatal(err)
			}
			out[p.PID] = string(b)
		}
	}
	return out
}

func TestApplyIdempotentOnPresets(t *testing.T) {
	ctx := context.Background()
	for i, name := range fixture.PresetNames() {
		for j, mode := range plan.Modes {
			if !fixturetest.InShort(i, j, len(plan.Modes)) {
				continue
			}
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				spec, _ := fixture.Preset(name)
				root := fixturetest.Root(t, name, nil)
				users := userNAPIStatus(t, root, spec)
				e := NewEngine(root, WithClock(func() time.Time { return time.Unix(1700000000, 0) }))
				res, err := e.SetMode(ctx, SetModeRequest{Mode: mode, Flows: intp(64), Reason: "test"})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Failed) != 0 {
					t.Fatalf("failed: %+v", res.Failed)
				}
				// Every action the plan holds is now live, as a fresh
				// read of the fixture shows.
				_, p, err := e.Plan(ctx, plan.PlanRequest{})
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range p.Actions {
					if a.Current != "" && !(a.Kind == plan.KindSysctl && a.Current == "-1") && !plan.SameValue(a.Kind, a.Current, a.Value) {
						t.Errorf("after apply %s %s is %q, want %q", a.Kind, a.Target(), a.Current, a.Value)
					}
				}
				again, err := e.Apply(ctx, ApplyRequest{Reason: "again"})
				if err != nil {
					t.Fatal(err)
				}
				if len(again.Changed) != 0 || len(again.Failed) != 0 {
					t.Fatalf("second apply changed %v failed %v", kinds(again.Changed), again.Failed)
				}
				if again.Unchanged+len(again.Skipped) != len(p.Actions) {
					t.Errorf("second apply: %d unchanged + %d skipped of %d actions", again.Unchanged, len(again.Skipped), len(p.Actions))
				}
				st, err := e.Status(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !st.InSync {
					t.Errorf("status not in sync after apply")
				}
				want := ApplyRecord{Time: time.Unix(1700000000, 0), Reason: "again", DurationUS: again.DurationUS}
				if st.LastApply == nil || *st.LastApply != want {
					t.Errorf("last apply %+v, want %+v", st.LastApply, want)
				}
				if got := userNAPIStatus(t, root, spec); fmt.Sprint(got) != fmt.Sprint(users) {
					t.Errorf("a user process named like a NAPI thread was touched")
				}
			})
		}
	}
}

func TestApplyFixtureThreadAffinity(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	e := NewEngine(root)
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAuto}); err != nil {
		t.Fatal(err)
	}
	snap, p, err := e.Plan(ctx, plan.PlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range p.Actions {
		if a.Kind != plan.KindNAPIAffinity {
			continue
		}
		n++
		b, err := os.ReadFile(filepath.Join(root, "proc", fmt.Sprint(a.PID), "status"))
		if err != nil {
			t.Fatal(err)
		}
		want := "Cpus_allowed_list:\t" + a.Value + "\n"
		if !strings.Contains(string(b), want) {
			t.Errorf("%s status lacks %q:\n%s", a.Thread, want, b)
		}
		set, _ := cpuset.ParseList(a.Value)
		if mask := "Cpus_allowed:\t" + set.KernelMask(len(snap.CPUs)) + "\n"; !strings.Contains(string(b), mask) {
			t.Errorf("%s status lacks %q:\n%s", a.Thread, mask, b)
		}
	}
	if n != 4 {
		t.Fatalf("%d NAPI actions on ipq807x auto, want 4 (one per ring)", n)
	}
}

func TestEngineApplyOneDevice(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	e := NewEngine(root)
	for _, dev := range []string{"eth9", "../eth0", "eth0/queues", ""} {
		if dev == "" {
			continue
		}
		if _, err := e.Apply(ctx, ApplyRequest{Device: dev}); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("Apply(device %q) = %v, want ErrInvalid", dev, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "var/lock")); err == nil {
		t.Errorf("an invalid device created the lock directory")
	}
	snap, err := e.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Apply(ctx, ApplyRequest{Device: "eth0", Reason: "hotplug"})
	if err != nil {
		t.Fatal(err)
	}
	threads := 0
	for _, a := range res.Changed {
		if plan.PairQueues(snap).ActionDevice(a) != "eth0" {
			t.Errorf("device apply of eth0 changed %s %s", a.Kind, a.Target())
		}
		if a.Kind == plan.KindNAPIAffinity || a.Kind == plan.KindIRQAffinity {
			threads++
		}
	}
	if threads == 0 {
		t.Errorf("device apply left out eth0's NAPI threads and IRQs: %v", kinds(res.Changed))
	}
	dry, err := e.Apply(ctx, ApplyRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range dry.Changed {
		if plan.PairQueues(snap).ActionDevice(a) == "eth0" {
			t.Errorf("eth0 knob %s still differs after its device apply", a.Target())
		}
	}
}

func TestQueues(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	e := NewEngine(root)
	if _, err := e.Queues(ctx, "nope0"); !errors.Is(err, plan.ErrInvalid) {
		t.Fatalf("unknown device: %v", err)
	}
	all, err := e.Queues(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := e.Snapshot(ctx)
	if len(all) != len(snap.Devices) {
		t.Fatalf("%d devices, want %d", len(all), len(snap.Devices))
	}
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAuto}); err != nil {
		t.Fatal(err)
	}
	qs, err := e.Queues(ctx, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Name != "eth0" || len(qs[0].Rx) != 4 || qs[0].Kind == "" {
		t.Fatalf("eth0 queues %+v", qs)
	}
	seen := map[int]bool{}
	for _, rx := range qs[0].Rx {
		if rx.NAPI == nil || rx.IRQ == nil {
			t.Fatalf("%s: napi %+v irq %+v, want both tied", rx.Queue, rx.NAPI, rx.IRQ)
		}
		if seen[rx.NAPI.PID] {
			t.Errorf("thread %d tied to two queues", rx.NAPI.PID)
		}
		seen[rx.NAPI.PID] = true
		if rx.NAPI.WantCPUs == "" || !cpuset.SameList(rx.NAPI.CPUs, rx.NAPI.WantCPUs) {
			t.Errorf("%s napi live %q want %q", rx.Queue, rx.NAPI.CPUs, rx.NAPI.WantCPUs)
		}
		if rx.IRQ.WantCPUs == "" || !cpuset.SameList(rx.IRQ.CPUs, rx.IRQ.WantCPUs) {
			t.Errorf("%s irq live %q want %q", rx.Queue, rx.IRQ.CPUs, rx.IRQ.WantCPUs)
		}
		if rx.WantRPSCPUs == "" || !cpuset.SameMask(rx.RPSCPUs, rx.WantRPSCPUs) {
			t.Errorf("%s rps live %q want %q", rx.Queue, rx.RPSCPUs, rx.WantRPSCPUs)
		}
	}
	// Ring i's thread and IRQ sit on CPU i (rss-per-cpu, docs/platforms.md), so the views must
	// pair ring i with the thread and IRQ of ring i.
	for i, rx := range qs[0].Rx {
		if rx.NAPI.CPUs != fmt.Sprint(i) || rx.IRQ.CPUs != fmt.Sprint(i) {
			t.Errorf("%s: napi on %s, irq on %s; want CPU %d", rx.Queue, rx.NAPI.CPUs, rx.IRQ.CPUs, i)
		}
	}
}

func TestStatusOffloadAndPlatform(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		preset, offload string
	}{{"bcm53xx", plan.OffloadNone}, {"bcm53xx-sw", plan.OffloadSoftware}, {"bcm53xx-hw", plan.OffloadHardware}} {
		st, err := NewEngine(fixturetest.Root(t, tc.preset, nil)).Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Offload != tc.offload || st.Platform.CPUs != 2 || st.Platform.Target == "" || len(st.CPUs) != 2 || st.Policy == "" {
			t.Errorf("%s: status %+v", tc.preset, st)
		}
		if st.LastApply != nil {
			t.Errorf("%s: last apply before any apply", tc.preset)
		}
	}
}

// tenDevices is a 4-CPU router with 10 netdevs besides lo: the ipq807x
// preset (eth0 with 4 rings, 5 DSA ports, br-lan, wlan0) plus wlan1 and a
// second, single-queue ethernet.
func tenDevices(s *fixture.Spec) {
	s.Devices = append(s.Devices,
		fixture.Device{Name: "wlan1", Driver: "ath11k_ahb", Bus: "platform/soc@0/c000000.wifi", Phy: "phy1", PhyIndex: 1},
		fixture.Device{Name: "eth1", Driver: "r8152", Bus: "platform/usb1-bus", RxQueues: 1, TxQueues: 1},
	)
}

func TestTenDeviceFixture(t *testing.T) {
	root := fixturetest.Root(t, "ipq807x", tenDevices)
	snap, err := NewEngine(root).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range snap.Devices {
		if d.Name != "lo" {
			n++
		}
	}
	if n != 10 || len(snap.CPUs) != 4 {
		t.Fatalf("%d devices and %d CPUs, want 10 and 4", n, len(snap.CPUs))
	}
}

// BenchmarkApply measures one whole apply (read the machine, plan, read
// every knob, write what differs) on a 4-CPU, 10-device fixture root:
// "in-sync" writes nothing, "toggle" alternates legacy and auto so every
// iteration rewrites the knobs the two modes disagree on.
func BenchmarkApply(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		toggle bool
	}{{"in-sync", false}, {"toggle", true}} {
		b.Run(bc.name, func(b *testing.B) {
			root := fixturetest.Root(b, "ipq807x", tenDevices)
			e := NewEngine(root)
			if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAuto}); err != nil {
				b.Fatal(err)
			}
			modes := []plan.Mode{plan.ModeLegacy, plan.ModeAuto}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var res *Result
				var err error
				if bc.toggle {
					res, err = e.SetMode(ctx, SetModeRequest{Mode: modes[i%2]})
				} else {
					res, err = e.Apply(ctx, ApplyRequest{Reason: "bench"})
				}
				if err != nil || len(res.Failed) != 0 {
					b.Fatalf("%v %+v", err, res)
				}
				if !bc.toggle && len(res.Changed) != 0 {
					b.Fatalf("in-sync apply changed %d knobs", len(res.Changed))
				}
				if bc.toggle && len(res.Changed) == 0 {
					b.Fatal("toggle apply changed nothing")
				}
			}
		})
	}
}

func TestViewCache(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	for _, tc := range []struct {
		name string
		opts []Option
		// wantStale: a change behind the engine's back is not seen yet.
		wantStale bool
	}{
		{"no cache", nil, false},
		{"cache", []Option{WithViewCache(time.Hour)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine(root, tc.opts...)
			if _, err := e.Apply(ctx, ApplyRequest{}); err != nil {
				t.Fatal(err)
			}
			st, err := e.Status(ctx)
			if err != nil || !st.InSync {
				t.Fatalf("after apply: %v in sync %v", err, st != nil && st.InSync)
			}
			// Someone else changes a managed knob.
			if err := os.WriteFile(rps, []byte("f\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			st, _ = e.Status(ctx)
			if st.InSync != tc.wantStale {
				t.Errorf("status after an outside change: in sync %v, want %v", st.InSync, tc.wantStale)
			}
			qs, err := e.Queues(ctx, "eth0")
			if err != nil {
				t.Fatal(err)
			}
			if got := qs[0].Rx[0].RPSCPUs; (got == "f") == tc.wantStale {
				t.Errorf("queues shows rps %q", got)
			}
			// An apply drops the cache: the repaired state shows at once.
			res, err := e.Apply(ctx, ApplyRequest{})
			if err != nil || len(res.Changed) != 1 {
				t.Fatalf("repair apply: %v %+v", err, res)
			}
			if st, _ = e.Status(ctx); !st.InSync {
				t.Errorf("not in sync after the repair apply")
			}
			// A live mode change drops it too.
			if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeOff}); err != nil {
				t.Fatal(err)
			}
			if st, _ = e.Status(ctx); st.Mode != plan.ModeOff || !st.InSync {
				t.Errorf("after set_mode off: mode %s in sync %v", st.Mode, st.InSync)
			}
		})
	}
}

func intp(n int) *int { return &n }

// Every apply that is not a dry run gets the next Result.Seq, set_mode's
// too: the order the daemon's loop runner follows.
func TestEngineApplySeq(t *testing.T) {
	ctx := context.Background()
	e := NewEngine(fixturetest.Root(t, "ipq807x", nil))
	var got []uint64
	for _, step := range []func() (*Result, error){
		func() (*Result, error) { return e.Apply(ctx, ApplyRequest{Reason: "start"}) },
		func() (*Result, error) { return e.Apply(ctx, ApplyRequest{DryRun: true}) },
		func() (*Result, error) { return e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAdaptive}) },
		func() (*Result, error) { return e.Apply(ctx, ApplyRequest{Device: "eth0", Reason: "hotplug"}) },
	} {
		res, err := step()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Seq)
	}
	if fmt.Sprint(got) != "[1 0 2 3]" {
		t.Errorf("Seq of apply, dry run, set_mode, device apply = %v, want [1 0 2 3]", got)
	}
}
