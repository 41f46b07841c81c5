package plan

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// machine is a small in-memory snapshot builder for tests.
type machine struct{ s platform.Snapshot }

// newMachine has n online CPUs; cores[i] is CPU i's core_id (default i).
func newMachine(n int, cores ...int) *machine {
	m := &machine{s: platform.Snapshot{Root: "/", RPSSockFlowEntries: 0}}
	for i := 0; i < n; i++ {
		core := i
		if i < len(cores) {
			core = cores[i]
		}
		m.s.CPUs = append(m.s.CPUs, platform.CPU{ID: i, Core: core, Package: 0, Online: true})
	}
	return m
}

func (m *machine) target(t string) *machine { m.s.Identity.Target = t; return m }
func (m *machine) offload(sw, hw string) *machine {
	m.s.Config.FlowOffloading, m.s.Config.FlowOffloadingHW = sw, hw
	return m
}

// dev adds a netdev with rx and tx queues; live RPS masks "0".
func (m *machine) dev(name, kind, bus, driver string, rx, tx int) *platform.Device {
	d := platform.Device{Name: name, Kind: kind, BusDevice: bus, Driver: driver}
	for i := 0; i < rx; i++ {
		d.RxQueues = append(d.RxQueues, platform.RxQueue{Index: i, Name: fmt.Sprintf("rx-%d", i), RPSCPUs: "0"})
	}
	for i := 0; i < tx; i++ {
		d.TxQueues = append(d.TxQueues, platform.TxQueue{Index: i, Name: fmt.Sprintf("tx-%d", i), XPSCPUs: "0"})
	}
	m.s.Devices = append(m.s.Devices, d)
	return &m.s.Devices[len(m.s.Devices)-1]
}

func (m *machine) eth(name, bus, driver string, rx, tx int) *machine {
	m.dev(name, platform.KindEthernet, bus, driver, rx, tx)
	return m
}

func (m *machine) wifi(name, bus string, phyIndex int) *machine {
	d := m.dev(name, platform.KindWifi, bus, "mt7603e", 1, 4)
	d.Phy, d.PhyIndex = fmt.Sprintf("phy%d", phyIndex), phyIndex
	return m
}

func (m *machine) dsaUser(name, conduit string) *machine {
	d := m.dev(name, platform.KindDSAUser, "sys/devices/platform/switch", "b53", 1, 1)
	d.Lowers = []string{conduit}
	return m
}

func (m *machine) bridge(name string, ports ...string) *machine {
	d := m.dev(name, platform.KindBridge, "", "", 1, 1)
	d.BridgePorts = ports
	return m
}

func (m *machine) thread(pid int, name string) *machine {
	owner := strings.TrimPrefix(name, "napi/")
	id := 0
	if i := strings.LastIndexByte(owner, '-'); i >= 0 {
		id, _ = strconv.Atoi(owner[i+1:])
		owner = owner[:i]
	}
	// The device link platform.Read would make: a netdev named like the
	// owner (threads of mtk_eth and of wifi phys need the whole snapshot).
	dev := ""
	if owner != "mtk_eth" && !strings.HasPrefix(owner, "phy") {
		dev = owner
	}
	m.s.NAPIThreads = append(m.s.NAPIThreads, platform.NAPIThread{PID: pid, Name: name, Owner: owner, Device: dev, NAPIID: id, CPUs: "0-" + fmt.Sprint(len(m.s.CPUs)-1)})
	return m
}

func (m *machine) irq(n int, name, dev string, queue int) *machine {
	m.s.IRQs = append(m.s.IRQs, platform.IRQ{Number: n, Name: name, Device: dev, Queue: queue, SMPAffinity: "f"})
	return m
}

func (m *machine) snap() *platform.Snapshot {
	s := m.s
	return &s
}

// render writes actions as "kind target value" lines: the tables' language.
func render(acts []Action) []string {
	out := make([]string, len(acts))
	for i, a := range acts {
		out[i] = string(a.Kind) + " " + a.Target() + " " + a.Value
	}
	return out
}

// plan runs NewPlan with a mode and optional flows, failing on error.
func mustPlan(t *testing.T, s *platform.Snapshot, mode Mode, flows ...int) *Plan {
	t.Helper()
	req := PlanRequest{Mode: mode}
	if len(flows) > 0 {
		req.Flows = &flows[0]
	}
	p, err := NewPlan(s, req)
	if err != nil {
		t.Fatalf("NewPlan(%s): %v", mode, err)
	}
	return p
}

// sameLines reports the first difference between two action listings.
func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return
	}
	t.Errorf("%s: actions differ\n--- got\n%s\n--- want\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
}

func hintIDs(p *Plan) []string {
	var ids []string
	for _, h := range p.Hints {
		ids = append(ids, h.ID)
	}
	return ids
}

func hasHint(p *Plan, id string) bool {
	for _, h := range p.Hints {
		if h.ID == id {
			return true
		}
	}
	return false
}

// masks of single CPUs, for readable expectations.
func cpuMask(c int) string { return cpuset.Of(c).Mask() }
