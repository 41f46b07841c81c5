package steering

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

func TestResolveServer(t *testing.T) {
	cpus := func(n int) []platform.CPU {
		out := make([]platform.CPU, 4)
		for i := range out {
			out[i] = platform.CPU{ID: i, Online: i < n}
		}
		return out
	}
	tests := []struct {
		name    string
		online  int
		steer   *platform.SteeringConfig
		want    Server
		problem bool
	}{
		{"no config, 1 CPU", 1, nil, ServerRPCD, false},
		{"no config, 2 CPUs", 2, nil, ServerDaemon, false},
		{"unset, 4 CPUs", 4, &platform.SteeringConfig{}, ServerDaemon, false},
		{"auto, 1 CPU", 1, &platform.SteeringConfig{Daemon: "auto"}, ServerRPCD, false},
		{"forced daemon, 1 CPU", 1, &platform.SteeringConfig{Daemon: "1"}, ServerDaemon, false},
		{"forced plugin, 4 CPUs", 4, &platform.SteeringConfig{Daemon: "0"}, ServerRPCD, false},
		{"spaces", 4, &platform.SteeringConfig{Daemon: " 0 "}, ServerRPCD, false},
		{"unknown value is auto", 4, &platform.SteeringConfig{Daemon: "yes"}, ServerDaemon, true},
		{"unknown value, 1 CPU", 1, &platform.SteeringConfig{Daemon: "true"}, ServerRPCD, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &platform.Snapshot{CPUs: cpus(tt.online), Config: platform.Config{Steering: tt.steer}}
			c := ResolveServer(snap)
			if c.Server != tt.want || (c.Problem != "") != tt.problem || c.CPUs != tt.online {
				t.Errorf("ResolveServer = %+v, want %s (problem %v)", c, tt.want, tt.problem)
			}
		})
	}
}

// The state file carries the live settings and the last apply from one
// engine to the next; a malformed or missing file is an empty state.
func TestStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "state")
	e := &Engine{stateFile: path}
	when := time.Unix(1700000000, 123456789)
	e.live = &plan.Settings{Mode: plan.ModeOff, Flows: 64, Source: plan.SourceLive}
	e.lastApply = &ApplyRecord{Time: when, Reason: "set_mode off\nsecond line", Changed: 3, Failed: 1, DurationUS: 812}
	if err := e.saveStateLocked(); err != nil {
		t.Fatal(err)
	}
	next := &Engine{stateFile: path}
	next.loadStateLocked()
	if next.live == nil || *next.live != *e.live {
		t.Errorf("live = %+v, want %+v", next.live, e.live)
	}
	if r := next.lastApply; r == nil || !r.Time.Equal(when) || r.Reason != e.lastApply.Reason ||
		r.Changed != 3 || r.Failed != 1 || r.DurationUS != 812 {
		t.Errorf("last apply = %+v, want %+v", r, e.lastApply)
	}
	e.live = nil
	if err := e.saveStateLocked(); err != nil {
		t.Fatal(err)
	}
	next.loadStateLocked()
	if next.live != nil || next.lastApply == nil {
		t.Errorf("after persist: live %+v, last apply %+v", next.live, next.lastApply)
	}
	for _, bad := range []string{"", "off\n64", strings.Repeat("x\n", 3000), "turbo\n1\nnot-a-time\n\n\n\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		next.loadStateLocked()
		if next.live != nil || next.lastApply != nil {
			t.Errorf("state from %.20q: live %+v, last apply %+v", bad, next.live, next.lastApply)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	next.loadStateLocked()
	if next.live != nil || next.lastApply != nil {
		t.Error("state without a file is not empty")
	}
}
