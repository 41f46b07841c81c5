package plan

import (
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// The rockchip hook 40-net-smp-affinity on the rockchip presets (each
// fixture root has it, as the target's images do): taken over where the
// plan pins its IRQs on cores at least as big, left alone elsewhere.
func TestRockchipHook(t *testing.T) {
	tests := []struct {
		name   string
		preset string
		setup  func(s *platform.Snapshot)
		mode   Mode
		state  string
		pinned []int    // IRQs taken over (Pinned)
		left   []int    // IRQs left to it (IRQs)
		has    []string // plan lines that must be there
		hasNot []string // plan lines (prefixes) that must not
		text   string
	}{
		{"r4s auto: eth0/eth1 IRQs on the A72 cores as the hook does", "r4s", nil, ModeAuto, WriterTakenOver,
			[]int{24, 88}, nil, []string{"irq_affinity irq 24 eth0 10", "irq_affinity irq 88 eth1 20", "rps_cpus eth0/rx-0 20"}, nil,
			"pins irq 24 eth0 to CPU4, irq 88 eth1 to CPU5 on friendlyarm,nanopi-r4s"},
		{"r4s custom", "r4s", nil, ModeCustom, WriterTakenOver, []int{24, 88}, nil,
			[]string{"irq_affinity irq 24 eth0 10", "irq_affinity irq 88 eth1 20"}, nil, "runs the hook again"},
		{"r4s before the hook ran (IRQs on every CPU): auto picks the A72 cores itself", "r4s", func(s *platform.Snapshot) {
			for i := range s.IRQs {
				s.IRQs[i].SMPAffinity, s.IRQs[i].Effective = "3f", "0"
			}
		}, ModeAuto, WriterTakenOver, []int{24, 88}, nil, nil, nil, "cores as big or bigger"},
		{"r4s legacy: the stock rule places no IRQs, the hook's stay", "r4s", nil, ModeLegacy, WriterDeferred,
			nil, []int{24, 88}, []string{"rps_cpus eth0/rx-0 1"}, []string{"irq_affinity "}, "mode legacy places no IRQs"},
		{"r6s auto: the hook finds only eth2 (r8125's vectors are eth0-0..3), placed on an A76", "r6s", nil, ModeAuto, WriterTakenOver,
			[]int{80}, nil, []string{"irq_affinity irq 80 eth2 20", "irq_affinity irq 130 eth0-0 10"}, nil, "irq 80 eth2 to CPU6"},
		{"r6s with r8169 (one IRQ per NIC, named ethN): all three taken over", "r6s", func(s *platform.Snapshot) {
			var keep []platform.IRQ
			for _, q := range s.IRQs {
				switch q.Name {
				case "eth0-0", "eth1-0":
					q.Name, q.Queue = q.Name[:4], -1
					keep = append(keep, q)
				case "eth2":
					keep = append(keep, q)
				}
			}
			s.IRQs = keep
		}, ModeAuto, WriterTakenOver, []int{80, 130, 134}, nil, nil, nil, "irq 130 eth0 to CPU4"},
		{"r6s-skew auto", "r6s-skew", nil, ModeAuto, WriterTakenOver, []int{80}, nil, nil, nil, "placement stands"},
		{"r2s auto: equal cores, no IRQ rule: left to the hook", "r2s", nil, ModeAuto, WriterDeferred,
			nil, []int{24, 25}, []string{"rps_cpus pppoe-wan/rx-0 c", "rps_cpus eth1/rx-0 8"}, []string{"irq_affinity "},
			"its cores are equal, and the plan pins NIC IRQs only to tell big cores from little ones: nothing measured says its one NIC per CPU is worse, so those IRQs are left to it, and RPS is planned off the CPUs it gives them: eth1 rx-0 from CPU2 to CPU3."},
		{"r2s legacy: the stock rule's RPS as the stock script writes it", "r2s", nil, ModeLegacy, WriterDeferred,
			nil, []int{24, 25}, []string{"rps_cpus eth1/rx-0 4"}, []string{"irq_affinity "}, "mode legacy places no IRQs, so those IRQs are left to it."},
		{"r2s after the hook ran (xhci IRQ on CPU2): left to it, eth1's RPS planned off that CPU", "r2s", func(s *platform.Snapshot) {
			hookRan(s, map[int]string{24: "1", 25: "2"})
		}, ModeAuto, WriterDeferred, nil, []int{24, 25}, []string{"rps_cpus eth0/rx-0 1"}, []string{"irq_affinity ", "rps_cpus eth1/rx-0 4\n"}, "its cores are equal"},
		{"r5s after the hook ran: each NIC's RPS off its IRQ's CPU", "r5s", func(s *platform.Snapshot) {
			hookRan(s, map[int]string{45: "1", 97: "2", 98: "3"})
		}, ModeAuto, WriterDeferred, nil, []int{45, 97, 98}, nil, []string{"irq_affinity ", "rps_cpus eth0/rx-0 2\n", "rps_cpus eth1/rx-0 4\n", "rps_cpus eth2/rx-0 8\n"}, ""},
		{"r5s auto: equal cores", "r5s", nil, ModeAuto, WriterDeferred, nil, []int{45, 97, 98}, nil, []string{"irq_affinity "},
			"irq 98 eth2 to CPU3"},
		{"a big.LITTLE board the hook pins to little cores (armsom,sige7 masks 2 and 4): auto's big cores are better", "r4s",
			func(s *platform.Snapshot) { s.Identity.Board = "armsom,sige7" }, ModeAuto, WriterTakenOver, []int{24, 88}, nil,
			[]string{"irq_affinity irq 24 eth0 10"}, nil, "irq 24 eth0 to CPU1"},
		{"a board the hook has no case for: its usual IRQ names left to it", "r4s",
			func(s *platform.Snapshot) { s.Identity.Board = "friendlyarm,nanopi-r76s" }, ModeAuto, WriterDeferred, nil, []int{24, 88},
			nil, []string{"irq_affinity "}, "no case for board"},
		{"none of the hook's IRQs on the machine: it writes nothing", "r4s", func(s *platform.Snapshot) {
			for i := range s.IRQs {
				s.IRQs[i].Name = "lan" + s.IRQs[i].Name
				s.IRQs[i].Name = strings.TrimSuffix(s.IRQs[i].Name, "0") + "x"
			}
		}, ModeAuto, WriterInactive, nil, nil, nil, nil, "writes nothing"},
		{"eth0's IRQ refused by the kernel: the rest is taken over", "r4s", func(s *platform.Snapshot) {
			s.IRQs[0].Refused = "write proc/irq/24/smp_affinity: invalid argument"
		}, ModeAuto, WriterTakenOver, []int{88}, nil, []string{"irq_affinity irq 88 eth1 20"}, []string{"irq_affinity irq 24 "}, ""},
		{"every IRQ of the hook refused: it writes nothing that sticks", "r4s", func(s *platform.Snapshot) {
			for i := range s.IRQs {
				s.IRQs[i].Refused = "invalid argument"
			}
		}, ModeAuto, WriterInactive, nil, nil, nil, []string{"irq_affinity "}, "refuses every one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := copySnap(presetSnapshot(t, tt.preset))
			if tt.setup != nil {
				tt.setup(s)
			}
			p := mustPlan(t, s, tt.mode)
			var w *WriterStatus
			for i := range p.Writers {
				if p.Writers[i].Name == platform.WriterRockchipIRQs {
					w = &p.Writers[i]
				}
			}
			if w == nil {
				t.Fatalf("no %s writer in %+v", platform.WriterRockchipIRQs, p.Writers)
			}
			if w.State != tt.state || !strings.Contains(w.Text, tt.text) || strings.Contains(w.Text, "  ") {
				t.Errorf("state %q text %q, want %q saying %q", w.State, w.Text, tt.state, tt.text)
			}
			if !equalInts(w.Pinned, tt.pinned) || !equalInts(w.IRQs, tt.left) {
				t.Errorf("pinned %v left %v, want %v %v", w.Pinned, w.IRQs, tt.pinned, tt.left)
			}
			got := "\n" + strings.Join(render(p.Actions), "\n") + "\n"
			for _, l := range tt.has {
				if !strings.Contains(got, "\n"+l+"\n") {
					t.Errorf("plan lacks %q:%s", l, got)
				}
			}
			for _, l := range tt.hasNot {
				if strings.Contains(got, "\n"+l) {
					t.Errorf("plan has %q:%s", l, got)
				}
			}
		})
	}
}

// hookRan sets the IRQs as the hook leaves them: IRQ number ->
// effective_affinity_list (one CPU), smp_affinity its mask.
func hookRan(s *platform.Snapshot, cpus map[int]string) {
	for i := range s.IRQs {
		if c, ok := cpus[s.IRQs[i].Number]; ok {
			set, _ := cpuset.ParseList(c)
			s.IRQs[i].SMPAffinity, s.IRQs[i].Effective = set.Mask(), c
		}
	}
}

// The hook's matching: grep -E "DEV$" on /proc/interrupts rows.
func TestRockchipHookMatch(t *testing.T) {
	for _, tt := range []struct {
		pin  rockchipHookPin
		name string
		want bool
	}{
		{rockchipHookPin{dev: "eth0"}, "eth0", true},
		{rockchipHookPin{dev: "eth0"}, "eth0-0", false},
		{rockchipHookPin{dev: "eth1"}, "eth1:wol", false},
		{rockchipHookPin{dev: "eth1", xhci: true}, "xhci-hcd:usb1", true},
		{rockchipHookPin{dev: "eth1", xhci: true}, "xhci-hcd:usb", false},
		{rockchipHookPin{dev: "eth1", xhci: true}, "eth1", false},
		{rockchipHookPin{dev: "eth1", xhci: true}, "ehci_hcd:usb3", false},
	} {
		if got := tt.pin.matches(tt.name); got != tt.want {
			t.Errorf("%+v matches %q = %v, want %v", tt.pin, tt.name, got, tt.want)
		}
	}
	// Every case of the script has its masks parseable and one write per device.
	for _, b := range []string{"friendlyarm,nanopi-r2s", "friendlyarm,nanopi-r4s", "friendlyarm,nanopi-r5s", "friendlyarm,nanopi-r6s", "radxa,e25"} {
		pins, ok := rockchipHookPins(b)
		if !ok || len(pins) < 2 {
			t.Errorf("%s: %v %v", b, pins, ok)
		}
	}
	if _, ok := rockchipHookPins("friendlyelec,nanopi-r6s"); ok {
		t.Errorf("FriendlyWrt's board name is not among OpenWrt's cases")
	}
}

// hookWrites returns a copy of s as the hook leaves it after an event:
// its masks written to the IRQs it finds.
func hookWrites(s *platform.Snapshot) *platform.Snapshot {
	c := *s
	c.IRQs = append([]platform.IRQ(nil), s.IRQs...)
	hook, _ := rockchipHookIRQs(&c)
	for _, h := range hook {
		for i := range c.IRQs {
			if c.IRQs[i].Number == h.irq.Number {
				c.IRQs[i].SMPAffinity, c.IRQs[i].Effective = h.cpus.KernelMask(len(s.CPUs)), h.cpus.List()
			}
		}
	}
	return &c
}

// Events in a row (apply, the hook, the apply after it, ...): on every
// rockchip preset the apply after the hook settles (it writes nothing
// after the second event: no tug of war with the hook), except where the
// plan moves the hook's IRQs to bigger cores, where each apply after the
// hook puts them back on the plan's CPUs.
func TestRockchipHookEvents(t *testing.T) {
	for _, tt := range []struct {
		preset, board string
		fights        []string // IRQ targets the apply rewrites after every hook run
	}{
		{"r2s", "", nil},
		{"r4s", "", nil},
		{"r5s", "", nil},
		{"r6s", "", nil},
		{"r6s-skew", "", nil},
		{"r4s", "armsom,sige7", []string{"irq 24 eth0", "irq 88 eth1"}},
	} {
		t.Run(tt.preset+" "+tt.board, func(t *testing.T) {
			s := copySnap(presetSnapshot(t, tt.preset))
			if tt.board != "" {
				s.Identity.Board = tt.board
			}
			for _, mode := range []Mode{ModeAuto, ModeLegacy} {
				state := s
				var last *Plan
				for event := 0; event < 3; event++ {
					last = mustPlan(t, state, mode)
					state = hookWrites(applyToSnapshot(state, last))
				}
				again := mustPlan(t, state, mode)
				var fights []string
				for _, a := range again.Actions {
					if !a.Holds() {
						fights = append(fights, a.Target())
					}
				}
				want := tt.fights
				if mode == ModeLegacy {
					want = nil // the stock rule places no IRQs
				}
				if strings.Join(fights, ",") != strings.Join(want, ",") {
					t.Errorf("%s: after the hook the apply rewrites %v, want %v", mode, fights, want)
				}
			}
		})
	}
}
