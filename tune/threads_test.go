package tune

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
)

func TestParseThreadCandidates(t *testing.T) {
	for _, tc := range []struct {
		in      string
		names   []string
		threads []deviceMask
		err     string
	}{
		{in: "phy0-ap0:threads=2", names: []string{"phy0-ap0:threads=2"}, threads: []deviceMask{{"phy0-ap0", "2"}}},
		// The list is kept in the kernel's canonical form.
		{in: "eth0:threads=3,0-2", names: []string{"eth0:threads=0-3"}, threads: []deviceMask{{"eth0", "0-3"}}},
		{in: "eth0:2/eth0:threads=1 auto", names: []string{"eth0:2/eth0:threads=1", "auto"}, threads: []deviceMask{{"eth0", "1"}}},
		{in: "eth0:threads=", err: "an empty cpu list"},
		{in: "eth0:threads=x", err: "want a cpu list"},
		{in: "eth0:threads=1/eth0:threads=2", err: "given threads= twice"},
		{in: "eth0:threads=1 eth0:threads=1", err: "given twice"},
	} {
		cs, err := parseCandidates(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		if !reflect.DeepEqual(names, tc.names) || !reflect.DeepEqual(cs[0].Threads, tc.threads) || cs[0].Mode != plan.ModeCustom {
			t.Errorf("%q: %v %+v", tc.in, names, cs[0])
		}
	}
}

// bpiSnap is the BPI-R4 preset (MT7988A with an MT7996 radio: six rx
// NAPI threads of phy0 and the mtk_eth threads), read by the engine.
func bpiSnap(t *testing.T) (string, *platform.Snapshot) {
	t.Helper()
	root := fixturetest.Root(t, "bpi-r4", nil)
	snap, err := steering.NewEngine(root).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return root, snap
}

func TestPlanThreadCandidate(t *testing.T) {
	_, snap := bpiSnap(t)
	phy := plan.DeviceThreads(snap, "phy0-ap0")
	if len(phy) < 6 {
		t.Fatalf("phy0-ap0's threads: %v", phy)
	}
	auto, err := planCandidate(snap, modeCandidate(plan.ModeAuto))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planCandidate(snap, mustCandidates(t, "phy0-ap0:threads=1")[0])
	if err != nil {
		t.Fatal(err)
	}
	mine := map[int]bool{}
	for _, th := range phy {
		mine[th.PID] = true
	}
	for _, a := range p.Actions {
		switch {
		case a.Kind == plan.KindNAPIAffinity && mine[a.PID]:
			if a.Value != "1" {
				t.Errorf("%s on %s, want 1", a.Thread, a.Value)
			}
			delete(mine, a.PID)
		case a.Kind == plan.KindRPSCPUs:
			// The masks stay as auto plans them.
			if !slices.ContainsFunc(auto.Actions, func(b plan.Action) bool { return knobKey(b) == knobKey(a) && b.Value == a.Value }) {
				t.Errorf("rps %s = %s, not auto's", a.Target(), a.Value)
			}
		}
	}
	if len(mine) > 0 {
		t.Errorf("threads left unplaced: %v", mine)
	}
	for _, c := range []struct{ cand, why string }{
		{"br-lan:threads=1", "br-lan has no NAPI threads here"},
		{"phy0-ap0:threads=7", "do not exist here"},
		{"nosuch0:threads=1", ""},
	} {
		_, err := planCandidate(snap, mustCandidates(t, c.cand)[0])
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: err = %v, want ErrInvalid with %q", c.cand, err, c.why)
		}
	}
}

func TestThreadCandidates(t *testing.T) {
	_, snap := bpiSnap(t)
	o := DefaultOptions()
	o.MaxConfigs = 100
	var buf bytes.Buffer
	cs, err := o.threadCandidates(snap, nil, &buf)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	// One device per set of threads: phy0's three interfaces share
	// them, so only phy0-ap0 is swept.
	devs := map[string]bool{}
	for _, c := range cs[2:] {
		devs[c.Threads[0].Device] = true
	}
	if len(devs) < 2 || !devs["phy0-ap0"] || devs["phy0-ap1"] {
		t.Fatalf("devices %v", devs)
	}
	if len(cs) != 2+5*len(devs) || names[0] != "auto" || names[1] != "legacy" {
		t.Errorf("candidates %v", names)
	}
	// Named devices are swept as named.
	if cs, err := o.threadCandidates(snap, []string{"phy0-ap1"}, &buf); err != nil || len(cs) != 7 || cs[6].Name != "phy0-ap1:threads=0-3" {
		t.Errorf("phy0-ap1: %v, %v", cs, err)
	}
	for _, want := range []string{"phy0-ap0:threads=0", "phy0-ap0:threads=3", "phy0-ap0:threads=0-3"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in %v", want, names)
		}
	}
	// Every generated candidate plans.
	for _, c := range cs {
		if _, err := planCandidate(snap, c); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
	o.MaxConfigs = 4
	if cs, err := o.threadCandidates(snap, []string{"phy0-ap0"}, &buf); err != nil || len(cs) != 4 || !strings.Contains(buf.String(), "leaves out 3 thread candidates") {
		t.Errorf("capped: %d %v\n%s", len(cs), err, buf.String())
	}
	// A named device without threads: its candidates do not plan.
	if cs, err := o.threadCandidates(snap, []string{"br-lan"}, &buf); err != nil {
		t.Error(err)
	} else if _, err := planCandidate(snap, cs[2]); !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), "br-lan has no NAPI threads") {
		t.Errorf("%s: %v", cs[2].Name, err)
	}
	if _, err := o.threadCandidates(&platform.Snapshot{}, nil, &buf); err == nil {
		t.Error("no threads anywhere: no error")
	}
}

// A thread candidate applied on the fixture puts the threads there; a
// mode candidate measured after it gets the threads back where they were
// wherever its plan leaves them alone (padNAPIKnobs), and the restore
// leaves the fixture as it was.
func TestThreadCandidateApplyRestore(t *testing.T) {
	root, _ := bpiSnap(t)
	before := digest(t, root)
	eng := steering.NewEngine(root)
	st := newMachine(eng, steering.NewFSWriter(root))
	cands := mustCandidates(t, "phy0-ap0:threads=2 auto phy0-ap0:threads=0-3")
	if _, err := st.Prepare(context.Background(), cands); err != nil {
		t.Fatal(err)
	}
	threadCPUs := func() map[string]string {
		snap, err := eng.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, th := range plan.DeviceThreads(snap, "phy0-ap0") {
			out[th.Name] = th.CPUs
		}
		return out
	}
	if err := st.Apply(context.Background(), cands[0]); err != nil {
		t.Fatal(err)
	}
	for name, cpus := range threadCPUs() {
		if cpus != "2" {
			t.Errorf("after %s: %s on %s", cands[0].Name, name, cpus)
		}
	}
	if err := st.Apply(context.Background(), cands[1]); err != nil {
		t.Fatal(err)
	}
	spread := map[string]bool{}
	for _, cpus := range threadCPUs() {
		spread[cpus] = true
	}
	if len(spread) < 2 {
		t.Errorf("after auto the threads are all on %v (auto spreads them)", spread)
	}
	if err := st.Apply(context.Background(), cands[2]); err != nil {
		t.Fatal(err)
	}
	for name, cpus := range threadCPUs() {
		if cpus != "0-3" {
			t.Errorf("after %s: %s on %s", cands[2].Name, name, cpus)
		}
	}
	res, err := st.Restore(context.Background())
	if err != nil || !res.Verified {
		t.Fatalf("restore %+v: %v", res, err)
	}
	diffDigest(t, before, digest(t, root))
}

func TestThreadOptions(t *testing.T) {
	for _, tc := range []struct {
		set  func(*Options)
		want string
	}{
		{func(o *Options) { o.Threads, o.Candidates = true, "auto" }, "--threads generates its candidates"},
		{func(o *Options) { o.Threads, o.NAPI = true, true }, "exclude each other"},
	} {
		o := DefaultOptions()
		o.Target = "198.18.0.2"
		tc.set(&o)
		if err := o.Check(); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check = %v, want %q", err, tc.want)
		}
	}
}

func TestSaveRefusesThreadCandidate(t *testing.T) {
	root, _ := bpiSnap(t)
	before := digest(t, root)
	_, err := saveCandidate(context.Background(), steering.NewEngine(root), root+"/etc/config", mustCandidates(t, "phy0-ap0:threads=1")[0])
	if err == nil || !strings.Contains(err.Error(), "napi_cpus '1'") {
		t.Errorf("save: %v", err)
	}
	diffDigest(t, before, digest(t, root))
}
