package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// runSnapQ runs one CLI invocation in-process and returns exit status,
// stdout and stderr.
func runSnapQ(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, args)
	return code, out.String(), errb.String()
}

func TestSnapshotCommand(t *testing.T) {
	root := fixturetest.Root(t, "ipq807x", nil)
	code, out, stderr := runSnapQ("snapshot", "--root", root)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got platform.Snapshot
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not a snapshot: %v\n%s", err, out)
	}
	want, err := platform.Read(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("snapshot output differs from platform.Read")
	}
	if !strings.Contains(out, "\n  \"devices\": [") {
		t.Errorf("output not indented:\n%.300s", out)
	}
	if got.Identity.Board != "netgear,rax120v1" || len(got.NAPIThreads) != 4 {
		t.Errorf("snapshot content: %+v", got.Identity)
	}
}

func TestSnapshotCommandErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"snapshot", "--bogus"}, 2, "bogus"},
		{[]string{"snapshot", "extra"}, 2, "unexpected argument"},
		{[]string{"snapshot", "--root", filepath.Join(t.TempDir(), "none")}, 2, "not an existing directory"},
		{[]string{"snapshot", "-h"}, 0, "usage: packet-steering snapshot"},
	}
	for _, c := range cases {
		code, out, stderr := runSnapQ(c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d stderr %q; want %d with %q", c.args, code, stderr, c.code, c.msg)
		}
		if c.code != 0 && out != "" {
			t.Errorf("%v: output on error: %q", c.args, out)
		}
	}
}

// TestSnapshotOwnRoot reads this machine: the command must succeed and the
// snapshot must show the CPUs and at least lo.
func TestSnapshotOwnRoot(t *testing.T) {
	code, out, stderr := runSnapQ("snapshot")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s platform.Snapshot
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.CPUs) == 0 || s.Root != "/" {
		t.Errorf("own root: %d CPUs, root %q", len(s.CPUs), s.Root)
	}
	found := false
	for _, d := range s.Devices {
		found = found || (d.Name == "lo" && d.Kind == platform.KindVirtual && len(d.RxQueues) > 0)
	}
	if !found {
		t.Errorf("no lo in %+v", s.Devices)
	}
}

// On every fixture preset, the --json output of `snapshot` reads back to
// the same snapshot with `plan --snapshot`'s reader (AttrsFromJSON +
// AttrsToValue) and with encoding/json, and `plan --snapshot` gives the
// plan that `plan --root` gives.
func TestSnapshotJSONRoundTrip(t *testing.T) {
	for _, name := range fixture.PresetNames() {
		t.Run(name, func(t *testing.T) {
			root := fixturetest.Root(t, name, nil)
			want, err := platform.Read(context.Background(), root)
			if err != nil {
				t.Fatal(err)
			}
			code, out, stderr := runSnapQ("snapshot", "--root", root)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var std platform.Snapshot
			if err := json.Unmarshal([]byte(out), &std); err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			if !reflect.DeepEqual(&std, want) {
				t.Errorf("encoding/json reads back a different snapshot")
			}
			stdText, err := json.MarshalIndent(want, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if out != string(stdText)+"\n" {
				t.Errorf("output differs from encoding/json's\n got %.400s\nwant %.400s", out, stdText)
			}
			file := filepath.Join(t.TempDir(), "snap.json")
			if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readSnapshotFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if d := testenv.Diff(want, got); d != "" {
				t.Errorf("plan --snapshot reads back a different snapshot (-want +got):\n%s", d)
			}
			_, fromFile, e1 := runSnapQ("plan", "--snapshot", file, "--json")
			_, fromRoot, e2 := runSnapQ("plan", "--root", root, "--json")
			if fromFile != fromRoot || e1 != "" || e2 != "" {
				t.Errorf("plan from the snapshot file differs from plan --root\n%s%s", e1, e2)
			}
			var plan plan.Plan
			if err := json.Unmarshal([]byte(fromRoot), &plan); err != nil {
				t.Fatalf("plan --json: encoding/json: %v", err)
			}
			planText, err := json.MarshalIndent(&plan, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if fromRoot != string(planText)+"\n" {
				t.Errorf("plan --json differs from encoding/json's\n got %.400s\nwant %.400s", fromRoot, planText)
			}
		})
	}
}
