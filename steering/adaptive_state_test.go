package steering

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/plan"
)

// moveRx1 moves eth0/rx-1 (NAPI, auto on CPU 1) to CPU 0 on an
// adaptiveEngine.
func moveRx1(t *testing.T, e *Engine) {
	t.Helper()
	_, err := e.Adapt(context.Background(), []adaptive.Move{{Device: "eth0", Queue: "rx-1", Kind: adaptive.UnitNAPI, From: 1, To: 0, Home: 1, Reason: "cpu1 saturated (time_squeeze 50/s)"}})
	if err != nil {
		t.Fatal(err)
	}
}

func statePath(root string) string { return filepath.Join(root, "var/run", adaptive.StateFile) }

// A new engine on the same root (the daemon restarted, or a one-shot
// command) knows the deviations and moves: its plan keeps the moved queue
// where it is, so status is in sync and an apply changes nothing. Without
// the file the same engine would see the queue out of place.
func TestAdaptiveStateSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	e, root := adaptiveEngine(t)
	moveRx1(t, e)
	if _, err := os.Stat(statePath(root)); err != nil {
		t.Fatalf("no state file after a move: %v", err)
	}

	again := NewEngine(root)
	st, err := again.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.InSync || st.Adaptive == nil || len(st.Adaptive.Deviations) != 1 || len(st.Adaptive.Moves) != 1 || st.Adaptive.StateFile != "" {
		t.Fatalf("restarted engine: in sync %v adaptive %+v", st.InSync, st.Adaptive)
	}
	if d := st.Adaptive.Deviations[0]; d.Key() != "eth0/rx-1" || d.CPU != 0 || d.Home != 1 || !strings.Contains(d.Reason, "time_squeeze") || !d.Since.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("deviation %+v", d)
	}
	res, err := again.Apply(ctx, ApplyRequest{Reason: "start"})
	if err != nil || len(res.Changed) != 0 {
		t.Errorf("start apply after the restart changed %v (%v), want nothing", res.Changed, err)
	}
	// The dwell time is kept: the loop's controller learns the moves.
	if d := again.Deviations(); len(d) != 1 {
		t.Errorf("deviations %+v", d)
	}

	if err := os.Remove(statePath(root)); err != nil {
		t.Fatal(err)
	}
	st, err = NewEngine(root).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.InSync || len(st.Adaptive.Deviations) != 0 {
		t.Errorf("without the state file: in sync %v deviations %+v (the test would not tell)", st.InSync, st.Adaptive.Deviations)
	}
}

// Leaving adaptive forgets the state and removes the file, whether the
// mode changes through set_mode or in UCI (an apply in another mode, also
// by another process).
func TestAdaptiveStateClearedByModeChange(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"set_mode", "uci"} {
		t.Run(how, func(t *testing.T) {
			e, root := adaptiveEngine(t)
			moveRx1(t, e)
			switch how {
			case "set_mode":
				if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAuto, Persist: true}); err != nil {
					t.Fatal(err)
				}
			case "uci":
				conf := filepath.Join(root, "etc/config/packet_steering")
				b, _ := os.ReadFile(conf)
				b = []byte(strings.Replace(string(b), "'adaptive'", "'auto'", 1))
				if err := os.WriteFile(conf, b, 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := NewEngine(root).Apply(ctx, ApplyRequest{Reason: "reload"}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(statePath(root)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("state file after leaving adaptive: %v", err)
			}
			// Back to adaptive: from the auto plan.
			if _, err := NewEngine(root).SetMode(ctx, SetModeRequest{Mode: plan.ModeAdaptive, Persist: true}); err != nil {
				t.Fatal(err)
			}
			st, err := NewEngine(root).Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !st.InSync || len(st.Adaptive.Deviations) != 0 || len(st.Adaptive.Moves) != 0 {
				t.Errorf("adaptive again: in sync %v %+v", st.InSync, st.Adaptive)
			}
		})
	}
}

// A state file that cannot be used is ignored as a whole, said in status,
// and replaced at the next apply; entries that no longer fit the machine
// are dropped one by one, each with the reason.
func TestAdaptiveStateFileChecked(t *testing.T) {
	ctx := context.Background()
	good := adaptive.Deviation{Device: "eth0", Queue: "rx-1", Kind: adaptive.UnitNAPI, Home: 1, CPU: 0, Reason: "cpu1 saturated", Since: time.Unix(1700000000, 0)}
	many := make([]adaptive.Deviation, adaptive.MaxStoredDeviations+1)
	for i := range many {
		many[i] = good
	}
	jsonOf := func(devs ...adaptive.Deviation) string {
		b, err := json.Marshal(adaptive.StoredState{Deviations: devs})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	withDev := func(f func(d *adaptive.Deviation)) adaptive.Deviation {
		d := good
		f(&d)
		return d
	}
	tests := []struct {
		name, file string
		note       string   // StateFile in status: the file refused as a whole
		dropped    []string // the reasons of the dropped entries, in order
		kept       int
	}{
		{name: "corrupt", file: `{"deviations": [{"device": "eth0",`, note: "corrupt"},
		{name: "not an object", file: `[1,2]`, note: "corrupt"},
		{name: "oversized", file: `{"deviations": []}` + strings.Repeat(" ", adaptive.MaxStateSize), note: "over 65536 bytes"},
		{name: "too many", file: jsonOf(many...), note: "257 deviations, over the limit of 256"},
		{name: "empty", file: "", note: "corrupt"},
		{name: "good", file: jsonOf(good), kept: 1},
		{
			name: "entries checked",
			file: jsonOf(good,
				withDev(func(d *adaptive.Deviation) { d.Queue = "rx-9" }),
				withDev(func(d *adaptive.Deviation) { d.Queue = "rx-2"; d.CPU = 7 }),
				withDev(func(d *adaptive.Deviation) { d.Queue = "rx-3"; d.CPU = 3 }),
				withDev(func(d *adaptive.Deviation) { d.Device = "wlan0"; d.Queue = "rx-0" }),
				withDev(func(d *adaptive.Deviation) { d.Device = "../etc" }),
				withDev(func(d *adaptive.Deviation) { d.Queue = "tx-0" }),
				withDev(func(d *adaptive.Deviation) { d.Kind = "irq" }),
				withDev(func(d *adaptive.Deviation) { d.CPU = -1 }),
				withDev(func(d *adaptive.Deviation) { d.CPU = 2 }),
			),
			kept: 1,
			dropped: []string{
				`device name "../etc" is not valid`, `queue "tx-0" is not an rx queue`, `kind "irq" is not rps or napi`,
				"cpu -1 is out of range", "a second deviation of the same queue",
				"no rx queue eth0/rx-9 now", "cpu7 is not online", "cpu3 is its auto placement now",
				"the auto plan no longer puts wlan0/rx-0's napi work on one CPU",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, root := adaptiveEngine(t)
			path := statePath(root)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			e := NewEngine(root)
			st, err := e.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			a := st.Adaptive
			if tc.note == "" && a.StateFile != "" || !strings.Contains(a.StateFile, tc.note) {
				t.Errorf("state_file %q, want it to hold %q", a.StateFile, tc.note)
			}
			if len(a.Deviations) != tc.kept {
				t.Errorf("deviations %+v, want %d", a.Deviations, tc.kept)
			}
			var why []string
			for _, d := range a.Dropped {
				why = append(why, d.Why)
			}
			if len(why) != len(tc.dropped) {
				t.Fatalf("dropped %q, want %q", why, tc.dropped)
			}
			for i := range why {
				if !strings.Contains(why[i], tc.dropped[i]) {
					t.Errorf("dropped %d: %q, want %q", i, why[i], tc.dropped[i])
				}
			}
			// The next apply leaves a file that is used as it is.
			if _, err := e.Apply(ctx, ApplyRequest{Reason: "test"}); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			switch {
			case tc.kept == 0 && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("state file kept without deviations: %v %.80q", err, b)
			case tc.kept > 0:
				var f adaptive.StoredState
				if err := json.Unmarshal(b, &f); err != nil || len(f.Deviations) != tc.kept {
					t.Errorf("state file after the apply: %v %s", err, b)
				}
			}
			st, err = NewEngine(root).Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Adaptive.StateFile != "" || len(st.Adaptive.Dropped) != 0 || len(st.Adaptive.Deviations) != tc.kept || !st.InSync {
				t.Errorf("after the apply: in sync %v %+v", st.InSync, st.Adaptive)
			}
		})
	}
}
