package plan

import (
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

func TestHints(t *testing.T) {
	tests := []struct {
		name  string
		setup func(m *machine)
		mode  Mode
		flows int
		want  []string // exact hint IDs in order
	}{
		{"quiet router", func(m *machine) { m.offload("1", "0") }, ModeAuto, 0, nil},
		{"dsa user port with live RPS", func(m *machine) {
			m.offload("1", "0")
			m.s.Devices[1].RxQueues[0].RPSCPUs = "2" // lan1
		}, ModeAuto, 0, []string{HintDSAUserRPS}},
		{"dsa user port with custom RPS", func(m *machine) {
			m.offload("1", "0")
			m.s.Config.Steering = &platform.SteeringConfig{Devices: []platform.DeviceOverride{{Name: "wan", RPSCPUs: "8"}}}
		}, ModeCustom, 0, []string{HintDSAUserRPS}},
		{"flows on a router", func(m *machine) { m.offload("1", "0") }, ModeAuto, 64, []string{HintFlowsForwarding}},
		{"irqbalance fights irq pins", func(m *machine) {
			m.offload("1", "0")
			m.s.Processes = []string{"irqbalance"}
		}, ModeAuto, 0, []string{HintIRQBalance}},
		{"hardware offload with RPS", func(m *machine) { m.offload("1", "1") }, ModeLegacy, 0, []string{HintHWOffload}},
		{"hardware offload, RPS off", func(m *machine) { m.offload("1", "1") }, ModeOff, 0, nil},
		{"ipq807x without offload", func(m *machine) {}, ModeAuto, 0, []string{HintSWOffloadHelps}},
		{"config error", func(m *machine) {
			m.offload("1", "0")
			m.s.Config.Errors = []platform.Gap{{Path: "etc/config/network", Error: "bad"}}
		}, ModeAuto, 0, []string{HintConfigError}},
		{"unknown board", func(m *machine) {
			m.offload("1", "0")
			m.s.Identity = platform.Identity{Target: "sunxi/cortexa53"}
			m.s.Devices[0].RxQueues = m.s.Devices[0].RxQueues[:1]
		}, ModeAuto, 0, []string{HintNoEvidence}},
	}
	for _, tt := range tests {
		m := ipq807x()
		tt.setup(m)
		p := mustPlan(t, m.snap(), tt.mode, tt.flows)
		got := hintIDs(p)
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: hints %v, want %v", tt.name, got, tt.want)
		}
		for _, h := range p.Hints {
			if h.Text == "" {
				t.Errorf("%s: hint %s without text", tt.name, h.ID)
			}
		}
	}
}

func TestIRQBalanceHintText(t *testing.T) {
	m := ipq807x()
	m.s.Processes = []string{"irqbalance"}
	auto := mustPlan(t, m.snap(), ModeAuto)
	legacy := mustPlan(t, m.snap(), ModeLegacy)
	var a, l string
	for _, h := range auto.Hints {
		if h.ID == HintIRQBalance {
			a = h.Text
		}
	}
	for _, h := range legacy.Hints {
		if h.ID == HintIRQBalance {
			l = h.Text
		}
	}
	// auto pins the EDMA ring IRQs 60-63, legacy pins none: with
	// irqbalance running, auto names the IRQs it leaves to it.
	if !strings.Contains(a, "60-63") || !strings.Contains(a, "banirq") || strings.Contains(l, "60-63") {
		t.Errorf("auto %q / legacy %q", a, l)
	}
}

func TestProfileTable(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Profiles() {
		if p.Name == "" || p.Evidence == "" || p.Choice == "" {
			t.Errorf("incomplete row %+v", p)
		}
		if seen[p.Name] {
			t.Errorf("duplicate profile %s", p.Name)
		}
		seen[p.Name] = true
		if (p.Choice == ChoiceFixed) != (len(p.RPS) > 0) {
			t.Errorf("%s: fixed choice and RPS list disagree", p.Name)
		}
		for _, f := range p.RPS {
			if _, err := cpuset.ParseMask(f.Mask); err != nil {
				t.Errorf("%s: %v", p.Name, err)
			}
		}
	}
	for _, want := range []string{"single-cpu", "bcm53xx", "bcm53xx-sw-offload", "bcm53xx-hw-offload", "bcm4908-2cpu",
		"bcm4908-4cpu", "bcm4908-offload", "qualcommax-ipq807x", "ipq40xx", "ramips-mt7621", "mvebu-mochabin"} {
		if !seen[want] {
			t.Errorf("profile %s missing", want)
		}
	}
	// Matching by compatible when the target is unknown, and by CPU count.
	id := platform.Identity{Compatible: []string{"brcm,bcm4906"}}
	if prof, _ := MatchProfile(&platform.Snapshot{Identity: id, CPUs: twoCPUs()}); prof.Name != "bcm4908-2cpu" {
		t.Errorf("bcm4906 by compatible: %s", prof.Name)
	}
	if _, ok := MatchProfile(&platform.Snapshot{Identity: platform.Identity{Target: "bcm53xxx/generic"}, CPUs: twoCPUs()}); ok {
		t.Error("target family matched by prefix of another name")
	}
}

func twoCPUs() []platform.CPU {
	return []platform.CPU{{ID: 0, Online: true}, {ID: 1, Core: 1, Online: true}}
}
