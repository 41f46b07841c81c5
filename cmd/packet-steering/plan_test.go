package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// planRoot builds a fixture preset root for the plan command.
func planRoot(t *testing.T, preset string) string {
	t.Helper()
	root := fixturetest.Root(t, preset, nil)
	return root
}

func runPlanCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, append([]string{"plan"}, args...))
	return code, out.String(), errb.String()
}

func TestPlanCommandTable(t *testing.T) {
	root := planRoot(t, "ipq807x")
	code, out, errs := runPlanCLI("--root", root)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"mode      auto (flows 0)",
		"policy    qualcommax-ipq807x",
		"evidence  openwrt-devel report",
		"KIND", "TARGET", "CURRENT", "DESIRED", "STATE",
		"napi_affinity  pid 300 napi/eth0-257",
		"irq_affinity   irq 60 edma_rxdesc_0",
		"[swoffload-helps]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// RPS 0 already holds on a fresh fixture; the threads must change.
	var rpsLine, napiLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "rps_cpus") && strings.Contains(l, "eth0/rx-0") {
			rpsLine = l
		}
		if strings.Contains(l, "pid 300") {
			napiLine = l
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(rpsLine), "=") || !strings.HasSuffix(strings.TrimSpace(napiLine), "change") {
		t.Errorf("states: %q / %q", rpsLine, napiLine)
	}
	if !strings.Contains(out, "to change") {
		t.Errorf("no summary:\n%s", out)
	}
}

func TestPlanCommandJSON(t *testing.T) {
	root := planRoot(t, "x86-8")
	code, out, errs := runPlanCLI("--root", root, "--mode", "legacy", "--flows", "64", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("not plan JSON: %v\n%s", err, out)
	}
	if p.Mode != plan.ModeLegacy || p.Policy != "legacy" || p.Flows != 64 {
		t.Errorf("plan %s %s %d", p.Mode, p.Policy, p.Flows)
	}
	last := p.Actions[len(p.Actions)-1]
	if last.Kind != plan.KindSysctl || last.Value != "1024" { // 16 queues x 64
		t.Errorf("sysctl %+v", last)
	}
	// Same as the library's plan of the same machine.
	snap, err := platform.Read(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	flows := 64
	want, err := plan.NewPlan(snap, plan.PlanRequest{Mode: plan.ModeLegacy, Flows: &flows})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	gotJSON, _ := json.Marshal(&p)
	if string(wantJSON) != string(gotJSON) {
		t.Error("CLI plan differs from steering.NewPlan")
	}
}

// `plan --snapshot FILE` on another machine gives the plan the router gets.
func TestPlanCommandSnapshotFile(t *testing.T) {
	root := planRoot(t, "mt7621")
	snap, err := platform.Read(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "snap.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	c1, fromRoot, e1 := runPlanCLI("--root", root, "--json")
	c2, fromFile, e2 := runPlanCLI("--snapshot", file, "--json")
	if c1 != 0 || c2 != 0 {
		t.Fatalf("exit %d %d: %s %s", c1, c2, e1, e2)
	}
	if fromRoot != fromFile {
		t.Errorf("plans differ:\n%s\n---\n%s", fromRoot, fromFile)
	}
}

func TestPlanCommandErrors(t *testing.T) {
	root := planRoot(t, "bcm53xx")
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--root", root, "--mode", "fast"}, 2, "accepted: off, legacy, all, auto, custom"},
		{[]string{"--root", root, "--flows", "-1"}, 2, "accepted: 0 to 65536"},
		{[]string{"--root", root, "--flows", "70000"}, 2, "accepted: 0 to 65536"},
		{[]string{"--root", root, "--flows", "lots"}, 2, "not a whole number"},
		{[]string{"--root", root, "--snapshot", bad}, 2, "not both"},
		{[]string{"--root", root, "extra"}, 2, "unexpected argument"},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
		{[]string{"--snapshot", bad}, 1, "not a snapshot file"},
		{[]string{"--snapshot", filepath.Join(t.TempDir(), "missing.json")}, 1, "read snapshot"},
	}
	for _, tt := range tests {
		code, out, errs := runPlanCLI(tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.msg) {
			t.Errorf("plan %v: exit %d, stderr %q; want exit %d and %q", tt.args, code, errs, tt.code, tt.msg)
		}
		if out != "" {
			t.Errorf("plan %v wrote to stdout on error: %q", tt.args, out)
		}
	}
	if code, _, _ := runPlanCLI("-h"); code != 0 {
		t.Errorf("-h exit %d", code)
	}
}

func TestPlanCommandNothing(t *testing.T) {
	root := planRoot(t, "bcm47081")
	code, out, _ := runPlanCLI("--root", root)
	if code != 0 || !strings.Contains(out, "nothing to manage") || !strings.Contains(out, "single-cpu") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
