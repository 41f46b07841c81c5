package steering

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// deviceTestRoot builds preset with mode configured (setDeviceTestMode).
func deviceTestRoot(t *testing.T, preset string, mode plan.Mode) string {
	t.Helper()
	root := fixturetest.Root(t, preset, func(s *fixture.Spec) {
		s.Processes = fixture.DropPIDClashes(s.Processes)
	})
	setDeviceTestMode(t, root, mode)
	return root
}

// setDeviceTestMode configures mode in root's /etc/config/packet_steering;
// in custom mode it also gives the first netdev with rx queues and a bus
// device an override and names a netdev the stock rule skips (a bridge, a
// VLAN, a DSA user port), so that it is managed too.
func setDeviceTestMode(t *testing.T, root string, mode plan.Mode) {
	t.Helper()
	text := "config globals 'globals'\n\toption mode '" + string(mode) + "'\n"
	if mode == plan.ModeCustom {
		snap, err := platform.Read(context.Background(), root)
		if err != nil {
			t.Fatal(err)
		}
		overridden, extra := false, false
		for _, d := range snap.Devices {
			switch {
			case !overridden && len(d.RxQueues) > 0 && d.BusDevice != "":
				text += "config device\n\toption name '" + d.Name + "'\n\toption rps_cpus '1'\n"
				overridden = true
			case !extra && (d.BusDevice == "" || len(d.Lowers) > 0) && d.Name != "lo":
				text += "config device\n\toption name '" + d.Name + "'\n"
				extra = true
			}
		}
	}
	dir := filepath.Join(root, "etc", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "packet_steering"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDeviceApplyMatchesFullApply checks, on every fixture preset, in
// every mode and for every netdev, that the apply of one netdev (which
// reads only what that netdev's decision needs) decides exactly what a
// full apply decides for it: the same knobs, values and current values.
func TestDeviceApplyMatchesFullApply(t *testing.T) {
	ctx := context.Background()
	type machine struct {
		name, preset string
		tweak        func(*fixture.Spec)
	}
	var machines []machine
	for _, preset := range fixture.PresetNames() {
		machines = append(machines, machine{name: preset, preset: preset})
	}
	// Two mtk_soc_eth netdevs of one bus device (mt7622, mt7986): the
	// shared napi/mtk_eth-N threads belong to the DSA conduit eth0 in
	// every mode, also to a hotplug apply of eth1 alone.
	machines = append(machines, machine{name: "mt7621-two-gmacs", preset: "mt7621", tweak: func(s *fixture.Spec) {
		s.Devices = append(s.Devices, fixture.Device{Name: "eth1", Driver: "mtk_soc_eth", Bus: "platform/1e100000.ethernet", TxQueues: 16, Threaded: true})
	}})
	for i, m := range machines {
		root := fixturetest.Root(t, m.preset, func(s *fixture.Spec) {
			s.Processes = fixture.DropPIDClashes(s.Processes)
			if m.tweak != nil {
				m.tweak(s)
			}
		})
		preset := m.name
		for j, mode := range plan.Modes {
			if !fixturetest.InShort(i, j, len(plan.Modes)) {
				continue
			}
			t.Run(preset+"/"+string(mode), func(t *testing.T) {
				setDeviceTestMode(t, root, mode)
				e := NewEngine(root)
				snap, p, full, err := e.planApply(ctx, ApplyRequest{}, nil, plan.Settings{})
				if err != nil {
					t.Fatalf("full apply: %v", err)
				}
				if p.Mode != mode {
					t.Fatalf("planned mode %s, configured %s", p.Mode, mode)
				}
				pair := plan.PairQueues(snap)
				covered := 0
				for _, d := range snap.Devices {
					var want []plan.Action
					for _, a := range full {
						if pair.ActionDevice(a) == d.Name {
							want = append(want, a)
						}
					}
					covered += len(want)
					_, _, got, err := NewEngine(root).planApply(ctx, ApplyRequest{Device: d.Name}, nil, plan.Settings{})
					if err != nil {
						t.Fatalf("apply --device %s: %v", d.Name, err)
					}
					if diff := testenv.Diff(want, got); diff != "" {
						t.Errorf("apply --device %s differs from the full apply's actions for it (-full +device):\n%s", d.Name, diff)
					}
				}
				t.Logf("%d netdevs, %d of %d actions tied to one", len(snap.Devices), covered, len(full))
			})
		}
	}
}

// TestDeviceApplyReadsLess checks what a device apply leaves unread: the
// other netdevs' knobs (or, in mode off, the other netdevs altogether), the
// other devices' IRQ affinities and NAPI thread CPUs.
func TestDeviceApplyReadsLess(t *testing.T) {
	tests := []struct {
		mode   plan.Mode
		others bool // the other netdevs are in the snapshot
	}{
		{plan.ModeAuto, true},
		{plan.ModeLegacy, true},
		{plan.ModeOff, false},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			root := deviceTestRoot(t, "ipq807x", tt.mode)
			snap, _, _, err := NewEngine(root).planApply(ctx, ApplyRequest{Device: "wlan0"}, nil, plan.Settings{})
			if err != nil {
				t.Fatal(err)
			}
			if snap.Device("wlan0") == nil {
				t.Fatal("wlan0 not read")
			}
			if got := snap.Device("eth0") != nil; got != tt.others {
				t.Fatalf("eth0 in the snapshot: %v, want %v", got, tt.others)
			}
			if d := snap.Device("eth0"); d != nil {
				for _, q := range d.RxQueues {
					if q.RPSCPUs != "" {
						t.Errorf("eth0 %s rps_cpus read (%q): not an input of wlan0's decision", q.Name, q.RPSCPUs)
					}
				}
			}
			for _, q := range snap.IRQs {
				if q.Device != "wlan0" && q.SMPAffinity != "" {
					t.Errorf("IRQ %d (%s, device %q) affinity read", q.Number, q.Name, q.Device)
				}
			}
			for _, th := range snap.NAPIThreads {
				if th.Device != "wlan0" && th.CPUs != "" {
					t.Errorf("thread %s CPUs read", th.Name)
				}
			}
			if snap.RPSSockFlowEntries != -1 {
				t.Errorf("rps_sock_flow_entries read: %d", snap.RPSSockFlowEntries)
			}
		})
	}
}

// deviceApplyFloor is applyFloor for the apply of the netdev dev: the
// machine-wide inputs (CPUs, the netdev listing, proc/interrupts, the
// processes, identity, config) as for a full apply; dev's directory,
// queues listing and driver link, and those of every other netdev when
// others (the decision depends on them); and dev's knobs only.
func deviceApplyFloor(t *testing.T, root string, snap *platform.Snapshot, p *plan.Plan, dev string, others bool) (int, map[string]int) {
	t.Helper()
	return floorCost(floorReads(t, root, snap, p, dev, others))
}

// TestDeviceApplyNearFloor counts the file system calls of an in-sync
// `apply --device` of ipq807x's netdevs (eth0 with its four queues,
// threads and IRQs; wlan0, a wifi netdev whose decision follows the
// ethernet's; lan1, a DSA user port the stock rule skips) in modes auto
// and off, and holds each within twice its floor (deviceApplyFloor).
func TestDeviceApplyNearFloor(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []plan.Mode{plan.ModeAuto, plan.ModeOff} {
		root := deviceTestRoot(t, "ipq807x", mode)
		for _, dev := range []string{"eth0", "wlan0", "lan1"} {
			t.Run(string(mode)+"/"+dev, func(t *testing.T) {
				var count kfs.Counts
				e := NewEngine(root, WithPlatformReader(platform.NewCountingReader(&count)))
				if _, err := e.Apply(ctx, ApplyRequest{Reason: "sync"}); err != nil {
					t.Fatalf("full apply: %v", err)
				}
				count = kfs.Counts{}
				res, err := e.Apply(ctx, ApplyRequest{Reason: "hotplug", Device: dev})
				if err != nil {
					t.Fatalf("apply --device %s: %v", dev, err)
				}
				if len(res.Changed) != 0 || len(res.Failed) != 0 {
					t.Fatalf("not in sync: changed %v, failed %v", res.Changed, res.Failed)
				}
				got := count.Total()
				calls := count.String()
				full, p, err := e.Plan(ctx, plan.PlanRequest{})
				if err != nil {
					t.Fatal(err)
				}
				others := mode != plan.ModeOff
				floor, parts := deviceApplyFloor(t, root, full, p, dev, others)
				whole, _ := applyFloor(t, root, full, p)
				t.Logf("ipq807x %s apply --device %s: floor %d %v (whole machine's floor %d); apply %d (%s): %.2fx the floor",
					mode, dev, floor, parts, whole, got, calls, float64(got)/float64(floor))
				if got > int64(2*floor) {
					t.Errorf("apply --device %s makes %d file system calls, more than twice its floor of %d", dev, got, floor)
				}
				if !strings.Contains(calls, "openat") {
					t.Errorf("no openat counted (%s): the counting reader was not used", calls)
				}
			})
		}
	}
}
