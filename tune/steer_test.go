package tune

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
	"golang.org/x/sys/unix"
)

// digest reads every regular file below root/sys and root/proc: the
// whole machine state the applier could have touched.
func digest(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, top := range []string{"sys", "proc"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[strings.TrimPrefix(p, root)] = string(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func diffDigest(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: was %q, now %q", k, v, after[k])
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d files before, %d after", len(before), len(after))
	}
}

// faultWriter fails writes to one path (and counts them).
type faultWriter struct {
	*steering.FSWriter
	failPath string
	fails    int
}

func (w *faultWriter) WriteKnob(rel, value string) error {
	if rel == w.failPath {
		w.fails++
		return &fs.PathError{Op: "write", Path: rel, Err: unix.EINVAL}
	}
	return w.FSWriter.WriteKnob(rel, value)
}

func mustCandidates(t *testing.T, s string) []candidate {
	t.Helper()
	cs, err := parseCandidates(s)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestEngineApplyRestoreOnFixture(t *testing.T) {
	root := fixturetest.Root(t, "bcm53xx", nil)
	before := digest(t, root)
	eng := steering.NewEngine(root)
	st := newMachine(eng, steering.NewFSWriter(root))
	cands := mustCandidates(t, "off;legacy;all;auto;eth0:2/br-lan:1;br-lan:2/eth0:0")
	prep, err := st.Prepare(context.Background(), cands)
	if err != nil {
		t.Fatal(err)
	}
	// The last candidate is the bcm53xx profile's own choice: same plan
	// as auto, and said so.
	if want := []string{"", "", "", "", "", "auto"}; !reflect.DeepEqual(prep.SameAs, want) {
		t.Errorf("same-as %q, want %q", prep.SameAs, want)
	}
	if !reflect.DeepEqual(prep.Devices, []string{"br-lan", "eth0"}) {
		t.Fatalf("devices %v", prep.Devices)
	}
	// The bcm53xx profile (docs/platforms.md) (auto): br-lan 2, eth0 0; the custom
	// candidate: br-lan 1, eth0 2.
	if got := prep.Masks[3]; !reflect.DeepEqual(got, []string{"2", "0"}) {
		t.Errorf("auto masks %v", got)
	}
	if got := prep.Masks[4]; !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Errorf("custom masks %v", got)
	}
	if unchanged := digest(t, root); !reflect.DeepEqual(unchanged, before) {
		t.Fatal("Prepare changed the machine")
	}
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	if err := st.Apply(context.Background(), cands[4]); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(rps); !cpuset.SameMask(strings.TrimSpace(string(b)), "2") {
		t.Errorf("after apply eth0 rps_cpus = %q", b)
	}
	res, err := st.Restore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || res.Changed == 0 || res.Knobs != prep.Knobs {
		t.Errorf("restore %+v (prepared %d knobs)", res, prep.Knobs)
	}
	diffDigest(t, before, digest(t, root))
}

func TestEngineApplyFailureThenRestore(t *testing.T) {
	root := fixturetest.Root(t, "ipq807x", nil)
	before := digest(t, root)
	eng := steering.NewEngine(root)
	w := &faultWriter{FSWriter: steering.NewFSWriter(root), failPath: "sys/class/net/eth0/queues/rx-2/rps_cpus"}
	st := newMachine(eng, w)
	cands := mustCandidates(t, "legacy;eth0:e;auto")
	if _, err := st.Prepare(context.Background(), cands); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(context.Background(), cands[0]); err == nil || !strings.Contains(err.Error(), "eth0/rx-2") {
		t.Fatalf("apply with a failing knob: err = %v", err)
	}
	if err := st.Apply(context.Background(), cands[1]); err == nil {
		t.Fatal("second apply with a failing knob succeeded")
	}
	// The failed applies were rolled back per device: nothing to restore
	// on eth0, and the check agrees.
	if res, err := st.Restore(context.Background()); err != nil || !res.Verified {
		t.Fatalf("restore after failed applies: %+v, %v", res, err)
	}
	diffDigest(t, before, digest(t, root))
	// A knob that cannot be written back: the others are, and the error
	// names the one that is not.
	w.failPath = ""
	if err := st.Apply(context.Background(), cands[0]); err != nil {
		t.Fatal(err)
	}
	w.failPath = "sys/class/net/eth0/queues/rx-2/rps_cpus"
	res, err := st.Restore(context.Background())
	if err == nil || !strings.Contains(err.Error(), "eth0/rx-2") || res.Verified {
		t.Fatalf("restore with a failing knob: %+v, %v", res, err)
	}
	after := digest(t, root)
	for k, v := range before {
		if after[k] != v && !strings.HasSuffix(k, "eth0/queues/rx-2/rps_cpus") {
			t.Errorf("%s not restored: was %q, now %q", k, v, after[k])
		}
	}
	w.failPath = ""
	if _, err := st.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	diffDigest(t, before, digest(t, root))
}

// A whole sweep on a fixture with the real applier whose load fails in
// the middle: the fixture is back as it was.
func TestSweepLoadErrorRestoresFixture(t *testing.T) {
	root := fixturetest.Root(t, "ipq807x", nil)
	before := digest(t, root)
	eng := steering.NewEngine(root)
	st := newMachine(eng, steering.NewFSWriter(root))
	runs := 0
	load := loadFunc(func(ctx context.Context, run int) (measurement, error) {
		runs++
		if runs == 4 {
			return measurement{}, errors.New("iperf3: the server went away")
		}
		return measurement{Throughput: 1e8, Unit: unitBPS}, nil
	})
	s := &sweep{Candidates: mustCandidates(t, "off;legacy;all;eth0:1"), Runs: 2, Load: load, Steerer: st,
		Counters: fakeCounters()}
	rep, err := s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "server went away") {
		t.Fatalf("err = %v", err)
	}
	if !rep.Restore.Verified {
		t.Errorf("restore %+v", rep.Restore)
	}
	diffDigest(t, before, digest(t, root))
}

type loadFunc func(ctx context.Context, run int) (measurement, error)

func (f loadFunc) Run(ctx context.Context, run int) (measurement, error) { return f(ctx, run) }
func (f loadFunc) Estimate() time.Duration                               { return time.Second }
func (f loadFunc) String() string                                        { return "func" }

func TestPlanCandidateRefusesUnknownDevice(t *testing.T) {
	root := fixturetest.Root(t, "bcm53xx", nil)
	snap, err := steering.NewEngine(root).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"eth9:1", "eth0:2/wan9:1"} {
		_, err := planCandidate(snap, mustCandidates(t, c)[0])
		if !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", c, err)
		}
	}
}

func TestLayoutFor(t *testing.T) {
	root := fixturetest.Root(t, "bcm53xx", nil)
	snap, err := steering.NewEngine(root).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var plans []*plan.Plan
	for _, m := range sweepModes() {
		p, err := planCandidate(snap, modeCandidate(m))
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	l := layoutFor(snap, plans, nil)
	// eth0's IRQ 38 is allowed on both CPUs but ran only on CPU0.
	if !reflect.DeepEqual(l.CPUs, []int{0, 1}) || !reflect.DeepEqual(l.Devices, []string{"br-lan", "eth0"}) ||
		!reflect.DeepEqual(l.RxCPUs, map[string][]int{"eth0": {0}}) {
		t.Errorf("layout %+v", l)
	}
	cands, _ := generate(sweepModes(), l, 13)
	if len(cands) != 13 || cands[4].Name != "br-lan:0/eth0:0" {
		t.Errorf("generated %v", names(cands))
	}
	if l := layoutFor(snap, plans, []string{"eth0"}); !reflect.DeepEqual(l.Devices, []string{"eth0"}) {
		t.Errorf("--devices layout %+v", l)
	}
}
