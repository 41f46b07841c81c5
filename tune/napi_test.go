package tune

import (
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

func TestParseNAPICandidates(t *testing.T) {
	for _, tc := range []struct {
		in, name, err string
		napi          []deviceNAPI
	}{
		{in: "eth0:napi=2,20000", name: "eth0:napi=2,20000", napi: []deviceNAPI{{"eth0", "2", "20000"}}},
		{in: "eth0:2/eth0:napi=0,0200000", name: "eth0:2/eth0:napi=0,200000", napi: []deviceNAPI{{"eth0", "0", "200000"}}},
		{in: "eth0:napi=2", err: "want napi=DEFER_HARD_IRQS,GRO_FLUSH_TIMEOUT_NS"},
		{in: "eth0:napi=2,x", err: "(gro-flush-timeout"},
		{in: "eth0:napi=2147483648,0", err: "(defer-hard-irqs"},
		{in: "eth0:napi=0,1000000001", err: "(gro-flush-timeout"},
		{in: "eth0:napi=1,1/eth0:napi=2,2", err: "napi= twice"},
	} {
		cs, err := parseCandidates(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(cs) != 1 || cs[0].Name != tc.name || cs[0].Mode != plan.ModeCustom || len(cs[0].NAPI) != len(tc.napi) || cs[0].NAPI[0] != tc.napi[0] {
			t.Errorf("%q: %+v %v", tc.in, cs, err)
		}
		// The name parses back to the same candidate.
		if back, err := parseCandidates(cs[0].Name); err != nil || back[0].Name != cs[0].Name {
			t.Errorf("%q: name %q does not parse back: %v", tc.in, cs[0].Name, err)
		}
	}
}

func TestNAPIGrid(t *testing.T) {
	g := napiGrid([]string{"eth0", "eth1"})
	if len(g) != 12 || g[0].Name != "eth0:napi=0,0" || g[1].Name != "eth0:napi=2,0" || g[5].Name != "eth0:napi=2,200000" || g[6].Name != "eth1:napi=0,0" {
		var names []string
		for _, c := range g {
			names = append(names, c.Name)
		}
		t.Errorf("grid %v", names)
	}
}

// napiSnap is a machine with eth0's two NAPIs as a 6.13+ kernel reports
// them (napiSet) or as 6.12 does.
func napiSnap(napiSet bool) *platform.Snapshot {
	s := &platform.Snapshot{Root: "/", CPUs: []platform.CPU{{ID: 0, Online: true}, {ID: 1, Online: true}}}
	s.Devices = []platform.Device{{Name: "eth0", Kind: platform.KindEthernet, Driver: "igc", BusDevice: "sys/devices/pci0000:00/0000:00:01.0",
		RxQueues: []platform.RxQueue{{Index: 0, Name: "rx-0", RPSCPUs: "0", NAPIID: 10}, {Index: 1, Name: "rx-1", RPSCPUs: "0", NAPIID: 11}},
		TxQueues: []platform.TxQueue{{Index: 0, Name: "tx-0", XPSCPUs: "0"}}}}
	nl := &platform.NetlinkInfo{Status: "ok", Ops: []string{"queue-get", "napi-get"}}
	for _, id := range []int{10, 11} {
		n := platform.NAPI{ID: id, Device: "eth0", IRQ: -1}
		if napiSet {
			d, g := uint32(0), uint64(0)
			n.DeferHardIRQs, n.GROFlushTimeoutNS = &d, &g
		}
		nl.NAPIs = append(nl.NAPIs, n)
	}
	if napiSet {
		nl.Ops = append(nl.Ops, "napi-set")
	}
	s.Netlink = nl
	return s
}

func TestPlanNAPICandidate(t *testing.T) {
	c := customCandidateWith(nil, []deviceNAPI{{"eth0", "2", "20000"}})
	p, err := planCandidate(napiSnap(true), c)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range p.Actions {
		if plan.IsNAPIKnob(a.Kind) {
			got[knobKey(a)] = a.Value
		}
	}
	if len(got) != 4 || got["napi_defer_hard_irqs eth0 napi 10 (rx-0)"] != "2" || got["napi_gro_flush_timeout eth0 napi 11 (rx-1)"] != "20000" {
		t.Errorf("per-NAPI actions %v", got)
	}
	// A kernel without napi-set: the candidate is refused with the reason.
	if _, err := planCandidate(napiSnap(false), c); err == nil || !strings.Contains(err.Error(), "not supported by this kernel") {
		t.Errorf("6.12: %v", err)
	}
	var buf strings.Builder
	o := DefaultOptions()
	if cs, err := o.napiCandidates(napiSnap(true), nil, &buf); err != nil || len(cs) != 7 || cs[6].Name != "eth0:napi=2,200000" {
		t.Errorf("napiCandidates: %v %v", cs, err)
	}
	if _, err := o.napiCandidates(&platform.Snapshot{}, nil, &buf); err == nil {
		t.Error("napiCandidates without NAPIs: no error")
	}
}

func TestPadNAPIKnobs(t *testing.T) {
	s := napiSnap(true)
	plans := map[string]*plan.Plan{}
	for _, c := range []candidate{modeCandidate(plan.ModeAuto), customCandidateWith(nil, []deviceNAPI{{"eth0", "2", "20000"}}),
		customCandidateWith(nil, []deviceNAPI{{"eth0", "0", "0"}})} {
		p, err := planCandidate(s, c)
		if err != nil {
			t.Fatal(err)
		}
		plans[c.Name] = p
	}
	padNAPIKnobs(plans)
	// auto now puts the knobs back to what they were (0): the same plan
	// as eth0:napi=0,0.
	if a, b := planSignature(plans["auto"]), planSignature(plans["eth0:napi=0,0"]); a != b {
		t.Errorf("auto padded:\n%s\nwant the plan of eth0:napi=0,0:\n%s", a, b)
	}
	if planSignature(plans["auto"]) == planSignature(plans["eth0:napi=2,20000"]) {
		t.Error("padding overwrote a candidate's own knobs")
	}
}

func TestInterruptTotal(t *testing.T) {
	const interrupts = `           CPU0       CPU1
  0:         36          0   IO-APIC   2-edge      timer
 24:       1000       2000   PCI-MSIX-0000:00:03.0   1-edge      virtio0-input.0
 25:          5          0   PCI-MSIX-0000:00:03.0   2-edge      virtio0-output.0
NMI:          7          9   Non-maskable interrupts
LOC:      99999      99999   Local timer interrupts
ERR:          0
`
	if got := interruptTotal([]byte(interrupts)); got != 36+3000+5 {
		t.Errorf("total %d, want %d", got, 36+3000+5)
	}
	if got := interruptTotal([]byte("garbage\n 1: x\n")); got != 0 {
		t.Errorf("garbage: %d", got)
	}
}

func TestNAPIOptionsCheck(t *testing.T) {
	o := DefaultOptions()
	o.Target, o.NAPI, o.Candidates = "198.18.0.1", true, "auto"
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), "--napi") {
		t.Errorf("--napi with --candidates: %v", err)
	}
}
