package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// Northstar-like: 2 CPUs, bgmac conduit eth0 (1 rx queue, no threaded NAPI),
// DSA user ports, br-lan over them.
func northstar() *machine {
	m := newMachine(2).target("bcm53xx/generic").
		eth("eth0", "sys/devices/platform/bus@18000000/18024000.ethernet", "bgmac-bcma", 1, 1).
		dsaUser("lan1", "eth0").dsaUser("lan2", "eth0").dsaUser("wan", "eth0").
		bridge("br-lan", "lan1", "lan2")
	m.s.Devices[0].Kind = platform.KindDSAConduit
	return m
}

// mt7621-like: 2 cores x 2 threads, mtk_soc_eth with napi/mtk_eth threads,
// two mt76 wifi phys with their own NAPI threads.
func mt7621() *machine {
	return newMachine(4, 0, 0, 1, 1).target("ramips/mt7621").
		eth("eth0", "sys/devices/platform/1e100000.ethernet", "mtk_soc_eth", 1, 16).
		wifi("phy0-ap0", "sys/devices/pci0000:00/0000:01:00.0", 0).
		wifi("phy1-ap0", "sys/devices/pci0000:00/0000:02:00.0", 1).
		thread(300, "napi/mtk_eth-1").thread(301, "napi/mtk_eth-2").
		thread(400, "napi/phy0-3").thread(401, "napi/phy1-4")
}

// x86 with two 8-queue igc NICs, one MSI-X IRQ per queue, no threaded NAPI.
func x86Eight() *machine {
	m := newMachine(8).target("x86/64").
		eth("eth0", "sys/devices/pci0000:00/0000:03:00.0", "igc", 8, 8).
		eth("eth1", "sys/devices/pci0000:00/0000:04:00.0", "igc", 8, 8)
	for q := 0; q < 8; q++ {
		m.irq(120+q, fmt.Sprintf("eth0-TxRx-%d", q), "eth0", q)
		m.irq(130+q, fmt.Sprintf("eth1-TxRx-%d", q), "eth1", q)
	}
	return m
}

// ipq807x-like: 4 CPUs, EDMA conduit with 4 rings, threaded NAPI.
func ipq807x() *machine {
	m := newMachine(4).target("qualcommax/ipq807x").
		eth("eth0", "sys/devices/platform/soc/3ab00000.ethernet", "qca-edma", 4, 4).
		dsaUser("lan1", "eth0").dsaUser("wan", "eth0")
	m.s.Devices[0].Kind = platform.KindDSAConduit
	for q := 0; q < 4; q++ {
		m.thread(300+q, fmt.Sprintf("napi/eth0-%d", 257+q))
		m.irq(60+q, fmt.Sprintf("edma_rxdesc_%d", q), "eth0", q)
	}
	return m
}

func TestLegacyNorthstar(t *testing.T) {
	s := northstar().snap()
	sameLines(t, "legacy", render(mustPlan(t, s, ModeLegacy).Actions), []string{
		// eth0: no threads, single queue: get_next_cpu(0.75) -> CPU0.
		"rps_cpus eth0/rx-0 1",
		"rps_flow_cnt eth0/rx-0 0",
	})
	sameLines(t, "off", render(mustPlan(t, s, ModeOff).Actions), []string{
		"rps_cpus eth0/rx-0 0",
		"rps_flow_cnt eth0/rx-0 0",
	})
	sameLines(t, "all", render(mustPlan(t, s, ModeAll).Actions), []string{
		"rps_cpus eth0/rx-0 3",
		"rps_flow_cnt eth0/rx-0 0",
	})
}

func TestAutoNorthstarSeed000(t *testing.T) {
	// The marked best rows of the bcm53xx commit's table (docs/platforms.md), by flow offload state.
	tests := []struct {
		sw, hw string
		policy string
		want   []string
	}{
		{"0", "0", "bcm53xx", []string{
			"rps_cpus br-lan/rx-0 2", "rps_flow_cnt br-lan/rx-0 0",
			"rps_cpus eth0/rx-0 0", "rps_flow_cnt eth0/rx-0 0"}},
		{"1", "0", "bcm53xx-sw-offload", []string{
			"rps_cpus eth0/rx-0 2", "rps_flow_cnt eth0/rx-0 0"}},
		{"1", "1", "bcm53xx-hw-offload", []string{
			"rps_cpus br-lan/rx-0 0", "rps_flow_cnt br-lan/rx-0 0",
			"rps_cpus eth0/rx-0 0", "rps_flow_cnt eth0/rx-0 0"}},
	}
	for _, tt := range tests {
		p := mustPlan(t, northstar().offload(tt.sw, tt.hw).snap(), ModeAuto)
		if p.Policy != tt.policy || p.Evidence == "" {
			t.Errorf("offload %s/%s: policy %q evidence %q, want %q", tt.sw, tt.hw, p.Policy, p.Evidence, tt.policy)
		}
		sameLines(t, tt.policy, render(p.Actions), tt.want)
	}
}

func TestLegacyMT7621(t *testing.T) {
	s := mt7621().snap()
	// Loads by hand (cores 0,0,1,1; sibling weight 0.75):
	// eth0 NAPI -> CPU0 [1 .75 0 0]; eth0 RPS -> CPU2 (tie 2/3; musl orders 2 3 1 0)
	// [1 .75 .75 .5625]; eth bias on CPU0 [3 2.25 .75 .5625];
	// phy0 NAPI -> CPU3 [3 2.25 1.5 1.5625]; phy0 RPS -> CPU2
	// [3 2.25 2.25 2.125]; phy1 NAPI -> CPU3 [3 2.25 3 3.125];
	// phy1 RPS -> CPU1.
	sameLines(t, "legacy", render(mustPlan(t, s, ModeLegacy).Actions), []string{
		"rps_cpus eth0/rx-0 4", "rps_flow_cnt eth0/rx-0 0",
		"rps_cpus phy0-ap0/rx-0 4", "rps_flow_cnt phy0-ap0/rx-0 0",
		"rps_cpus phy1-ap0/rx-0 2", "rps_flow_cnt phy1-ap0/rx-0 0",
		"napi_affinity pid 300 napi/mtk_eth-1 0",
		"napi_affinity pid 301 napi/mtk_eth-2 0",
		"napi_affinity pid 400 napi/phy0-3 3",
		"napi_affinity pid 401 napi/phy1-4 3",
	})
	// Mode 2: RPS all CPUs adds no load: [3 2.25 0 0] after the bias;
	// phy0 NAPI -> CPU2 [3 2.25 1 .75]; phy1 NAPI -> CPU3.
	all := []string{
		"rps_cpus eth0/rx-0 f", "rps_flow_cnt eth0/rx-0 0",
		"rps_cpus phy0-ap0/rx-0 f", "rps_flow_cnt phy0-ap0/rx-0 0",
		"rps_cpus phy1-ap0/rx-0 f", "rps_flow_cnt phy1-ap0/rx-0 0",
		"napi_affinity pid 300 napi/mtk_eth-1 0",
		"napi_affinity pid 301 napi/mtk_eth-2 0",
		"napi_affinity pid 400 napi/phy0-3 2",
		"napi_affinity pid 401 napi/phy1-4 3",
	}
	sameLines(t, "all", render(mustPlan(t, s, ModeAll).Actions), all)
	auto := mustPlan(t, s, ModeAuto)
	if auto.Policy != "ramips-mt7621" {
		t.Errorf("auto policy %q", auto.Policy)
	}
	sameLines(t, "auto", render(auto.Actions), all)
	sameLines(t, "off", render(mustPlan(t, s, ModeOff).Actions), []string{
		"rps_cpus eth0/rx-0 0", "rps_flow_cnt eth0/rx-0 0",
		"rps_cpus phy0-ap0/rx-0 0", "rps_flow_cnt phy0-ap0/rx-0 0",
		"rps_cpus phy1-ap0/rx-0 0", "rps_flow_cnt phy1-ap0/rx-0 0",
		"napi_affinity pid 300 napi/mtk_eth-1 0-3",
		"napi_affinity pid 301 napi/mtk_eth-2 0-3",
		"napi_affinity pid 400 napi/phy0-3 0-3",
		"napi_affinity pid 401 napi/phy1-4 0-3",
	})
}

func TestX86EightFunnelFixed(t *testing.T) {
	s := x86Eight().snap()
	var legacy, auto []string
	for q := 0; q < 8; q++ {
		// Stock: no threads, so the single-queue branch: every queue of
		// eth0 on CPU0 (docs/platforms.md), every queue of eth1 on one CPU too:
		// loads [.75 0 0 0 0 0 0 0], musl's qsort orders 2 1 4 3 7 5 6 0.
		legacy = append(legacy, fmt.Sprintf("rps_cpus eth0/rx-%d 1", q), fmt.Sprintf("rps_flow_cnt eth0/rx-%d 0", q))
	}
	for q := 0; q < 8; q++ {
		legacy = append(legacy, fmt.Sprintf("rps_cpus eth1/rx-%d 4", q), fmt.Sprintf("rps_flow_cnt eth1/rx-%d 0", q))
	}
	sameLines(t, "legacy", render(mustPlan(t, s, ModeLegacy).Actions), legacy)

	for _, dev := range []string{"eth0", "eth1"} {
		for q := 0; q < 8; q++ {
			auto = append(auto, fmt.Sprintf("rps_cpus %s/rx-%d 0", dev, q), fmt.Sprintf("rps_flow_cnt %s/rx-%d 0", dev, q))
		}
		for q := 0; q < 8; q++ {
			auto = append(auto, fmt.Sprintf("xps_cpus %s/tx-%d %s", dev, q, cpuMask(q)))
		}
	}
	for q := 0; q < 8; q++ {
		auto = append(auto, fmt.Sprintf("irq_affinity irq %d eth0-TxRx-%d %s", 120+q, q, cpuMask(q)))
	}
	for q := 0; q < 8; q++ {
		auto = append(auto, fmt.Sprintf("irq_affinity irq %d eth1-TxRx-%d %s", 130+q, q, cpuMask(q)))
	}
	p := mustPlan(t, s, ModeAuto)
	if p.Policy != PolicyRSSPerCPU {
		t.Errorf("policy %q", p.Policy)
	}
	sameLines(t, "auto", render(p.Actions), auto)
	// Never all queues of a multi-queue device on one CPU.
	for _, dev := range []string{"eth0", "eth1"} {
		seen := map[string]bool{}
		for _, a := range p.Actions {
			if a.Kind == KindIRQAffinity && a.Name[:4] == dev {
				seen[a.Value] = true
			}
		}
		if len(seen) < 2 {
			t.Errorf("%s: IRQs funnelled into %v", dev, seen)
		}
	}
}

func TestLegacyMultiQueueThreaded(t *testing.T) {
	m := newMachine(8).target("x86/64").eth("eth0", "sys/devices/pci0000:00/0000:03:00.0", "igc", 8, 8)
	for q := 0; q < 8; q++ {
		m.thread(1000+q, fmt.Sprintf("napi/eth0-%d", 8193+q))
	}
	p := mustPlan(t, m.snap(), ModeLegacy)
	var want []string
	for q := 0; q < 8; q++ {
		// One queue per CPU: thread i on CPU i, queue i's RPS on CPU i+1.
		want = append(want, fmt.Sprintf("rps_cpus eth0/rx-%d %s", q, cpuMask((q+1)%8)), fmt.Sprintf("rps_flow_cnt eth0/rx-%d 0", q))
	}
	for q := 0; q < 8; q++ {
		want = append(want, fmt.Sprintf("napi_affinity pid %d napi/eth0-%d %d", 1000+q, 8193+q, q))
	}
	sameLines(t, "legacy", render(p.Actions), want)
	// Mode 2 does not change the fixed multi-queue branch.
	sameLines(t, "all", render(mustPlan(t, m.snap(), ModeAll).Actions), want)
}

func TestIPQ807xSeed002(t *testing.T) {
	s := ipq807x().snap()
	legacy := []string{
		"rps_cpus eth0/rx-0 2", "rps_flow_cnt eth0/rx-0 0",
		"rps_cpus eth0/rx-1 4", "rps_flow_cnt eth0/rx-1 0",
		"rps_cpus eth0/rx-2 8", "rps_flow_cnt eth0/rx-2 0",
		"rps_cpus eth0/rx-3 1", "rps_flow_cnt eth0/rx-3 0",
		"napi_affinity pid 300 napi/eth0-257 0",
		"napi_affinity pid 301 napi/eth0-258 1",
		"napi_affinity pid 302 napi/eth0-259 2",
		"napi_affinity pid 303 napi/eth0-260 3",
	}
	sameLines(t, "legacy", render(mustPlan(t, s, ModeLegacy).Actions), legacy)
	p := mustPlan(t, s, ModeAuto)
	if p.Policy != "qualcommax-ipq807x" {
		t.Errorf("policy %q", p.Policy)
	}
	sameLines(t, "auto", render(p.Actions), []string{
		"rps_cpus eth0/rx-0 0", "rps_flow_cnt eth0/rx-0 0",
		"rps_cpus eth0/rx-1 0", "rps_flow_cnt eth0/rx-1 0",
		"rps_cpus eth0/rx-2 0", "rps_flow_cnt eth0/rx-2 0",
		"rps_cpus eth0/rx-3 0", "rps_flow_cnt eth0/rx-3 0",
		"xps_cpus eth0/tx-0 1", "xps_cpus eth0/tx-1 2", "xps_cpus eth0/tx-2 4", "xps_cpus eth0/tx-3 8",
		"napi_affinity pid 300 napi/eth0-257 0",
		"napi_affinity pid 301 napi/eth0-258 1",
		"napi_affinity pid 302 napi/eth0-259 2",
		"napi_affinity pid 303 napi/eth0-260 3",
		"irq_affinity irq 60 edma_rxdesc_0 1",
		"irq_affinity irq 61 edma_rxdesc_1 2",
		"irq_affinity irq 62 edma_rxdesc_2 4",
		"irq_affinity irq 63 edma_rxdesc_3 8",
	})
	if !hasHint(p, HintSWOffloadHelps) {
		t.Errorf("no swoffload-helps hint: %v", hintIDs(p))
	}
	if p2 := mustPlan(t, ipq807x().offload("1", "0").snap(), ModeAuto); hasHint(p2, HintSWOffloadHelps) {
		t.Error("swoffload-helps with software offload on")
	}
}

// Threads whose PIDs run opposite to their NAPI ids (veth, or any driver
// whose `threaded` was switched on after its NAPI instances were added: the
// kernel keeps them head-first and spawns the threads in list order). legacy
// pairs by PID as the stock script does; auto pairs queue i with the i-th
// NAPI id, so a ring's thread shares its CPU with the ring's IRQ and XPS.
func TestAutoPairsThreadsByNAPIID(t *testing.T) {
	m := newMachine(4).target("qualcommax/ipq807x").
		eth("eth0", "sys/devices/platform/soc/3ab00000.ethernet", "qca-edma", 4, 4)
	for q := 0; q < 4; q++ {
		m.thread(303-q, fmt.Sprintf("napi/eth0-%d", 257+q))
		m.irq(60+q, fmt.Sprintf("edma_rxdesc_%d", q), "eth0", q)
	}
	var napi []string
	for _, a := range mustPlan(t, m.snap(), ModeAuto).Actions {
		if a.Kind == KindNAPIAffinity {
			napi = append(napi, fmt.Sprintf("%s %s", a.Thread, a.Value))
		}
	}
	// Actions are in PID order; compare by thread.
	sort.Strings(napi)
	want := []string{"napi/eth0-257 0", "napi/eth0-258 1", "napi/eth0-259 2", "napi/eth0-260 3"}
	sameLines(t, "auto napi", napi, want)
	napi = napi[:0]
	for _, a := range mustPlan(t, m.snap(), ModeLegacy).Actions {
		if a.Kind == KindNAPIAffinity {
			napi = append(napi, fmt.Sprintf("%s %s", a.Thread, a.Value))
		}
	}
	// Stock: threads in PID order get CPUs 0..3, so id 260 (PID 300) is on 0.
	sort.Strings(napi)
	sameLines(t, "legacy napi", napi, []string{"napi/eth0-257 3", "napi/eth0-258 2", "napi/eth0-259 1", "napi/eth0-260 0"})
}

// Beyond the stock script's bounds: 48 CPUs, 48 queues, PIDs of different
// widths. Masks get comma groups, queues and threads pair in numeric order.
func TestLegacyBeyondBounds(t *testing.T) {
	m := newMachine(48).target("x86/64").eth("eth0", "sys/devices/pci0000:00/0000:03:00.0", "ice", 48, 48)
	for q := 0; q < 48; q++ {
		m.thread(95+q, fmt.Sprintf("napi/eth0-%d", 9000+q)) // PIDs 95..142
	}
	p := mustPlan(t, m.snap(), ModeLegacy)
	got := map[string]string{}
	for _, a := range p.Actions {
		got[string(a.Kind)+" "+a.Target()] = a.Value
	}
	checks := map[string]string{
		"rps_cpus eth0/rx-2":                   "8",          // CPU 3
		"rps_cpus eth0/rx-10":                  "800",        // CPU 11, not rx-10 in text order
		"rps_cpus eth0/rx-31":                  "1,00000000", // CPU 32
		"rps_cpus eth0/rx-46":                  "8000,00000000",
		"rps_cpus eth0/rx-47":                  "1", // CPU 0
		"napi_affinity pid 99 napi/eth0-9004":  "4",
		"napi_affinity pid 100 napi/eth0-9005": "5", // 100 after 99, not in text order
	}
	for q := 0; q < 48; q++ {
		checks[fmt.Sprintf("napi_affinity pid %d napi/eth0-%d", 95+q, 9000+q)] = fmt.Sprint(q)
	}
	for k, v := range checks {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if n := len(p.Actions); n != 48*2+48 {
		t.Errorf("%d actions, want %d", n, 48*3)
	}
	// Mode 2 on a machine with more than 32 CPUs in the single-queue branch:
	// the all-CPU mask has comma groups.
	m2 := newMachine(48).eth("eth0", "sys/devices/pci0000:00/0000:03:00.0", "e1000e", 1, 1)
	if v := mustPlan(t, m2.snap(), ModeAll).Actions[0].Value; v != "ffff,ffffffff" {
		t.Errorf("all mask on 48 CPUs = %q", v)
	}
}

func TestSingleCPUManagesNothing(t *testing.T) {
	m := newMachine(1).target("bcm53xx/generic").eth("eth0", "sys/devices/platform/eth", "bgmac-bcma", 1, 1).bridge("br-lan")
	for _, mode := range Modes {
		p := mustPlan(t, m.snap(), mode)
		if len(p.Actions) != 0 {
			t.Errorf("%s on 1 CPU: %v", mode, render(p.Actions))
		}
	}
	if p := mustPlan(t, m.snap(), ModeAuto); p.Policy != "single-cpu" || p.Evidence == "" {
		t.Errorf("auto on 1 CPU: policy %q", p.Policy)
	}
	// Two CPUs listed, one online: auto manages nothing, legacy (like the
	// stock script, which does not look at online) still plans.
	m2 := newMachine(2).eth("eth0", "sys/devices/platform/eth", "x", 1, 1)
	m2.s.CPUs[1].Online = false
	if p := mustPlan(t, m2.snap(), ModeAuto); len(p.Actions) != 0 || p.Policy != "single-cpu" {
		t.Errorf("auto with one online CPU: %q %v", p.Policy, render(p.Actions))
	}
	if p := mustPlan(t, m2.snap(), ModeLegacy); len(p.Actions) != 2 {
		t.Errorf("legacy with one online CPU: %v", render(p.Actions))
	}
}

func TestAutoNoFunnelFewQueues(t *testing.T) {
	// 4 CPUs, a NIC with 2 rx queues and no threaded NAPI.
	m := newMachine(4).eth("eth0", "sys/devices/pci0000:00/0000:03:00.0", "r8169", 2, 2)
	sameLines(t, "legacy", render(mustPlan(t, m.snap(), ModeLegacy).Actions), []string{
		"rps_cpus eth0/rx-0 1", "rps_flow_cnt eth0/rx-0 0",
		"rps_cpus eth0/rx-1 1", "rps_flow_cnt eth0/rx-1 0",
	})
	// Auto: per queue, CPU0 then (loads [1 0 0 0], musl order 2 1 3 0) CPU2.
	p := mustPlan(t, m.snap(), ModeAuto)
	sameLines(t, "auto", render(p.Actions), []string{
		"rps_cpus eth0/rx-0 1", "rps_flow_cnt eth0/rx-0 0",
		"rps_cpus eth0/rx-1 4", "rps_flow_cnt eth0/rx-1 0",
	})
	if p.Policy != PolicyLegacy || !hasHint(p, HintNoEvidence) {
		t.Errorf("policy %q hints %v", p.Policy, hintIDs(p))
	}
}

func TestFlows(t *testing.T) {
	s := x86Eight().snap()
	p := mustPlan(t, s, ModeLegacy, 100)
	last := p.Actions[len(p.Actions)-1]
	// 16 managed queues x 100 = 1600 -> 2048.
	if last.Kind != KindSysctl || last.Key != SysctlRPSSockFlowEntries || last.Value != "2048" || last.Current != "0" {
		t.Errorf("sysctl action %+v", last)
	}
	for _, a := range p.Actions {
		if a.Kind == KindRPSFlowCnt && a.Value != "100" {
			t.Errorf("%s = %s", a.Target(), a.Value)
		}
	}
	if p.Flows != 100 {
		t.Errorf("plan flows %d", p.Flows)
	}
	// A larger live value is kept.
	s.RPSSockFlowEntries = 32768
	if v := mustPlan(t, s, ModeLegacy, 100).Actions; v[len(v)-1].Value != "32768" {
		t.Errorf("sysctl lowered: %+v", v[len(v)-1])
	}
	// Flows 0: the sysctl is not managed.
	for _, a := range mustPlan(t, s, ModeLegacy, 0).Actions {
		if a.Kind == KindSysctl {
			t.Errorf("sysctl with flows 0: %+v", a)
		}
	}
	// Off: flow count 0 whatever is asked.
	off := mustPlan(t, s, ModeOff, 100)
	for _, a := range off.Actions {
		if a.Kind == KindSysctl || (a.Kind == KindRPSFlowCnt && a.Value != "0") {
			t.Errorf("off with flows: %+v", a)
		}
	}
	if off.Flows != 0 {
		t.Errorf("off plan flows %d", off.Flows)
	}
	// From UCI.
	s.Config.SteeringFlows = "64"
	if p := mustPlan(t, s, ModeLegacy); p.Flows != 64 {
		t.Errorf("flows from UCI: %d", p.Flows)
	}
}

func TestNewPlanRejects(t *testing.T) {
	s := northstar().snap()
	bad := []PlanRequest{
		{Mode: "fast"},
		{Mode: "Auto"},
		{Flows: intp(-1)},
		{Flows: intp(MaxFlows + 1)},
	}
	for _, req := range bad {
		if _, err := NewPlan(s, req); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewPlan(%+v) error %v, want ErrInvalid", req, err)
		}
	}
	if _, err := NewPlan(nil, PlanRequest{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil snapshot: %v", err)
	}
	if _, err := NewPlan(s, PlanRequest{Flows: intp(MaxFlows)}); err != nil {
		t.Errorf("MaxFlows rejected: %v", err)
	}
}

func intp(n int) *int { return &n }

// A snapshot fully determines its plan: same plan twice, and after a JSON
// round trip of the snapshot (plan --snapshot FILE on another machine).
func TestPlanDeterministic(t *testing.T) {
	for name, m := range map[string]*machine{"mt7621": mt7621(), "x86": x86Eight(), "ipq807x": ipq807x(), "northstar": northstar()} {
		for _, mode := range Modes {
			a := mustPlan(t, m.snap(), mode, 32)
			raw, err := json.Marshal(m.snap())
			if err != nil {
				t.Fatal(err)
			}
			var back platform.Snapshot
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			b := mustPlan(t, &back, mode, 32)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s %s: plan differs after snapshot round trip", name, mode)
			}
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(mustPlan(t, m.snap(), mode, 32))
			if string(ja) != string(jb) {
				t.Errorf("%s %s: plan not deterministic", name, mode)
			}
		}
	}
}

func TestPlanJSONShape(t *testing.T) {
	p := mustPlan(t, ipq807x().snap(), ModeAuto, 16)
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mode", "policy", "actions", "hints", "flows"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("plan JSON lacks %q: %s", k, raw)
		}
	}
	acts := generic["actions"].([]any)
	first := acts[0].(map[string]any)
	if first["kind"] != "rps_cpus" || first["device"] != "eth0" || first["queue"] != "rx-0" || first["value"] != "0" || first["current"] != "0" {
		t.Errorf("first action %v", first)
	}
	lastA := acts[len(acts)-1].(map[string]any)
	if lastA["kind"] != "sysctl" || lastA["key"] != "net.core.rps_sock_flow_entries" || lastA["value"] != "64" {
		t.Errorf("last action %v", lastA)
	}
	// An empty plan still has "actions": [] and "hints": [].
	e := mustPlan(t, newMachine(1).snap(), ModeAuto)
	raw, _ = json.Marshal(e)
	if !json.Valid(raw) || !contains(string(raw), `"hints":[]`) {
		t.Errorf("empty plan JSON %s", raw)
	}
}

func contains(s, sub string) bool { return len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0) }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestActionHolds(t *testing.T) {
	tests := []struct {
		a    Action
		want bool
	}{
		{Action{Kind: KindRPSCPUs, Value: "1", Current: "00000001"}, true},
		{Action{Kind: KindRPSCPUs, Value: "1,00000000", Current: "0001,00000000"}, true},
		{Action{Kind: KindRPSCPUs, Value: "2", Current: "1"}, false},
		{Action{Kind: KindIRQAffinity, Value: "f", Current: ""}, false},
		{Action{Kind: KindNAPIAffinity, Value: "0-3", Current: "0,1,2,3"}, true},
		{Action{Kind: KindNAPIAffinity, Value: "1", Current: "0-1"}, false},
		{Action{Kind: KindRPSFlowCnt, Value: "0", Current: "0"}, true},
		{Action{Kind: KindSysctl, Value: "4096", Current: "4096\n"}, true},
		{Action{Kind: KindSysctl, Value: "4096", Current: ""}, false},
	}
	for _, tt := range tests {
		if got := tt.a.Holds(); got != tt.want {
			t.Errorf("%+v.Holds() = %v", tt.a, got)
		}
	}
}

func TestPlanCurrentValues(t *testing.T) {
	m := ipq807x()
	m.s.Devices[0].RxQueues[2].RPSCPUs = "8"
	m.s.Devices[0].RxQueues[2].RPSFlowCnt = 7
	m.s.NAPIThreads[1].CPUs = "1"
	m.s.IRQs[3].SMPAffinity = "8"
	p := mustPlan(t, m.snap(), ModeLegacy)
	for _, a := range p.Actions {
		switch a.Target() {
		case "eth0/rx-2":
			if a.Kind == KindRPSCPUs && (a.Current != "8" || !a.Holds()) {
				t.Errorf("rx-2 rps %+v", a)
			}
			if a.Kind == KindRPSFlowCnt && (a.Current != "7" || a.Holds()) {
				t.Errorf("rx-2 flows %+v", a)
			}
		case "pid 301 napi/eth0-258":
			if a.Current != "1" || !a.Holds() {
				t.Errorf("thread %+v", a)
			}
		}
	}
}

// bigMachine has n CPUs and devs NICs of q rx/tx queues each, threaded
// NAPI with one thread per queue and one IRQ per queue.
func bigMachine(n, devs, q int) *platform.Snapshot {
	m := newMachine(n).target("x86/64")
	pid := 1000
	irq := 100
	for d := 0; d < devs; d++ {
		name := fmt.Sprintf("eth%d", d)
		m.eth(name, fmt.Sprintf("sys/devices/pci0000:00/0000:%02x:%02x.0", d/256, d%256), "igc", q, q)
		for i := 0; i < q; i++ {
			m.thread(pid, fmt.Sprintf("napi/%s-%d", name, 8193+pid))
			m.irq(irq, fmt.Sprintf("%s-TxRx-%d", name, i), name, i)
			pid++
			irq++
		}
	}
	return m.snap()
}

// BenchmarkNewPlanRouter4CPU plans the ipq807x preset (4 CPUs, docs/design.md's
// 1 ms target).
func BenchmarkNewPlanRouter4CPU(b *testing.B) {
	s := presetSnapshot(b, "ipq807x")
	for _, mode := range []Mode{ModeLegacy, ModeAuto} {
		b.Run(string(mode), func(b *testing.B) {
			b.ResetTimer()
			for range b.N {
				if _, err := NewPlan(s, PlanRequest{Mode: mode}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlanGrowthCPUs: one NIC with one queue per CPU, 2..256 CPUs.
func BenchmarkPlanGrowthCPUs(b *testing.B) {
	for _, n := range []int{2, 4, 8, 16, 32, 64, 128, 256} {
		s := bigMachine(n, 1, n)
		for _, mode := range []Mode{ModeLegacy, ModeAuto} {
			b.Run(fmt.Sprintf("%s/cpus=%d", mode, n), func(b *testing.B) {
				b.ResetTimer()
				for range b.N {
					if _, err := NewPlan(s, PlanRequest{Mode: mode}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPlanGrowthDevices: 4 CPUs, 1..512 single-queue devices.
func BenchmarkPlanGrowthDevices(b *testing.B) {
	for _, d := range []int{1, 8, 64, 512} {
		s := bigMachine(4, d, 1)
		for _, mode := range []Mode{ModeLegacy, ModeAuto} {
			b.Run(fmt.Sprintf("%s/devices=%d", mode, d), func(b *testing.B) {
				b.ResetTimer()
				for range b.N {
					if _, err := NewPlan(s, PlanRequest{Mode: mode}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestPlanGrowthLinear: the plan's work grows linearly with devices and
// CPUs. It counts allocations, which do not depend on how busy the machine
// is (a timed ratio failed under load); the time per plan is in
// BenchmarkPlanGrowth*.
func TestPlanGrowthLinear(t *testing.T) {
	pairs := []struct {
		name       string
		small, big *platform.Snapshot
	}{
		{"devices 64->512", bigMachine(4, 64, 1), bigMachine(4, 512, 1)},
		{"cpus 32->256", bigMachine(32, 1, 32), bigMachine(256, 1, 256)},
	}
	allocs := func(s *platform.Snapshot) float64 {
		return testing.AllocsPerRun(5, func() {
			if _, err := NewPlan(s, PlanRequest{Mode: ModeAuto}); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, p := range pairs {
		small, big := allocs(p.small), allocs(p.big)
		ratio := big / small
		t.Logf("%s: %.0f -> %.0f allocations per plan (x%.1f)", p.name, small, big, ratio)
		if ratio > 12 {
			t.Errorf("%s: allocations grow x%.1f for 8x the input: not linear", p.name, ratio)
		}
	}
}

// FuzzNewPlan: any snapshot JSON either fails to decode or plans without
// panicking, every mode, with well-formed values.
func FuzzNewPlan(f *testing.F) {
	for _, m := range []*machine{northstar(), mt7621(), ipq807x(), newMachine(3)} {
		raw, err := json.Marshal(m.snap())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	// tx threads and tx IRQs, one with a queue the device does not have.
	f.Add([]byte(`{"cpus":[{"id":0,"online":true},{"id":1,"online":true}],"devices":[{"name":"eth0","bus_device":"b","rx_queues":[{"index":0,"name":"rx-0"},{"index":1,"name":"rx-1"}],"tx_queues":[{"index":0,"name":"tx-0"},{"index":1,"name":"tx-1"}]}],"irqs":[{"number":1,"device":"eth0","queue":0,"direction":"rx"},{"number":2,"device":"eth0","queue":9,"direction":"tx"},{"number":3,"device":"eth0","queue":1,"direction":"rxtx"}],"napi_threads":[{"pid":5,"name":"napi/eth0-0","device":"eth0","napi_id":0,"direction":"tx"},{"pid":6,"name":"napi/eth0-8193","device":"eth0","napi_id":8193},{"pid":7,"name":"napi/eth0-0","device":"eth0","napi_id":0}]}`))
	f.Add([]byte(`{"cpus":[{"id":-1,"online":true},{"id":-1},{"id":5,"core":-7,"online":true}],"devices":[{"name":"x","bus_device":"b","rx_queues":[{"index":-3,"name":"rx-"}],"tx_queues":[{"index":-1,"name":"tx-9"}]}],"irqs":[{"number":1,"device":"x","queue":-2},{"number":2,"device":"x","queue":7}],"napi_threads":[{"pid":0,"name":"napi/x-99999999999999999999"}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var s platform.Snapshot
		if err := json.Unmarshal(raw, &s); err != nil {
			return
		}
		for _, mode := range Modes {
			p, err := NewPlan(&s, PlanRequest{Mode: mode})
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			for _, a := range p.Actions {
				var err error
				switch a.Kind {
				case KindRPSCPUs, KindXPSCPUs, KindIRQAffinity:
					_, err = cpuset.ParseMask(a.Value)
				case KindNAPIAffinity:
					var set cpuset.Set
					set, err = cpuset.ParseList(a.Value)
					if err == nil && set.IsEmpty() {
						err = errors.New("empty affinity")
					}
				}
				if err != nil {
					t.Fatalf("%s: %s %s value %q: %v", mode, a.Kind, a.Target(), a.Value, err)
				}
			}
		}
	})
}
