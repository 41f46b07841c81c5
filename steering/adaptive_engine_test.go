package steering

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// adaptiveEngine is an ipq807x fixture engine in adaptive mode: eth0 has 4
// rings, ring i's NAPI thread and IRQ on CPU i.
func adaptiveEngine(t *testing.T) (*Engine, string) {
	t.Helper()
	root := fixturetest.Root(t, "ipq807x", nil)
	e := NewEngine(root, WithClock(func() time.Time { return time.Unix(1700000000, 0) }))
	res, err := e.SetMode(context.Background(), SetModeRequest{Mode: plan.ModeAdaptive, Persist: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != plan.ModeAdaptive || len(res.Failed) > 0 {
		t.Fatalf("set_mode adaptive: %+v", res)
	}
	return e, root
}

func TestAdaptivePlansAsAuto(t *testing.T) {
	ctx := context.Background()
	e, root := adaptiveEngine(t)
	b, err := os.ReadFile(filepath.Join(root, "etc/config/packet_steering"))
	if err != nil || !strings.Contains(string(b), "option mode 'adaptive'") {
		t.Fatalf("UCI after set_mode adaptive: %v\n%s", err, b)
	}
	snap, p, err := e.Plan(ctx, plan.PlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	auto, err := plan.NewPlan(snap, plan.PlanRequest{Mode: plan.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != plan.ModeAdaptive || p.Policy != auto.Policy {
		t.Errorf("adaptive plan without deviations: mode %s policy %s, want adaptive and auto's %s", p.Mode, p.Policy, auto.Policy)
	}
	if d := testenv.Diff(auto.Actions, p.Actions); d != "" {
		t.Errorf("adaptive plan without deviations differs from auto (-auto +adaptive):\n%s", d)
	}
	units := adaptive.Units(snap, p)
	var got []string
	for _, u := range units {
		got = append(got, u.Key()+" "+u.Kind+" "+string(rune('0'+u.Home)))
	}
	// eth0's rings are NAPI units (RPS off); wlan0's one queue has RPS
	// on one CPU.
	want := []string{"eth0/rx-0 napi 0", "eth0/rx-1 napi 1", "eth0/rx-2 napi 2", "eth0/rx-3 napi 3", "wlan0/rx-0 rps 0"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("units %v, want %v", got, want)
	}
}

func TestAdaptMovesThroughTheEngine(t *testing.T) {
	ctx := context.Background()
	e, root := adaptiveEngine(t)
	move := adaptive.Move{Device: "eth0", Queue: "rx-1", Kind: adaptive.UnitNAPI, From: 1, To: 0, Home: 1, Reason: "cpu1 saturated (time_squeeze 50/s)"}
	res, err := e.Adapt(ctx, []adaptive.Move{move})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, a := range res.Changed {
		kinds = append(kinds, string(a.Kind)+" "+a.Value)
	}
	if strings.Join(kinds, ",") != "napi_affinity 0,irq_affinity 1" {
		t.Errorf("changed %v, want the thread and the IRQ of rx-1 on CPU 0", kinds)
	}
	// The thread really moved (the fixture's status file), and a plain
	// apply keeps the deviation.
	qs, err := e.Queues(ctx, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	rx1 := qs[0].Rx[1]
	if rx1.NAPI.CPUs != "0" || rx1.IRQ.CPUs != "0" || rx1.Adaptive == nil || rx1.Adaptive.Home != 1 || !strings.Contains(rx1.Adaptive.Reason, "time_squeeze") {
		t.Errorf("rx-1 after the move: napi %+v irq %+v adaptive %+v", rx1.NAPI, rx1.IRQ, rx1.Adaptive)
	}
	if qs[0].Rx[0].Adaptive != nil {
		t.Errorf("rx-0 marked deviated: %+v", qs[0].Rx[0].Adaptive)
	}
	again, err := e.Apply(ctx, ApplyRequest{Reason: "hotplug"})
	if err != nil || len(again.Changed) != 0 {
		t.Errorf("apply after the move changed %v (%v), want nothing", again.Changed, err)
	}
	st, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != plan.ModeAdaptive || st.Adaptive == nil || len(st.Adaptive.Deviations) != 1 || len(st.Adaptive.Moves) != 1 || !st.InSync {
		t.Fatalf("status %+v adaptive %+v", st, st.Adaptive)
	}
	if m := st.Adaptive.Moves[0]; m.Changed != 2 || m.Error != "" || m.To != 0 {
		t.Errorf("move record %+v", m)
	}
	if st.LastApply.Reason != "hotplug" {
		t.Errorf("last apply reason %q", st.LastApply.Reason)
	}
	if got := adaptive.Reason([]adaptive.Move{move}); got != "adaptive: eth0/rx-1 napi cpu1->cpu0: cpu1 saturated (time_squeeze 50/s)" {
		t.Errorf("reason %q", got)
	}

	// Back home: the deviation goes, the auto placement returns.
	back := adaptive.Move{Device: "eth0", Queue: "rx-1", Kind: adaptive.UnitNAPI, From: 0, To: 1, Home: 1, Reason: "no traffic"}
	if _, err := e.Adapt(ctx, []adaptive.Move{back}); err != nil {
		t.Fatal(err)
	}
	if d := e.Deviations(); len(d) != 0 {
		t.Errorf("deviations after the move back: %+v", d)
	}

	// Bad moves change nothing: a CPU that does not exist, any move in
	// another mode.
	before := readTree(t, root)
	if _, err := e.Adapt(ctx, []adaptive.Move{{Device: "eth0", Queue: "rx-1", Kind: adaptive.UnitNAPI, From: 1, To: 9, Home: 1}}); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("move to cpu9: %v, want ErrInvalid", err)
	}
	if _, err := e.Adapt(ctx, []adaptive.Move{move}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAuto, Persist: true}); err != nil {
		t.Fatal(err)
	}
	if d := e.Deviations(); len(d) != 0 {
		t.Errorf("deviations kept after set_mode auto: %+v", d)
	}
	if _, err := e.Adapt(ctx, []adaptive.Move{move}); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("move in auto mode: %v, want ErrInvalid", err)
	}
	after := readTree(t, root)
	for k, v := range before {
		if strings.HasPrefix(k, "proc/") && after[k] != v {
			t.Errorf("%s changed: %q -> %q", k, v, after[k])
		}
	}
}

func TestAdaptRollsBackOnFailure(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	w := &failingWriter{Writer: NewFSWriter(root), fail: plan.KindIRQAffinity}
	e := NewEngine(root, WithWriter(w))
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAdaptive}); err != nil {
		t.Fatal(err)
	}
	w.on = true
	res, err := e.Adapt(ctx, []adaptive.Move{{Device: "eth0", Queue: "rx-2", Kind: adaptive.UnitNAPI, From: 2, To: 3, Home: 2, Reason: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) == 0 {
		t.Fatalf("no failure reported: %+v", res)
	}
	if d := e.Deviations(); len(d) != 0 {
		t.Errorf("deviation kept after a failed apply: %+v", d)
	}
	qs, err := e.Queues(ctx, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if got := qs[0].Rx[2].NAPI.CPUs; got != "2" {
		t.Errorf("rx-2 thread on %s after the rollback, want 2", got)
	}
	st, _ := e.Status(ctx)
	if len(st.Adaptive.Moves) != 1 || st.Adaptive.Moves[0].Error == "" {
		t.Errorf("failed move not recorded: %+v", st.Adaptive.Moves)
	}
}

func TestAdaptiveSampleOnFixture(t *testing.T) {
	ctx := context.Background()
	e, root := adaptiveEngine(t)
	testenv.WriteTree(t, root, map[string]string{
		"proc/stat":     "cpu0 1 0 1 5 0 0 2 0\ncpu1 1 0 1 5 0 0 2 0\ncpu2 1 0 1 5 0 0 2 0\ncpu3 1 0 1 5 0 0 2 0\n",
		"proc/softirqs": "  CPU0 CPU1 CPU2 CPU3\n NET_RX: 1 2 3 4\n",
	})
	quick, err := e.AdaptiveSample(ctx, false)
	if err != nil || len(quick.CPUs) != 4 || quick.Units != nil || quick.CPUs[0].Processed == 0 {
		t.Fatalf("quick sample %+v, %v", quick, err)
	}
	full, err := e.AdaptiveSample(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Units) != 5 || full.CPUs[3].NetRX != 4 || full.CPUs[1].Total != 9 {
		t.Errorf("full sample %+v", full)
	}
	for _, u := range full.Units {
		if u.Unit.Kind == adaptive.UnitNAPI && (!u.HasTicks || u.Unit.PID == 0) {
			t.Errorf("unit %+v: no thread time", u)
		}
	}
}

// failingWriter refuses every write to a knob path holding "smp_affinity"
// while on, as a kernel refusing an IRQ placement would (EIO).
type failingWriter struct {
	Writer
	fail plan.ActionKind
	on   bool
}

func (w *failingWriter) WriteKnob(rel, value string) error {
	if w.on && w.fail == plan.KindIRQAffinity && strings.Contains(rel, "smp_affinity") {
		return errors.New("input/output error")
	}
	return w.Writer.WriteKnob(rel, value)
}

// readTree reads every regular file below root, by relative path.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The engine resolves the section at each apply in adaptive mode; status
// shows the effective options with their sources and the bad values in
// config_errors.
func TestAdaptiveConfigInStatus(t *testing.T) {
	ctx := context.Background()
	e, root := adaptiveEngine(t)
	conf := filepath.Join(root, "etc/config/packet_steering")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, "\nconfig adaptive 'adaptive'\n\toption interval '500ms'\n\toption max_moves 'many'\n"...)
	if err := os.WriteFile(conf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := e.AdaptiveSettings().Config.Interval; got != 2*time.Second {
		t.Errorf("before the reload: interval %v, want the default", got)
	}
	st, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Until the reload applies it, status shows what the loop runs with.
	if !hasOption(st.Adaptive.Config, "interval", "2s", plan.SourceDefault) {
		t.Errorf("status options before the reload %+v", st.Adaptive.Config)
	}
	if _, err := e.Apply(ctx, ApplyRequest{Reason: "reload"}); err != nil {
		t.Fatal(err)
	}
	got := e.AdaptiveSettings()
	if got.Config.Interval != 500*time.Millisecond || got.Config.MaxMoves != 1 || len(got.Problems) != 1 {
		t.Errorf("after the reload: %+v", got)
	}
	st, err = e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !hasOption(st.Adaptive.Config, "interval", "500ms", plan.SourcePacketSteering) || !hasOption(st.Adaptive.Config, "max_moves", "1", plan.SourceDefault) {
		t.Errorf("status options %+v", st.Adaptive.Config)
	}
	if len(st.ConfigErrors) != 1 || st.ConfigErrors[0].Path != "etc/config/packet_steering" ||
		!strings.Contains(st.ConfigErrors[0].Error, `packet_steering.adaptive.max_moves: "many" is not a whole number`) {
		t.Errorf("config errors %+v", st.ConfigErrors)
	}
	// The rest of the config still applies: the mode is adaptive.
	if st.Mode != plan.ModeAdaptive || !st.InSync {
		t.Errorf("mode %s in sync %v", st.Mode, st.InSync)
	}
}

func hasOption(opts []adaptive.Option, name, value, source string) bool {
	for _, o := range opts {
		if o.Name == name {
			return o.Value == value && o.Source == source
		}
	}
	return false
}

// A full sample carries each unit's qstats rx packets where the read has
// them (here added to eth0's queues: a fixture root has no netlink), and
// none elsewhere.
func TestAdaptiveSampleQstats(t *testing.T) {
	ctx := context.Background()
	_, root := adaptiveEngine(t)
	testenv.WriteTree(t, root, map[string]string{
		"proc/stat":     "cpu0 1 0 1 5 0 0 2 0\ncpu1 1 0 1 5 0 0 2 0\ncpu2 1 0 1 5 0 0 2 0\ncpu3 1 0 1 5 0 0 2 0\n",
		"proc/softirqs": "  CPU0 CPU1 CPU2 CPU3\n NET_RX: 1 2 3 4\n",
	})
	read := func(ctx context.Context, r string) (*platform.Snapshot, error) {
		s, err := platform.Read(ctx, r)
		if err != nil {
			return nil, err
		}
		if d := s.Device("eth0"); d != nil {
			for i := range d.RxQueues {
				d.RxQueues[i].Stats = &platform.QueueStats{Packets: uint64(1000 * (i + 1)), HWDrops: -1}
			}
		}
		return s, nil
	}
	e := NewEngine(root, WithReader(read), WithClock(func() time.Time { return time.Unix(1700000000, 0) }))
	full, err := e.AdaptiveSample(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, u := range full.Units {
		var want uint64
		if u.Unit.Device == "eth0" {
			fmt.Sscanf(u.Unit.Queue, "rx-%d", &want)
			want = 1000 * (want + 1)
			n++
		}
		if u.HasPackets != (want > 0) || u.Packets != want {
			t.Errorf("unit %s: packets %d (has %v), want %d", u.Unit.Key(), u.Packets, u.HasPackets, want)
		}
	}
	if n == 0 {
		t.Fatalf("no eth0 units in %+v", full.Units)
	}
}
