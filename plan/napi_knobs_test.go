package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/platform"
)

// napiMachine is a 4-CPU machine with eth0 (4 rx queues, netlink queue
// map rx-i -> NAPI 8193+i, as virtio_net on 7.2) and veth0 (2 rx queues,
// NAPIs 20 and 21 without a queue map, as veth with GRO), as netlink
// would show them on the given kernel: "6.12" (no napi-set, no config),
// "6.13" (napi-set, defer-hard-irqs and gro-flush-timeout), "6.17" (and
// threaded), "" (no netlink map: a fixture).
func napiMachine(kernel string) *machine {
	m := newMachine(4).eth("eth0", "sys/devices/pci0000:00/0000:00:03.0/virtio0", "virtio_net", 4, 4)
	m.dev("veth0", platform.KindVirtual, "", "", 2, 2)
	m.s.Devices[0].Ifindex, m.s.Devices[1].Ifindex = 2, 3
	if kernel == "" {
		return m
	}
	nl := &platform.NetlinkInfo{Status: "ok", Ops: []string{"queue-get", "napi-get", "qstats-get"}}
	if kernel != "6.12" {
		nl.Ops = append(nl.Ops, "napi-set")
	}
	add := func(id, ifindex int, dev string) {
		n := platform.NAPI{ID: id, Ifindex: ifindex, Device: dev, IRQ: -1}
		if kernel != "6.12" {
			d, g := uint32(0), uint64(0)
			n.DeferHardIRQs, n.GROFlushTimeoutNS = &d, &g
		}
		if kernel == "6.17" {
			th := uint32(0)
			n.Threaded = &th
		}
		nl.NAPIs = append(nl.NAPIs, n)
	}
	for i := 0; i < 4; i++ {
		m.s.Devices[0].RxQueues[i].NAPIID = 8193 + i
		add(8193+i, 2, "eth0")
	}
	add(20, 3, "veth0")
	add(21, 3, "veth0")
	m.s.Netlink = nl
	return m
}

// napiLines renders the plan's per-NAPI actions.
func napiLines(p *Plan) []string {
	var out []string
	for _, a := range p.Actions {
		if IsNAPIKnob(a.Kind) {
			out = append(out, string(a.Kind)+" "+a.Target()+" "+a.Current+" -> "+a.Value)
		}
	}
	return out
}

func TestNAPIKnobOverrides(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kernel string
		mode   Mode
		dev    platform.DeviceOverride
		want   []string
		hints  []string // hint id: a word its text must hold
	}{{
		name: "device options on 6.13", kernel: "6.13",
		dev: platform.DeviceOverride{Name: "eth0", DeferHardIRQs: "2", GROFlushTimeout: "20000"},
		want: []string{
			"napi_defer_hard_irqs eth0 napi 8193 (rx-0) 0 -> 2", "napi_gro_flush_timeout eth0 napi 8193 (rx-0) 0 -> 20000",
			"napi_defer_hard_irqs eth0 napi 8194 (rx-1) 0 -> 2", "napi_gro_flush_timeout eth0 napi 8194 (rx-1) 0 -> 20000",
			"napi_defer_hard_irqs eth0 napi 8195 (rx-2) 0 -> 2", "napi_gro_flush_timeout eth0 napi 8195 (rx-2) 0 -> 20000",
			"napi_defer_hard_irqs eth0 napi 8196 (rx-3) 0 -> 2", "napi_gro_flush_timeout eth0 napi 8196 (rx-3) 0 -> 20000",
		},
	}, {
		name: "per queue and per id win over the device option", kernel: "6.13",
		dev: platform.DeviceOverride{Name: "eth0", DeferHardIRQs: "2", QueueNAPI: map[string]platform.NAPIOverride{
			"rx-1": {DeferHardIRQs: "0", GROFlushTimeout: "200000"}, "napi-8196": {DeferHardIRQs: "1"}}},
		want: []string{
			"napi_defer_hard_irqs eth0 napi 8193 (rx-0) 0 -> 2",
			"napi_defer_hard_irqs eth0 napi 8194 (rx-1) 0 -> 0", "napi_gro_flush_timeout eth0 napi 8194 (rx-1) 0 -> 200000",
			"napi_defer_hard_irqs eth0 napi 8195 (rx-2) 0 -> 2",
			"napi_defer_hard_irqs eth0 napi 8196 (rx-3) 0 -> 1",
		},
	}, {
		name: "veth: queues by NAPI id order", kernel: "6.13",
		dev:  platform.DeviceOverride{Name: "veth0", QueueNAPI: map[string]platform.NAPIOverride{"rx-1": {GROFlushTimeout: "20000"}}},
		want: []string{"napi_gro_flush_timeout veth0 napi 21 (rx-1) 0 -> 20000"},
	}, {
		name: "threaded per NAPI on 6.17", kernel: "6.17",
		dev:  platform.DeviceOverride{Name: "eth0", QueueNAPI: map[string]platform.NAPIOverride{"rx-0": {Threaded: "1"}, "rx-2": {Threaded: "1"}}},
		want: []string{"napi_threaded eth0 napi 8193 (rx-0) 0 -> 1", "napi_threaded eth0 napi 8195 (rx-2) 0 -> 1"},
	}, {
		name: "threaded on 6.13: not supported, the rest applies", kernel: "6.13",
		dev:   platform.DeviceOverride{Name: "veth0", NAPIThreaded: "1", DeferHardIRQs: "2"},
		want:  []string{"napi_defer_hard_irqs veth0 napi 20 (rx-0) 0 -> 2", "napi_defer_hard_irqs veth0 napi 21 (rx-1) 0 -> 2"},
		hints: []string{HintNAPIKnobsUnsupported + ": per-NAPI threaded needs Linux 6.17"},
	}, {
		name: "6.12: no napi-set, nothing planned", kernel: "6.12",
		dev:   platform.DeviceOverride{Name: "eth0", DeferHardIRQs: "2", GROFlushTimeout: "20000"},
		hints: []string{HintNAPIKnobsUnsupported + ": not supported by this kernel: netlink napi-set needs Linux 6.13"},
	}, {
		name: "no netlink map", kernel: "",
		dev:   platform.DeviceOverride{Name: "eth0", GROFlushTimeout: "20000"},
		hints: []string{HintNAPIKnobsUnsupported + ": no netlink map"},
	}, {
		name: "bad values and unknown queues", kernel: "6.17",
		dev: platform.DeviceOverride{Name: "eth0", DeferHardIRQs: "-1", GROFlushTimeout: "1000000001", NAPIThreaded: "2",
			QueueNAPI: map[string]platform.NAPIOverride{"rx-9": {DeferHardIRQs: "1"}, "rx-0": {GROFlushTimeout: "x"}, "rx-3": {DeferHardIRQs: "2147483647"}}},
		want: []string{"napi_defer_hard_irqs eth0 napi 8196 (rx-3) 0 -> 2147483647"},
		hints: []string{HintOverrideInvalid + ": defer_hard_irqs '-1'", HintOverrideInvalid + ": gro_flush_timeout '1000000001'",
			HintOverrideInvalid + ": napi_threaded '2'", HintOverrideInvalid + ": no NAPI instance rx-9",
			HintOverrideInvalid + ": queue_gro_flush_timeout 'rx-0=x'"},
	}, {
		name: "auto mode leaves them alone", kernel: "6.17", mode: ModeAuto,
		dev: platform.DeviceOverride{Name: "eth0", DeferHardIRQs: "2", NAPIThreaded: "1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := withOverrides(napiMachine(tc.kernel), "custom", tc.dev)
			p := mustPlan(t, m.snap(), tc.mode)
			sameLines(t, "per-NAPI actions", napiLines(p), tc.want)
			for _, h := range tc.hints {
				id, word, _ := strings.Cut(h, ": ")
				if !slices.ContainsFunc(p.Hints, func(x Hint) bool { return x.ID == id && strings.Contains(x.Text, word) }) {
					t.Errorf("no hint %s with %q in %+v", id, word, p.Hints)
				}
			}
			if len(tc.hints) == 0 && (hasHint(p, HintNAPIKnobsUnsupported) || hasHint(p, HintOverrideInvalid)) {
				t.Errorf("unexpected hints %+v", p.Hints)
			}
		})
	}
}

func TestNAPIKnobHolds(t *testing.T) {
	m := withOverrides(napiMachine("6.13"), "custom", platform.DeviceOverride{Name: "veth0", DeferHardIRQs: "0", GROFlushTimeout: "020000"})
	p := mustPlan(t, m.snap(), "")
	for _, a := range p.Actions {
		if !IsNAPIKnob(a.Kind) {
			continue
		}
		if want := a.Kind == KindNAPIDeferHardIRQs; a.Holds() != want {
			t.Errorf("%s %s: holds %v (current %s, value %s)", a.Kind, a.Target(), a.Holds(), a.Current, a.Value)
		}
		if a.Kind == KindNAPIGROFlushTimeout && a.Value != "20000" {
			t.Errorf("value %q not in the kernel's form", a.Value)
		}
	}
}

func TestDeviceNAPIsPairing(t *testing.T) {
	// eth0's queues name no NAPI, but threads of the NAPIs pair them:
	// the thread's pairing says which.
	m := napiMachine("6.13")
	for i := range m.s.Devices[0].RxQueues {
		m.s.Devices[0].RxQueues[i].NAPIID = 0
	}
	for i := 0; i < 4; i++ {
		m.thread(400+i, "napi/eth0-"+[]string{"8196", "8195", "8194", "8193"}[i])
	}
	s := m.snap()
	got := DeviceNAPIs(s, PairQueues(s), s.Device("eth0"))
	if len(got) != 4 {
		t.Fatalf("%d NAPIs", len(got))
	}
	for i, n := range got {
		if n.NAPI.ID != 8193+i || n.Queue != s.Devices[0].RxQueues[i].Name || n.Source != platform.SourceNAPIOrder {
			t.Errorf("NAPI %d: %+v", i, n)
		}
	}
}

func TestPairingWithSoftirqNAPIs(t *testing.T) {
	// veth0's rx-0 NAPI (20) went back to softirq (per-NAPI threaded 0):
	// only the thread of NAPI 21 is left, and it serves rx-1, not rx-0.
	m := napiMachine("6.17")
	m.thread(500, "napi/veth0-21")
	s := m.snap()
	dp := PairQueues(s).Device("veth0")
	if dp.Rx[0].Thread != nil || dp.Rx[1].Thread == nil || dp.Rx[1].Thread.PID != 500 || dp.Rx[1].ThreadSource != platform.SourceNAPIOrder {
		t.Errorf("rx-0 %+v, rx-1 %+v", dp.Rx[0].Thread, dp.Rx[1].Thread)
	}
	// Without the netlink map the inference stands (the thread's own order).
	s.Netlink = nil
	if dp := PairQueues(s).Device("veth0"); dp.Rx[0].Thread == nil || dp.Rx[0].Thread.PID != 500 {
		t.Errorf("without netlink: rx-0 %+v", dp.Rx[0].Thread)
	}
}

func TestPairingTxAfterThreadRecreated(t *testing.T) {
	// virtio_net on 7.2 after rx-3's NAPI left its thread and came back
	// (per-NAPI threaded 0, then release: 1): rx-3's thread has a new,
	// higher PID; the tx threads still pair by the direction the other
	// rx threads' PIDs run (measured in the sid guest: 138, 136, 134,
	// then 282; tx threads 137, 135, 133, 131).
	m := newMachine(4).eth("eth0", "sys/devices/pci0000:00/0000:00:03.0/virtio0", "virtio_net", 4, 4)
	for i, pid := range []int{138, 136, 134, 282} {
		m.thread(pid, fmt.Sprintf("napi/eth0-%d", 8193+i))
	}
	for _, pid := range []int{137, 135, 133, 131} {
		m.thread(pid, "napi/eth0-0")
	}
	for i := range m.s.NAPIThreads {
		if m.s.NAPIThreads[i].NAPIID == 0 {
			m.s.NAPIThreads[i].Direction = platform.DirTX
		}
	}
	dp := PairQueues(m.snap()).Device("eth0")
	for i, want := range []int{137, 135, 133, 131} {
		if got := dp.Tx[i].Thread; got == nil || got.PID != want {
			t.Errorf("tx-%d paired with %+v, want pid %d", i, got, want)
		}
	}
}
