package plan

import (
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/platform"
)

// withWifiRings adds the ath11k ring IRQs of an ipq807x (not tied to a netdev).
func withWifiRings(m *machine) *machine {
	for i, name := range []string{"reo2host-destination-ring1", "reo2host-destination-ring2", "reo2host-destination-ring3",
		"reo2host-destination-ring4", "wbm2host-tx-completions-ring1", "ppdu-end-interrupts-mac3"} {
		m.irq(80+i, name, "", -1)
	}
	return m
}

func TestOtherWriters(t *testing.T) {
	smp := func(enabled, taken, off bool) platform.OtherWriter {
		return platform.OtherWriter{Name: platform.WriterSMPAffinity, Path: "etc/init.d/smp_affinity",
			Enabled: enabled, TakenOver: taken, WasEnabled: taken, ConfigOff: off}
	}
	tests := []struct {
		name    string
		setup   func(m *machine)
		mode    Mode
		state   string
		has     []string // plan lines that must be there
		hasNot  []string // plan lines that must not
		deferIR []int    // IRQs the status names as left to it
		deferTh []int    // NAPI thread PIDs the status names as left to it
		text    string   // a part of the status text
	}{
		{"ipq807x smp_affinity taken over: wifi rings placed as it did", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{smp(false, true, false)}
		}, ModeAuto, WriterTakenOver,
			[]string{"irq_affinity irq 80 reo2host-destination-ring1 1", "irq_affinity irq 83 reo2host-destination-ring4 8",
				"irq_affinity irq 84 wbm2host-tx-completions-ring1 2", "irq_affinity irq 85 ppdu-end-interrupts-mac3 8",
				"irq_affinity irq 60 edma_rxdesc_0 1", "napi_affinity pid 300 napi/eth0-257 0"}, nil, nil, nil, "places what it placed"},
		{"ipq807x smp_affinity taken over, legacy: no wifi pins", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{smp(false, true, false)}
		}, ModeLegacy, WriterTakenOver, nil, []string{"irq_affinity irq 80 reo2host-destination-ring1 1"}, nil, nil, ""},
		{"ipq807x smp_affinity enabled: its IRQs and eth0 threads left to it", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{smp(true, false, false)}
		}, ModeAuto, WriterDeferred, []string{"rps_cpus eth0/rx-0 0"},
			[]string{"irq_affinity irq 60 edma_rxdesc_0 1", "napi_affinity pid 300 napi/eth0-257 0", "irq_affinity irq 80 reo2host-destination-ring1 1"},
			[]int{60, 61, 62, 63}, []int{300, 301, 302, 303}, "Restarting packet-steering takes it over"},
		{"smp_affinity switched off in its config", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{smp(true, false, true)}
		}, ModeAuto, WriterInactive, []string{"irq_affinity irq 60 edma_rxdesc_0 1"}, nil, nil, nil, ""},
		{"ipq60xx smp_affinity enabled: its EDMA IRQs and eth0 threads left to it", func(m *machine) {
			// The script with PR #24203's pinning: edma_rxdesc/edma_txcmpl
			// and eth0's RX and TX NAPI threads.
			m.target("qualcommax/ipq60xx")
			m.s.Writers = []platform.OtherWriter{smp(true, false, false)}
		}, ModeAuto, WriterDeferred, nil, []string{"irq_affinity irq 60 edma_rxdesc_0 1", "irq_affinity irq 80 reo2host-destination-ring1 1",
			"napi_affinity pid 300 "}, []int{60, 61, 62, 63}, []int{300, 301, 302, 303}, "eth0 NAPI threads"},
		{"netifd's service taken over on bcm53xx: the hook is the profile", func(m *machine) {
			m.target("bcm53xx/generic")
			m.s.Writers = []platform.OtherWriter{{Name: platform.WriterNetifd, TakenOver: true, Hook: "usr/libexec/platform/packet-steering.sh"}}
		}, ModeAuto, WriterTakenOver, nil, nil, nil, nil, "profile for this target reproduces that hook"},
		{"netifd's service taken over with a hook no profile reproduces", func(m *machine) {
			m.target("econet/en751221")
			m.s.Writers = []platform.OtherWriter{{Name: platform.WriterNetifd, TakenOver: true, WasEnabled: true, Hook: "usr/libexec/platform/packet-steering.sh"}}
		}, ModeLegacy, WriterTakenOver, nil, nil, nil, nil, "runs /usr/libexec/platform/packet-steering.sh in place of its own rule; no profile reproduces that hook"},
		{"netifd's service enabled with a hook: conflict names the hook", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{{Name: platform.WriterNetifd, Enabled: true, Hook: "usr/libexec/platform/packet-steering.sh"}}
		}, ModeAuto, WriterConflict, nil, nil, nil, nil, "in place of its own rule"},
		{"rockchip hotplug: the IRQ named eth0 left to it", func(m *machine) {
			// An rx queue IRQ the plan would pin, named as the hotplug
			// script finds it ("eth0$" in /proc/interrupts).
			m.s.IRQs[0].Name = "eth0"
			m.s.Writers = []platform.OtherWriter{{Name: platform.WriterRockchipIRQs, Enabled: true}}
		}, ModeAuto, WriterDeferred, []string{"irq_affinity irq 61 edma_rxdesc_1 2"}, []string{"irq_affinity irq 60 "}, []int{60}, nil, ""},
		{"irqbalance with banirq: banned IRQs pinned", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{{Name: platform.WriterIRQBalance, Running: true, Enabled: true, BanIRQs: []int{60, 61, 62, 63}}}
		}, ModeAuto, WriterDeferred, []string{"irq_affinity irq 60 edma_rxdesc_0 1", "irq_affinity irq 63 edma_rxdesc_3 8"}, nil, nil, nil, ""},
		{"irqbalance, two IRQs banned: the others left to it", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{{Name: platform.WriterIRQBalance, Running: true, BanIRQs: []int{60, 61}}}
		}, ModeAuto, WriterDeferred, []string{"irq_affinity irq 61 edma_rxdesc_1 2"}, []string{"irq_affinity irq 62 edma_rxdesc_2 4"}, []int{62, 63}, nil, ""},
		{"irqbalance installed, not running", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{{Name: platform.WriterIRQBalance, Enabled: true, ConfigOff: true}}
		}, ModeAuto, WriterInactive, []string{"irq_affinity irq 60 edma_rxdesc_0 1"}, nil, nil, nil, ""},
		{"netifd's service enabled: conflict", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{{Name: platform.WriterNetifd, Enabled: true}}
		}, ModeAuto, WriterConflict, []string{"irq_affinity irq 60 edma_rxdesc_0 1"}, nil, nil, nil, ""},
		{"netifd's service disabled by packet-steering", func(m *machine) {
			m.s.Writers = []platform.OtherWriter{{Name: platform.WriterNetifd, TakenOver: true}}
		}, ModeAuto, WriterTakenOver, nil, nil, nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := withWifiRings(ipq807x())
			tt.setup(m)
			p := mustPlan(t, m.snap(), tt.mode)
			if len(p.Writers) != 1 {
				t.Fatalf("writers %+v, want one", p.Writers)
			}
			w := p.Writers[0]
			if w.State != tt.state || w.Text == "" {
				t.Errorf("state %q (%q), want %q", w.State, w.Text, tt.state)
			}
			if tt.deferIR != nil && !equalInts(w.IRQs, tt.deferIR) {
				t.Errorf("IRQs left to it %v, want %v", w.IRQs, tt.deferIR)
			}
			if tt.deferTh != nil && !equalInts(w.Threads, tt.deferTh) {
				t.Errorf("threads left to it %v, want %v", w.Threads, tt.deferTh)
			}
			if !strings.Contains(w.Text, tt.text) || strings.Contains(w.Text, "  ") {
				t.Errorf("text %q, want it to say %q (and no double space)", w.Text, tt.text)
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

func TestWifiRingEvidence(t *testing.T) {
	m := withWifiRings(ipq807x())
	m.s.Writers = []platform.OtherWriter{{Name: platform.WriterSMPAffinity, TakenOver: true}}
	p := mustPlan(t, m.snap(), ModeAuto)
	if !strings.Contains(p.Evidence, "smp_affinity") {
		t.Errorf("evidence %q does not cite the smp_affinity script", p.Evidence)
	}
	// Without the wifi IRQs nothing is added to the evidence.
	m = ipq807x()
	m.s.Writers = []platform.OtherWriter{{Name: platform.WriterSMPAffinity, TakenOver: true}}
	if p := mustPlan(t, m.snap(), ModeAuto); strings.Contains(p.Evidence, "smp_affinity") {
		t.Errorf("evidence %q cites smp_affinity without wifi IRQs", p.Evidence)
	}
}

func TestWriterIRQMatch(t *testing.T) {
	for _, tt := range []struct {
		name          string
		smp, rockchip bool
	}{
		{"edma_rxdesc_0", true, false}, {"edma_txcmpl", true, false}, {"reo2host-destination-ring3", true, false},
		{"ce4", true, false}, {"ce", false, false}, {"cell0", false, false}, {"rxdesc_21", true, false},
		{"txcmpl_8", true, false}, {"misc", true, false}, {"xhci-hcd:usb1", true, true},
		{"eth0", false, true}, {"eth2", false, true}, {"eth3", false, false}, {"eth0-TxRx-0", false, false},
	} {
		if got := smpAffinityIRQ(tt.name); got != tt.smp {
			t.Errorf("smpAffinityIRQ(%q) = %v", tt.name, got)
		}
		if got := rockchipIRQ(tt.name); got != tt.rockchip {
			t.Errorf("rockchipIRQ(%q) = %v", tt.name, got)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
