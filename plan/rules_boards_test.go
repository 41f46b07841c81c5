package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// The board rules, one table per rule, on the boards presets and on
// variations of them.

// value is the planned value of the action whose Target() is target, and
// whether the plan has one.
func value(p *Plan, kind ActionKind, target string) (string, bool) {
	for _, a := range p.Actions {
		if a.Kind == kind && a.Target() == target {
			return a.Value, true
		}
	}
	return "", false
}

// cpusOf parses a planned value as a cpu list (threads) or mask.
func cpusOf(t *testing.T, kind ActionKind, v string) cpuset.Set {
	t.Helper()
	var set cpuset.Set
	var err error
	if kind == KindNAPIAffinity {
		set, err = cpuset.ParseList(v)
	} else {
		set, err = cpuset.ParseMask(v)
	}
	if err != nil {
		t.Fatalf("%s value %q: %v", kind, v, err)
	}
	return set
}

// threadCPUs maps the planned threads of the plan (by name) to their CPUs.
func threadCPUs(t *testing.T, p *Plan) map[string]cpuset.Set {
	out := map[string]cpuset.Set{}
	for _, a := range p.Actions {
		if a.Kind == KindNAPIAffinity {
			out[a.Thread] = cpusOf(t, a.Kind, a.Value)
		}
	}
	return out
}

// copySnap copies the parts of a cached snapshot a test changes.
func copySnap(s *platform.Snapshot) *platform.Snapshot {
	c := *s
	c.IRQs = append([]platform.IRQ(nil), s.IRQs...)
	c.NAPIThreads = append([]platform.NAPIThread(nil), s.NAPIThreads...)
	c.Devices = append([]platform.Device(nil), s.Devices...)
	c.Config.PPPoE = append([]platform.PPPoELink(nil), s.Config.PPPoE...)
	return &c
}

func TestRuleMT76(t *testing.T) {
	tests := []struct {
		preset  string
		busiest string   // the thread with the most CPU time
		rx      []string // the phy's rx threads
		tx      []string // tx worker and tx NAPI
	}{
		{"bpi-r4", "napi/phy0-9", []string{"napi/phy0-7", "napi/phy0-8", "napi/phy0-10", "napi/phy0-11", "napi/phy0-12"}, []string{"mt76-tx phy0"}},
		{"mt6000", "napi/phy0-7", []string{"napi/phy0-8", "napi/phy0-9", "napi/phy0-10", "napi/phy0-11"}, []string{"mt76-tx phy0", "napi/phy0-0"}},
		{"mt3000", "napi/phy0-7", []string{"napi/phy0-8", "napi/phy0-10"}, []string{"mt76-tx phy0"}},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s := presetSnapshot(t, tt.preset)
			legacy := threadCPUs(t, mustPlan(t, s, ModeLegacy))
			// The stock rule: every rx thread of the phy on one CPU, the
			// tx worker left alone.
			first := legacy[tt.busiest]
			for _, n := range tt.rx {
				if !legacy[n].Equal(first) || first.Len() != 1 {
					t.Errorf("legacy: %s on %s, %s on %s: want one CPU for all", n, legacy[n], tt.busiest, first)
				}
			}
			if _, ok := legacy["mt76-tx phy0"]; ok {
				t.Errorf("legacy moves the tx worker")
			}
			auto := threadCPUs(t, mustPlan(t, s, ModeAuto))
			b := auto[tt.busiest]
			if b.Len() != 1 {
				t.Fatalf("auto: busiest %s on %s", tt.busiest, b)
			}
			used := b
			for _, n := range tt.rx {
				if auto[n].Equal(b) {
					t.Errorf("auto: %s shares the busiest thread's CPU %s", n, b)
				}
				used = used.Union(auto[n])
			}
			if used.Len() < 2 {
				t.Errorf("auto: rx threads on %s only", used)
			}
			for _, n := range tt.tx {
				if c, ok := auto[n]; !ok || c.Len() != 1 || c.Equal(b) {
					t.Errorf("auto: %s on %v (planned %v), want one CPU other than the busiest's %s", n, c, ok, b)
				}
			}
		})
	}
}

// Without CPU times the data queue (lowest NAPI id) gets the first pick
// and the threads share the CPUs evenly.
func TestRuleMT76NoTicks(t *testing.T) {
	s := copySnap(presetSnapshot(t, "bpi-r4"))
	for i := range s.NAPIThreads {
		s.NAPIThreads[i].CPUTicks = 0
	}
	auto := threadCPUs(t, mustPlan(t, s, ModeAuto))
	per := map[int]int{}
	for n, c := range auto {
		if strings.HasPrefix(n, "napi/phy0-") {
			per[c.CPUs()[0]]++
		}
	}
	if len(per) < 3 {
		t.Errorf("six equal rx threads on %v CPUs, want them spread over at least 3", per)
	}
	if auto["napi/phy0-7"].Equal(auto["mt76-tx phy0"]) {
		t.Errorf("tx worker on the data queue's CPU %s", auto["napi/phy0-7"])
	}
}

func TestPhyThreadRoles(t *testing.T) {
	for _, tt := range []struct {
		preset, dev string
		want        map[string]string
	}{
		{"bpi-r4", "phy0-ap1", map[string]string{"napi/phy0-9": "rx-data", "napi/phy0-11": "rx", "mt76-tx phy0": "tx-worker"}},
		{"mt6000", "wlan1", map[string]string{"napi/phy0-7": "rx-data", "napi/phy0-0": "tx-napi", "mt76-tx phy0": "tx-worker"}},
		{"ipq807x", "wlan0", nil},
	} {
		s := presetSnapshot(t, tt.preset)
		p := mustPlan(t, s, ModeAuto)
		want := func(pid int) string {
			for _, a := range p.Actions {
				if a.Kind == KindNAPIAffinity && a.PID == pid {
					return a.Value
				}
			}
			return ""
		}
		got := map[string]string{}
		for _, th := range PhyThreads(s, tt.dev, want) {
			got[th.Thread] = th.Role
			if th.WantCPUs == "" {
				t.Errorf("%s %s: no wanted CPUs", tt.preset, th.Thread)
			}
		}
		for n, role := range tt.want {
			if got[n] != role {
				t.Errorf("%s %s: %s role %q, want %q (all: %v)", tt.preset, tt.dev, n, got[n], role, got)
			}
		}
		if tt.want == nil && len(got) != 0 {
			t.Errorf("%s: threads %v for a phy without mt76 threads", tt.preset, got)
		}
	}
}

func TestRulePPP(t *testing.T) {
	tests := []struct {
		name   string
		preset string
		change func(s *platform.Snapshot)
		// avoid are CPUs the ppp mask must not hold; want, when set, is
		// the exact mask.
		avoid []int
		want  string
	}{
		// mtk_eth's threads on CPU0, eth1's RPS on CPU2.
		{"mt6000", "mt6000", nil, []int{0, 2}, "a"},
		// eth0's IRQ on CPU0 (RP1, counts), eth0 RPS on CPU1.
		{"rpi5", "rpi5", nil, []int{0, 1}, "c"},
		// eth0's IRQ on CPU1 (counts), its RPS on CPU0.
		{"r2s", "r2s", nil, []int{0, 1}, "c"},
		// eth0-0 carries the traffic on CPU4: the A76 cores but CPU4.
		{"r6s-skew", "r6s-skew", nil, []int{0, 1, 2, 3, 4}, "e0"},
		// No netifd pppoe interface names the carrier: the preferred CPUs.
		{"no carrier", "mt6000", func(s *platform.Snapshot) {
			for i := range s.Devices {
				s.Devices[i].Carrier = ""
			}
		}, nil, "f"},
		// A carrier behind a VLAN is followed to its port.
		{"vlan carrier", "rpi5", func(s *platform.Snapshot) {
			s.Devices = append(s.Devices, platform.Device{Name: "eth0.7", Kind: platform.KindVirtual, Lowers: []string{"eth0"},
				RxQueues: []platform.RxQueue{{Name: "rx-0"}}})
			for i := range s.Devices {
				if s.Devices[i].Kind == platform.KindPPP {
					s.Devices[i].Carrier = "eth0.7"
				}
			}
		}, []int{0, 1}, "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := copySnap(presetSnapshot(t, tt.preset))
			if tt.change != nil {
				tt.change(s)
			}
			p := mustPlan(t, s, ModeAuto, 32)
			v, ok := value(p, KindRPSCPUs, "pppoe-wan/rx-0")
			if !ok {
				t.Fatalf("no RPS for pppoe-wan: %v", render(p.Actions))
			}
			set := cpusOf(t, KindRPSCPUs, v)
			for _, c := range tt.avoid {
				if set.Has(c) {
					t.Errorf("pppoe-wan RPS %s holds CPU%d", v, c)
				}
			}
			if tt.want != "" && !cpuset.SameMask(v, tt.want) {
				t.Errorf("pppoe-wan RPS %s, want %s", v, tt.want)
			}
			if f, _ := value(p, KindRPSFlowCnt, "pppoe-wan/rx-0"); f != "32" {
				t.Errorf("pppoe-wan flows %q, want the configured 32", f)
			}
			if !strings.Contains(p.Evidence, "PPPoE") {
				t.Errorf("evidence without the PPPoE rule: %s", p.Evidence)
			}
			// The stock rule skips a device without a bus device.
			if _, ok := value(mustPlan(t, s, ModeLegacy), KindRPSCPUs, "pppoe-wan/rx-0"); ok {
				t.Errorf("legacy steers pppoe-wan")
			}
		})
	}
}

func TestRuleCapacity(t *testing.T) {
	big := cpuset.Range(4, 7)
	s := presetSnapshot(t, "r6s")
	auto := mustPlan(t, s, ModeAuto)
	for _, a := range auto.Actions {
		if (a.Kind == KindIRQAffinity || a.Kind == KindRPSCPUs) && (strings.HasPrefix(a.Target(), "eth0/") || strings.HasPrefix(a.Target(), "eth1/") || strings.Contains(a.Target(), " eth0-") || strings.Contains(a.Target(), " eth1-")) {
			if set := cpusOf(t, a.Kind, a.Value); set.IsEmpty() || !set.Intersect(big).Equal(set) {
				t.Errorf("auto %s %s on %s: want the A76 cores 4-7", a.Kind, a.Target(), set)
			}
		}
	}
	if !strings.Contains(auto.Evidence, "cpu_capacity 1024 on CPUs 4-7, 423 on CPUs 0-3") {
		t.Errorf("evidence does not show the capacities: %s", auto.Evidence)
	}
	// The stock rule ignores capacity: some 2.5G queue's RPS on an A55.
	little := false
	for _, a := range mustPlan(t, s, ModeLegacy).Actions {
		if a.Kind == KindRPSCPUs && strings.HasPrefix(a.Target(), "eth0/") {
			little = little || !cpusOf(t, a.Kind, a.Value).Intersect(cpuset.Range(0, 3)).IsEmpty()
		}
	}
	if !little {
		t.Errorf("legacy put no eth0 queue on a little core; the comparison shows nothing")
	}

	// R4S: the IRQs the rockchip hook pinned to the A72 cores stay, and
	// RPS goes to the other big core.
	r4 := mustPlan(t, presetSnapshot(t, "r4s"), ModeAuto)
	for _, c := range []struct{ irq, rps, irqWant, rpsWant string }{
		{"irq 24 eth0", "eth0/rx-0", "10", "20"},
		{"irq 88 eth1", "eth1/rx-0", "20", "10"},
	} {
		iv, _ := value(r4, KindIRQAffinity, c.irq)
		rv, _ := value(r4, KindRPSCPUs, c.rps)
		if !cpuset.SameMask(iv, c.irqWant) || !cpuset.SameMask(rv, c.rpsWant) {
			t.Errorf("r4s %s %s / %s %s, want %s / %s", c.irq, iv, c.rps, rv, c.irqWant, c.rpsWant)
		}
	}
}

// Equal cores: the capacity pass changes nothing (the seeded presets'
// plans in TestPresetPlans hold this too).
func TestWeighCapacityEqualCores(t *testing.T) {
	s := presetSnapshot(t, "r5s")
	b := newBuilder(s)
	r := newStockRun(b, s, true)
	before := make([]stockCPU, len(r.cpus))
	for i, c := range r.cpus {
		before[i] = *c
	}
	weighCapacity(r, s)
	for i, c := range r.cpus {
		if *c != before[i] {
			t.Errorf("cpu %d changed: %+v -> %+v", i, before[i], *c)
		}
	}
}

func TestRuleIRQFixed(t *testing.T) {
	// An IRQ the kernel refused is never planned, in any mode, and
	// the device's RPS stays off the CPU it runs on.
	s := copySnap(presetSnapshot(t, "r4s"))
	for i := range s.IRQs {
		if s.IRQs[i].Name == "eth0" {
			s.IRQs[i].Refused = "write proc/irq/24/smp_affinity: invalid argument"
			s.IRQs[i].SMPAffinity, s.IRQs[i].Effective = "3f", "0"
		}
	}
	for _, m := range []Mode{ModeOff, ModeLegacy, ModeAll, ModeAuto, ModeCustom} {
		p := mustPlan(t, s, m)
		if _, ok := value(p, KindIRQAffinity, "irq 24 eth0"); ok {
			t.Errorf("%s plans the refused IRQ", m)
		}
		if !hasHint(p, HintIRQFixed) {
			t.Errorf("%s: no %s hint (have %v)", m, HintIRQFixed, hintIDs(p))
		}
	}
	auto := mustPlan(t, s, ModeAuto)
	if v, _ := value(auto, KindRPSCPUs, "eth0/rx-0"); cpusOf(t, KindRPSCPUs, v).Has(0) {
		t.Errorf("eth0 RPS %s on CPU0, where its unmovable IRQ runs", v)
	}

	// RPi 5: eth0's IRQ runs on CPU0 (empty effective list, counts): the
	// stock rule sends its RPS there too, auto does not.
	r5 := presetSnapshot(t, "rpi5")
	if v, _ := value(mustPlan(t, r5, ModeLegacy), KindRPSCPUs, "eth0/rx-0"); !cpuset.SameMask(v, "1") {
		t.Errorf("legacy eth0 RPS %s, want the stock CPU0 (the comparison shows nothing otherwise)", v)
	}
	p := mustPlan(t, r5, ModeAuto)
	if v, _ := value(p, KindRPSCPUs, "eth0/rx-0"); cpusOf(t, KindRPSCPUs, v).Has(0) || v == "" {
		t.Errorf("auto eth0 RPS %q on the IRQ's CPU0", v)
	}
	if !strings.Contains(p.Evidence, "irq 106 eth0 runs on CPU0") {
		t.Errorf("evidence does not say where the IRQ runs: %s", p.Evidence)
	}
}

func TestRuleSkew(t *testing.T) {
	tests := []struct {
		preset string
		scale  uint64 // counts divided by this
		hint   bool
		mask   string // eth0 rx-0 RPS in auto
	}{
		{"r6s-skew", 1, true, "e0"},
		{"r6s-skew", 10000, false, "20"}, // too few interrupts to say anything: as r6s
		{"r6s", 1, false, "20"},
	}
	for _, tt := range tests {
		s := copySnap(presetSnapshot(t, tt.preset))
		for i := range s.IRQs {
			counts := append([]uint64(nil), s.IRQs[i].Counts...)
			for j := range counts {
				counts[j] /= tt.scale
			}
			s.IRQs[i].Counts = counts
		}
		p := mustPlan(t, s, ModeAuto)
		if hasHint(p, HintRSSSkew) != tt.hint {
			t.Errorf("%s /%d: hint %v, want %v (%v)", tt.preset, tt.scale, hasHint(p, HintRSSSkew), tt.hint, hintIDs(p))
		}
		if v, _ := value(p, KindRPSCPUs, "eth0/rx-0"); !cpuset.SameMask(v, tt.mask) {
			t.Errorf("%s /%d: eth0 rx-0 RPS %s, want %s", tt.preset, tt.scale, v, tt.mask)
		}
	}
}

// Threaded NAPI without IRQ counts: the rx threads' CPU time shows the
// skew. x86-8-threaded's eth0 is rss-per-cpu (RPS off); with its first
// rx thread carrying all the work, rx-0 is spread to the other CPUs.
func TestRuleSkewThreads(t *testing.T) {
	s := copySnap(presetSnapshot(t, "x86-8-threaded"))
	for i := range s.NAPIThreads {
		if s.NAPIThreads[i].Name == "napi/eth0-8193" {
			s.NAPIThreads[i].CPUTicks = 50000
		} else if s.NAPIThreads[i].Device == "eth0" {
			s.NAPIThreads[i].CPUTicks = 100
		}
	}
	p := mustPlan(t, s, ModeAuto)
	if !hasHint(p, HintRSSSkew) {
		t.Fatalf("no %s hint: %v", HintRSSSkew, hintIDs(p))
	}
	v, _ := value(p, KindRPSCPUs, "eth0/rx-0")
	if !cpuset.SameMask(v, "fe") {
		t.Errorf("eth0 rx-0 RPS %s, want fe (every CPU but the thread's CPU0)", v)
	}
	if v, _ := value(p, KindRPSCPUs, "eth0/rx-1"); !cpuset.SameMask(v, "0") {
		t.Errorf("eth0 rx-1 RPS %s, want 0 (rss-per-cpu)", v)
	}
	// Without the CPU times: rss-per-cpu as before.
	if v, _ := value(mustPlan(t, presetSnapshot(t, "x86-8-threaded"), ModeAuto), KindRPSCPUs, "eth0/rx-0"); !cpuset.SameMask(v, "0") {
		t.Errorf("unskewed eth0 rx-0 RPS %s, want 0", v)
	}
}

// Threads without IRQs (veth, the skewed-RSS test bed): the skew shows in
// the CPU time alone, and only the thread's CPU is kept off.
func TestRuleSkewThreadsNoIRQ(t *testing.T) {
	s := copySnap(presetSnapshot(t, "x86-8-threaded"))
	var irqs []platform.IRQ
	for _, q := range s.IRQs {
		if q.Device != "eth0" && !strings.HasPrefix(q.Name, "eth0") {
			irqs = append(irqs, q)
		}
	}
	s.IRQs = irqs
	for i := range s.NAPIThreads {
		if s.NAPIThreads[i].Name == "napi/eth0-8193" {
			s.NAPIThreads[i].CPUTicks = 50000
		} else if s.NAPIThreads[i].Device == "eth0" {
			s.NAPIThreads[i].CPUTicks = 100
		}
	}
	p := mustPlan(t, s, ModeAuto)
	if !hasHint(p, HintRSSSkew) {
		t.Fatalf("no %s hint: %v", HintRSSSkew, hintIDs(p))
	}
	if v, _ := value(p, KindRPSCPUs, "eth0/rx-0"); !cpuset.SameMask(v, "fe") {
		t.Errorf("eth0 rx-0 RPS %s, want fe (every CPU but the thread's CPU0)", v)
	}
}

// Two CPUs: one CPU besides the thread's is left, and the skewed queue is
// spread over both (the skewed-RSS bed measured both CPUs above the other
// CPU alone in two sweeps; openwrt/openwrt#2553 for lantiq's two VPEs).
func TestRuleSkewTwoCPUs(t *testing.T) {
	s := copySnap(presetSnapshot(t, "x86-8-threaded"))
	cpus := append([]platform.CPU(nil), s.CPUs...)
	for i := range cpus {
		cpus[i].Online = cpus[i].ID < 2
	}
	s.CPUs = cpus
	for i := range s.NAPIThreads {
		if s.NAPIThreads[i].Name == "napi/eth0-8193" {
			s.NAPIThreads[i].CPUTicks = 50000
		} else if s.NAPIThreads[i].Device == "eth0" {
			s.NAPIThreads[i].CPUTicks = 100
		}
	}
	p := mustPlan(t, s, ModeAuto)
	if !hasHint(p, HintRSSSkew) {
		t.Fatalf("no %s hint: %v", HintRSSSkew, hintIDs(p))
	}
	if v, _ := value(p, KindRPSCPUs, "eth0/rx-0"); !cpuset.SameMask(v, "3") {
		t.Errorf("eth0 rx-0 RPS %s, want 3 (both CPUs, the thread's included)", v)
	}
}

func TestCapacities(t *testing.T) {
	mk := func(caps, freqs []int) *platform.Snapshot {
		s := &platform.Snapshot{}
		for i := range caps {
			s.CPUs = append(s.CPUs, platform.CPU{ID: i, Online: true, Capacity: caps[i], MaxFreqKHz: freqs[i]})
		}
		return s
	}
	tests := []struct {
		name        string
		caps, freqs []int
		differ      bool
		little      []int
	}{
		{"rk3588", []int{423, 423, 1024, 1024}, []int{0, 0, 0, 0}, true, []int{0, 1}},
		{"equal", []int{1024, 1024}, []int{0, 0}, false, nil},
		{"max_freq only", []int{0, 0, 0}, []int{1800000, 2400000, 2400000}, true, []int{0}},
		{"favoured cores", []int{0, 0}, []int{4900000, 5000000}, false, nil},
		{"one unknown", []int{423, 0}, []int{0, 0}, false, nil},
	}
	for _, tt := range tests {
		got, differ := capacities(mk(tt.caps, tt.freqs))
		if differ != tt.differ {
			t.Errorf("%s: differ %v, want %v (%v)", tt.name, differ, tt.differ, got)
		}
		var little []int
		for i := range tt.caps {
			if got[i] < littleBelow {
				little = append(little, i)
			}
		}
		if fmt.Sprint(little) != fmt.Sprint(tt.little) {
			t.Errorf("%s: little %v, want %v", tt.name, little, tt.little)
		}
	}
}

// rss-per-big-cpu: on big and little cores a threaded device with an rx
// queue and rx thread per big core gets one rx thread per big core and RPS
// off; other devices and machines keep the rules they had.
func TestRuleRSSBigCores(t *testing.T) {
	bigLittle := func(little, big, rx int, threaded bool) *platform.Snapshot {
		m := newMachine(little + big)
		for i := range m.s.CPUs {
			m.s.CPUs[i].Capacity = 1024
			if i < little {
				m.s.CPUs[i].Capacity = 485
			}
		}
		m.eth("eth0", "platform/fe300000.ethernet", "stmmaceth", rx, rx)
		if threaded {
			for i := 1; i <= rx; i++ {
				m.thread(100+i, fmt.Sprintf("napi/eth0-%d", 8192+i))
			}
		}
		return m.snap()
	}
	equal := bigLittle(4, 0, 2, true)
	for i := range equal.CPUs {
		equal.CPUs[i].Capacity = 1024
	}
	for _, c := range []struct {
		name    string
		s       *platform.Snapshot
		applied bool
		threads []int // CPU of rx thread i, when applied
	}{
		{"2 little 2 big, 2 queues", bigLittle(2, 2, 2, true), true, []int{2, 3}},
		{"4 little 2 big, 4 queues", bigLittle(4, 2, 4, true), true, []int{4, 5, 4, 5}},
		{"4 little 4 big, 4 queues", bigLittle(4, 4, 4, true), true, []int{4, 5, 6, 7}},
		{"2 little 2 big, 1 queue", bigLittle(2, 2, 1, true), false, nil},
		{"4 little 4 big, 2 queues", bigLittle(4, 4, 2, true), false, nil},
		{"2 little 2 big, not threaded", bigLittle(2, 2, 2, false), false, nil},
		{"4 equal cores", equal, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustPlan(t, c.s, ModeAuto)
			has := strings.Contains(p.Evidence, "rss-per-big-cpu")
			if has != c.applied {
				t.Fatalf("rss-per-big-cpu in the evidence: %v, want %v: %s", has, c.applied, p.Evidence)
			}
			if !c.applied {
				return
			}
			if !strings.Contains(p.Evidence, "Applied to: eth0.") {
				t.Errorf("evidence does not name eth0: %s", p.Evidence)
			}
			th := threadCPUs(t, p)
			for i, want := range c.threads {
				name := fmt.Sprintf("napi/eth0-%d", 8193+i)
				if got := th[name]; !got.Equal(cpuset.Of(want)) {
					t.Errorf("%s on %s, want CPU%d", name, got, want)
				}
			}
			for i := range c.threads {
				if v, ok := value(p, KindRPSCPUs, fmt.Sprintf("eth0/rx-%d", i)); !ok || !cpusOf(t, KindRPSCPUs, v).IsEmpty() {
					t.Errorf("eth0/rx-%d RPS %q (planned %v), want off", i, v, ok)
				}
			}
			// The stock rule is not changed by it.
			if strings.Contains(mustPlan(t, c.s, ModeLegacy).Evidence, "rss-per-big-cpu") {
				t.Errorf("legacy names rss-per-big-cpu")
			}
		})
	}
}

// Without a profile, a machine whose only spread device is spread over
// the big cores has the rss-per-cpu policy, not the stock rule's
// no-evidence hint.
func TestRuleRSSBigCoresPolicy(t *testing.T) {
	m := newMachine(4)
	for i := range m.s.CPUs {
		m.s.CPUs[i].Capacity = map[bool]int{true: 485, false: 1024}[i < 2]
	}
	m.eth("eth0", "platform/fe300000.ethernet", "stmmaceth", 2, 2).thread(101, "napi/eth0-8193").thread(102, "napi/eth0-8194")
	p := mustPlan(t, m.snap(), ModeAuto)
	if p.Policy != PolicyRSSPerCPU || hasHint(p, HintNoEvidence) {
		t.Errorf("policy %s, hints %v: want %s without %s", p.Policy, hintIDs(p), PolicyRSSPerCPU, HintNoEvidence)
	}
	if strings.HasPrefix(p.Evidence, " ") || strings.Contains(p.Evidence, "one rx queue per CPU keeps") {
		t.Errorf("evidence %q: want rss-per-big-cpu's alone, without the rss-per-cpu text", p.Evidence)
	}
}
