package plan

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture"
)

// These are the table tests over the fixture presets: every preset, every
// mode, the expected plan written out. Legacy, off and all follow the stock
// packet-steering.uc rules by hand (see stock.go); auto follows the profile
// table (docs/platforms.md); custom equals auto on the presets (they have no
// /etc/config/packet_steering). The helpers below only expand a rule over
// queues ("queue i RPS to CPU i+1") so the lists stay readable.

// presetCache holds the snapshots read from preset roots: building and
// reading a root is the slow part, planning never changes a snapshot.
var presetCache = struct {
	sync.Mutex
	m map[string]*platform.Snapshot
}{m: map[string]*platform.Snapshot{}}

// presetSnapshot builds a preset into a temp root and reads it back.
func presetSnapshot(t testing.TB, name string) *platform.Snapshot {
	t.Helper()
	presetCache.Lock()
	defer presetCache.Unlock()
	if s, ok := presetCache.m[name]; ok {
		return s
	}
	spec, ok := fixture.Preset(name)
	if !ok {
		t.Fatalf("no preset %q", name)
	}
	spec.Processes = fixture.DropPIDClashes(spec.Processes)
	root, err := os.MkdirTemp("", "steering-preset-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	if err := fixture.Build(root, spec); err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	s, err := platform.Read(context.Background(), root)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	presetCache.m[name] = s
	return s
}

// rx lists rps_cpus and rps_flow_cnt (0) for queues 0..n-1.
func rx(dev string, n int, mask func(q int) string) []string {
	var out []string
	for q := 0; q < n; q++ {
		out = append(out, fmt.Sprintf("rps_cpus %s/rx-%d %s", dev, q, mask(q)), fmt.Sprintf("rps_flow_cnt %s/rx-%d 0", dev, q))
	}
	return out
}

// tx lists xps_cpus for queues 0..n-1.
func tx(dev string, n int, mask func(q int) string) []string {
	var out []string
	for q := 0; q < n; q++ {
		out = append(out, fmt.Sprintf("xps_cpus %s/tx-%d %s", dev, q, mask(q)))
	}
	return out
}

// threads lists napi_affinity for n threads napi/OWNER-ID with consecutive
// PIDs and ids.
func threads(pid int, owner string, id, n int, cpus func(i int) string) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("napi_affinity pid %d napi/%s-%d %s", pid+i, owner, id+i, cpus(i)))
	}
	return out
}

// threadsStep is threads with PIDs pid, pid+step, ...: rx threads
// interleaved with tx threads.
func threadsStep(pid, step int, owner string, id, n int, cpus func(i int) string) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("napi_affinity pid %d napi/%s-%d %s", pid+step*i, owner, id+i, cpus(i)))
	}
	return out
}

// irqs lists irq_affinity for n consecutive IRQs named by nameFmt % queue.
func irqs(first int, nameFmt string, n int, mask func(q int) string) []string {
	var out []string
	for q := 0; q < n; q++ {
		out = append(out, fmt.Sprintf("irq_affinity irq %d %s %s", first+q, fmt.Sprintf(nameFmt, q), mask(q)))
	}
	return out
}

func lines(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func is(v string) func(int) string { return func(int) string { return v } }
func cpuOf(f func(int) int) func(int) string {
	return func(q int) string { return cpuset.Of(f(q)).Mask() }
}
func listOf(f func(int) int) func(int) string {
	return func(q int) string { return cpuset.Of(f(q)).List() }
}
func same(q int) int { return q }

type presetCase struct {
	policy map[Mode]string
	want   map[Mode][]string
	hints  map[Mode][]string // hint IDs expected (others may not appear)
}

func presetCases() map[string]presetCase {
	next4 := func(q int) int { return (q + 1) % 4 }
	next8 := func(q int) int { return (q + 1) % 8 }
	next48 := func(q int) int { return (q + 1) % 48 }

	bcmOff := rx("eth0", 1, is("0"))
	bcmLegacy := rx("eth0", 1, is("1")) // get_next_cpu(0.75): CPU0
	bcmAll := rx("eth0", 1, is("3"))

	// ipq807x: one ring per CPU, threaded: thread i on CPU i, RPS i -> i+1;
	// wlan0 (ath11k, no threads) RPS get_next_cpu(0.75) -> CPU0.
	ipq807xLegacy := lines(rx("eth0", 4, cpuOf(next4)), rx("wlan0", 1, is("1")),
		threads(300, "eth0", 257, 4, listOf(same)))
	ipq807xAll := lines(rx("eth0", 4, cpuOf(next4)), rx("wlan0", 1, is("f")),
		threads(300, "eth0", 257, 4, listOf(same)))
	ipq807xOff := lines(rx("eth0", 4, is("0")), rx("wlan0", 1, is("0")),
		threads(300, "eth0", 257, 4, is("0-3")))
	// edma_txcmpl_0 completes tx-0's transmits: it goes where XPS sends
	// tx-0 from.
	ipq807xAuto := lines(rx("eth0", 4, is("0")), tx("eth0", 4, cpuOf(same)), rx("wlan0", 1, is("1")),
		threads(300, "eth0", 257, 4, listOf(same)), irqs(60, "edma_rxdesc_%d", 4, cpuOf(same)),
		irqs(64, "edma_txcmpl_%d", 1, cpuOf(same)))

	// wlan0 RPS -> CPU0 (all idle); wlan1 with loads [.75 0 0 0]: musl's
	// qsort orders the CPUs 2 1 3 0, so CPU2.
	// ipqess: rx threads (PIDs 281, 283, ...) between the tx threads
	// napi/eth0-0 (id 0: not rx tasks, which the stock rule leaves alone).
	ipq40xxLegacy := lines(rx("eth0", 4, cpuOf(next4)), rx("wlan0", 1, is("1")), rx("wlan1", 1, is("4")),
		threadsStep(281, 2, "eth0", 257, 4, listOf(same)))

	// virtio-4q (the real-guest regression): eth0's rx threads
	// napi/eth0-8196..8193 have PIDs 401, 403, 405, 407 (created last queue
	// first), each after its queue's tx thread napi/eth0-0 (PIDs 400, 402,
	// 404, 406: tx-3 .. tx-0). Legacy pairs rx tasks in PID order and
	// leaves tx threads alone; eth1 (one queue) takes the single-queue
	// branch: both its threads on get_next_cpu (CPU0), RPS next (CPU2 with
	// loads [1 0 0 0] in musl's order).
	// eth0's threads in PID order, each with its CPU list in the plan; the
	// tx threads (napi/eth0-0) are listed only where a mode places them.
	vioThreads := func(rx [4]string, tx *[4]string) []string {
		var out []string
		for k := 0; k < 4; k++ { // PIDs 400+2k (tx-(3-k)), 401+2k (rx-(3-k))
			q := 3 - k
			if tx != nil {
				out = append(out, fmt.Sprintf("napi_affinity pid %d napi/eth0-0 %s", 400+2*k, tx[q]))
			}
			out = append(out, fmt.Sprintf("napi_affinity pid %d napi/eth0-%d %s", 401+2*k, 8193+q, rx[q]))
		}
		return out
	}
	vioEth1 := func(napi string) []string {
		return []string{"napi_affinity pid 408 napi/eth1-0 " + napi, "napi_affinity pid 409 napi/eth1-8197 " + napi}
	}
	// Legacy and all: rx tasks in PID order (8196 first) on CPUs 0..3.
	vioStock := [4]string{"3", "2", "1", "0"}
	vioLegacy := lines(rx("eth0", 4, cpuOf(next4)), rx("eth1", 1, is("4")), vioThreads(vioStock, nil), vioEth1("0"))
	vioAll := lines(rx("eth0", 4, cpuOf(next4)), rx("eth1", 1, is("f")), vioThreads(vioStock, nil), vioEth1("0"))
	vioOff := lines(rx("eth0", 4, is("0")), rx("eth1", 1, is("0")),
		vioThreads([4]string{"0-3", "0-3", "0-3", "0-3"}, nil), vioEth1("0-3"))
	// Auto: rss-per-cpu on eth0. rx-q's thread napi/eth0-(8193+q) and
	// virtio0-input.q on CPU q; tx-q's thread (the napi/eth0-0 created
	// right before rx-q's) and virtio0-output.q where XPS sends tx-q from:
	// CPU q.
	vioAuto := lines(rx("eth0", 4, is("0")), tx("eth0", 4, cpuOf(same)), rx("eth1", 1, is("4")),
		vioThreads([4]string{"0", "1", "2", "3"}, &[4]string{"0", "1", "2", "3"}), vioEth1("0"))
	for q := 0; q < 4; q++ {
		vioAuto = append(vioAuto,
			fmt.Sprintf("irq_affinity irq %d virtio0-input.%d %s", 25+2*q, q, cpuset.Of(q).Mask()),
			fmt.Sprintf("irq_affinity irq %d virtio0-output.%d %s", 26+2*q, q, cpuset.Of(q).Mask()))
	}

	// mt7621 (cores 0,0,1,1): eth0 NAPI -> CPU0 [1 .75 0 0]; eth0 RPS ->
	// CPU2 (musl order 2 3 1 0) [1 .75 .75 .5625]; bias [3 2.25 .75 .5625]; wlan0 (phy0, 3
	// threads) NAPI -> CPU3 [3 2.25 1.5 1.5625], RPS -> CPU2
	// [3 2.25 2.25 2.125]; wlan1 (no threads) RPS -> CPU3.
	mtLegacy := lines(rx("eth0", 1, is("4")), rx("wlan0", 1, is("4")), rx("wlan1", 1, is("8")),
		threads(250, "mtk_eth", 257, 2, is("0")), threads(610, "phy0", 259, 3, is("3")))
	// Mode 2: RPS adds no load; bias [3 2.25 0 0]; wlan0 NAPI -> CPU2.
	mtAll := lines(rx("eth0", 1, is("f")), rx("wlan0", 1, is("f")), rx("wlan1", 1, is("f")),
		threads(250, "mtk_eth", 257, 2, is("0")), threads(610, "phy0", 259, 3, is("2")))
	mtOff := lines(rx("eth0", 1, is("0")), rx("wlan0", 1, is("0")), rx("wlan1", 1, is("0")),
		threads(250, "mtk_eth", 257, 2, is("0-3")), threads(610, "phy0", 259, 3, is("0-3")))

	// mochabin: three mvpp2 ports share one bus device, no threads: the
	// single-queue branch puts every queue of every port on one CPU.
	mochaRx := func(mask string) []string {
		return lines(rx("eth0", 4, is(mask)), rx("eth1", 4, is(mask)), rx("eth2", 4, is(mask)))
	}

	// x86-8: no threads: eth0 all queues CPU0; eth1 with loads
	// [.75 0 0 0 0 0 0 0], which musl orders 2 1 4 3 7 5 6 0: CPU2.
	x86Legacy := lines(rx("eth0", 8, is("1")), rx("eth1", 8, is("4")))
	// Auto: rss-per-cpu, but irqbalance runs in both x86 presets, so IRQ
	// placement is left to it (no irq_affinity actions).
	x86Auto := lines(rx("eth0", 8, is("0")), tx("eth0", 8, cpuOf(same)), rx("eth1", 8, is("0")), tx("eth1", 8, cpuOf(same)))
	x86tLegacy := lines(rx("eth0", 8, cpuOf(next8)), rx("eth1", 8, cpuOf(next8)),
		threads(700, "eth0", 8193, 8, listOf(same)), threads(720, "eth1", 8201, 8, listOf(same)))
	x86tAuto := lines(rx("eth0", 8, is("0")), tx("eth0", 8, cpuOf(same)), rx("eth1", 8, is("0")), tx("eth1", 8, cpuOf(same)),
		threads(700, "eth0", 8193, 8, listOf(same)), threads(720, "eth1", 8201, 8, listOf(same)))

	// server-48: eth0 48 queues, 48 threads (PIDs 90..137): thread i on CPU
	// i, RPS i -> i+1 with comma-grouped masks; eth1 (2 queues, no threads)
	// single-queue branch -> CPU0. Auto: rss on eth0; eth1 spread per queue
	// (CPU0; then CPU0 loaded 1 and its sibling CPU24 0.75, which musl
	// orders 2 1 4 3 ...: CPU2).
	srvLegacy := lines(rx("eth0", 48, cpuOf(next48)), rx("eth1", 2, is("1")), threads(90, "eth0", 8193, 48, listOf(same)))
	srvAll := lines(rx("eth0", 48, cpuOf(next48)), rx("eth1", 2, is("ffff,ffffffff")), threads(90, "eth0", 8193, 48, listOf(same)))
	srvOff := lines(rx("eth0", 48, is("0")), rx("eth1", 2, is("0")), threads(90, "eth0", 8193, 48, is("0-47")))
	srvAuto := lines(rx("eth0", 48, is("0")), tx("eth0", 48, cpuOf(same)), rx("eth1", 2, cpuOf(func(q int) int { return 2 * q })),
		threads(90, "eth0", 8193, 48, listOf(same)), irqs(201, "ice-eth0-TxRx-%d", 48, cpuOf(same)))

	stock := func(off, legacy, all []string) (map[Mode]string, map[Mode][]string) {
		return map[Mode]string{ModeOff: PolicyOff, ModeLegacy: PolicyLegacy, ModeAll: PolicyAll},
			map[Mode][]string{ModeOff: off, ModeLegacy: legacy, ModeAll: all}
	}
	mk := func(off, legacy, all, auto []string, autoPolicy string, autoHints ...string) presetCase {
		pol, want := stock(off, legacy, all)
		pol[ModeAuto], pol[ModeCustom] = autoPolicy, autoPolicy
		want[ModeAuto], want[ModeCustom] = auto, auto
		return presetCase{policy: pol, want: want, hints: map[Mode][]string{ModeAuto: autoHints, ModeCustom: autoHints}}
	}
	cases := map[string]presetCase{
		// The bcm53xx commit's best rows.
		"bcm53xx":    mk(bcmOff, bcmLegacy, bcmAll, lines(rx("br-lan", 1, is("2")), rx("eth0", 1, is("0"))), "bcm53xx"),
		"bcm53xx-sw": mk(bcmOff, bcmLegacy, bcmAll, rx("eth0", 1, is("2")), "bcm53xx-sw-offload"),
		"bcm53xx-hw": mk(bcmOff, bcmLegacy, bcmAll, lines(rx("br-lan", 1, is("0")), rx("eth0", 1, is("0"))), "bcm53xx-hw-offload"),
		// One CPU: the stock script exits; auto manages nothing.
		"bcm47081": mk(nil, nil, nil, nil, "single-cpu"),
		"bcm4908": mk(bcmOff, bcmLegacy, rx("eth0", 1, is("f")),
			lines(rx("br-lan", 1, is("e")), rx("eth0", 1, is("e"))), "bcm4908-4cpu"),
		// The ipq807x report.
		"ipq807x": mk(ipq807xOff, ipq807xLegacy, ipq807xAll, ipq807xAuto, "qualcommax-ipq807x", HintSWOffloadHelps),
		"demo":    mk(ipq807xOff, ipq807xLegacy, ipq807xAll, ipq807xAuto, "qualcommax-ipq807x", HintSWOffloadHelps),
		"ipq40xx": mk(
			lines(rx("eth0", 4, is("0")), rx("wlan0", 1, is("0")), rx("wlan1", 1, is("0")), threadsStep(281, 2, "eth0", 257, 4, is("0-3"))),
			ipq40xxLegacy,
			lines(rx("eth0", 4, cpuOf(next4)), rx("wlan0", 1, is("f")), rx("wlan1", 1, is("f")), threadsStep(281, 2, "eth0", 257, 4, listOf(same))),
			ipq40xxLegacy, "ipq40xx"),
		"mt7621":         mk(mtOff, mtLegacy, mtAll, mtAll, "ramips-mt7621"),
		"mochabin":       mk(mochaRx("0"), mochaRx("1"), mochaRx("f"), mochaRx("0"), "mvebu-mochabin"),
		"x86-8":          mk(lines(rx("eth0", 8, is("0")), rx("eth1", 8, is("0"))), x86Legacy, lines(rx("eth0", 8, is("ff")), rx("eth1", 8, is("ff"))), x86Auto, PolicyRSSPerCPU, HintIRQBalance),
		"x86-8-threaded": mk(lines(rx("eth0", 8, is("0")), rx("eth1", 8, is("0")), threads(700, "eth0", 8193, 8, is("0-7")), threads(720, "eth1", 8201, 8, is("0-7"))), x86tLegacy, x86tLegacy, x86tAuto, PolicyRSSPerCPU, HintIRQBalance),
		"server-48":      mk(srvOff, srvLegacy, srvAll, srvAuto, PolicyRSSPerCPU),
		"virtio-4q":      mk(vioOff, vioLegacy, vioAll, vioAuto, PolicyRSSPerCPU),
	}
	for name, c := range boardPresetCases() { // boards_fixture_test.go
		cases[name] = c
	}
	return cases
}

func TestPresetPlans(t *testing.T) {
	cases := presetCases()
	for _, name := range fixture.PresetNames() {
		c, ok := cases[name]
		if !ok {
			t.Errorf("preset %q has no expected plans in this table", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			s := presetSnapshot(t, name)
			for _, mode := range Modes {
				p, err := NewPlan(s, PlanRequest{Mode: mode})
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				// adaptive plans exactly as auto (its deviations come
				// from the engine's loop, not from the snapshot).
				exp := mode
				if mode == ModeAdaptive {
					exp = ModeAuto
				}
				if p.Policy != c.policy[exp] {
					t.Errorf("%s: policy %q, want %q", mode, p.Policy, c.policy[exp])
				}
				if p.Evidence == "" {
					t.Errorf("%s: no evidence", mode)
				}
				sameLines(t, string(mode), render(p.Actions), c.want[exp])
				for _, id := range c.hints[exp] {
					if !hasHint(p, id) {
						t.Errorf("%s: hint %s missing (have %v)", mode, id, hintIDs(p))
					}
				}
				// No hint of the conditional kinds without cause.
				if mode == ModeAuto && len(c.hints[mode]) == 0 {
					for _, h := range p.Hints {
						t.Errorf("%s: unexpected hint %s: %s", mode, h.ID, h.Text)
					}
				}
			}
		})
	}
}

// The live state of a fixture after applying a plan is the plan; planning
// again from it gives a plan where every action holds. Simulated by
// writing each action's value into the snapshot's current values.
func TestPresetPlanIdempotent(t *testing.T) {
	for _, name := range []string{"ipq807x", "mt7621", "x86-8", "server-48", "bcm53xx"} {
		s := presetSnapshot(t, name)
		for _, mode := range Modes {
			p := mustPlan(t, s, mode, 8)
			applied := applyToSnapshot(s, p)
			again := mustPlan(t, applied, mode, 8)
			for _, a := range again.Actions {
				if !a.Holds() {
					t.Errorf("%s %s: %s %s does not hold after apply (%q want %q)", name, mode, a.Kind, a.Target(), a.Current, a.Value)
				}
			}
		}
	}
}

// applyToSnapshot returns a copy of s with the plan's values as the live
// values, formatted as the kernel prints them.
func applyToSnapshot(s *platform.Snapshot, p *Plan) *platform.Snapshot {
	c := *s
	c.Devices = append([]platform.Device(nil), s.Devices...)
	for i := range c.Devices {
		c.Devices[i].RxQueues = append([]platform.RxQueue(nil), s.Devices[i].RxQueues...)
		c.Devices[i].TxQueues = append([]platform.TxQueue(nil), s.Devices[i].TxQueues...)
	}
	c.NAPIThreads = append([]platform.NAPIThread(nil), s.NAPIThreads...)
	c.IRQs = append([]platform.IRQ(nil), s.IRQs...)
	n := len(s.CPUs)
	kernel := func(mask string) string {
		set, _ := cpuset.ParseMask(mask)
		return set.KernelMask(n)
	}
	for _, a := range p.Actions {
		switch a.Kind {
		case KindRPSCPUs, KindRPSFlowCnt, KindXPSCPUs:
			for i := range c.Devices {
				d := &c.Devices[i]
				if d.Name != a.Device {
					continue
				}
				for j := range d.RxQueues {
					if d.RxQueues[j].Name == a.Queue {
						if a.Kind == KindRPSCPUs {
							d.RxQueues[j].RPSCPUs = kernel(a.Value)
						} else {
							fmt.Sscan(a.Value, &d.RxQueues[j].RPSFlowCnt)
						}
					}
				}
				for j := range d.TxQueues {
					if d.TxQueues[j].Name == a.Queue {
						d.TxQueues[j].XPSCPUs = kernel(a.Value)
					}
				}
			}
		case KindNAPIAffinity:
			for i := range c.NAPIThreads {
				if c.NAPIThreads[i].PID == a.PID {
					c.NAPIThreads[i].CPUs = a.Value
				}
			}
		case KindIRQAffinity:
			for i := range c.IRQs {
				if c.IRQs[i].Number == a.IRQ {
					c.IRQs[i].SMPAffinity = kernel(a.Value)
				}
			}
		case KindSysctl:
			fmt.Sscan(a.Value, &c.RPSSockFlowEntries)
		}
	}
	return &c
}
