package tune

import (
	"context"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
)

// The adaptive candidate: its engine applies the auto plan, its loop runs
// until the next candidate, and the restore puts every knob back. The
// fixture's counters do not move, so the loop samples and moves nothing.
func TestMachineAdaptiveCandidate(t *testing.T) {
	root := fixturetest.Root(t, "ipq807x", nil)
	eng := steering.NewEngine(root)
	st := newMachine(eng, steering.NewFSWriter(root))
	st.Adaptive = steering.NewEngine(root, steering.WithLockDir(t.TempDir()))
	cfg := adaptive.DefaultConfig()
	cfg.Interval, cfg.MaxIdleInterval = 10*time.Millisecond, 40*time.Millisecond
	st.AdaptiveConfig = cfg
	testenv.WriteTree(t, root, map[string]string{
		"proc/stat":     "cpu0 1 0 1 5 0 0 2 0\ncpu1 1 0 1 5 0 0 2 0\ncpu2 1 0 1 5 0 0 2 0\ncpu3 1 0 1 5 0 0 2 0\n",
		"proc/softirqs": "  CPU0 CPU1 CPU2 CPU3\n NET_RX: 1 2 3 4\n",
	})
	before := digest(t, root)
	cands := mustCandidates(t, "off;adaptive")
	if _, err := st.Prepare(context.Background(), cands); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(context.Background(), cands[1]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	stat, err := st.Adaptive.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if stat.Mode != plan.ModeAdaptive || stat.Adaptive.Sampling == nil || !stat.Adaptive.Sampling.Running || stat.Adaptive.Sampling.Wakeups < 2 {
		t.Fatalf("adaptive candidate: mode %s, loop %+v", stat.Mode, stat.Adaptive.Sampling)
	}
	// The next candidate stops the loop.
	if err := st.Apply(context.Background(), cands[0]); err != nil {
		t.Fatal(err)
	}
	stat, _ = st.Adaptive.Status(context.Background())
	if stat.Adaptive.Sampling.Running {
		t.Error("loop still running after the next candidate")
	}
	if st.Moves["adaptive"] != 0 {
		t.Errorf("%d moves with counters that do not move", st.Moves["adaptive"])
	}
	if _, err := st.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	diffDigest(t, before, digest(t, root))
}
