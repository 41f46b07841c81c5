package main

import (
	"bytes"
	"context"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"os/exec"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
)

func TestTuneRefusesWithoutTarget(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no target", []string{"tune"}, "--target HOST is required"},
		{"loopback target", []string{"tune", "--target", "127.0.0.1"}, "loopback"},
		{"multicast target", []string{"tune", "--target", "239.1.1.1"}, "more than one host"},
		{"bad runs", []string{"tune", "--target", "198.18.0.1", "--runs", "0"}, "--runs"},
		{"bad candidates", []string{"tune", "--target", "198.18.0.1", "--candidates", "fast"}, "not a mode"},
		{"bad root", []string{"tune", "--target", "198.18.0.1", "--root", "/nonexistent"}, "not an existing directory"},
		{"unknown flag", []string{"tune", "--target", "198.18.0.1", "--nope"}, "flag provided but not defined"},
		{"bidir and reverse", []string{"tune", "--target", "198.18.0.1", "--bidir", "-R"}, "exclude each other"},
		{"loss over tcp", []string{"tune", "--target", "198.18.0.1", "--metric", "loss"}, "needs --udp"},
		{"stray argument", []string{"tune", "--target", "198.18.0.1", "extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, tt.args)
			if code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.want)
			}
		})
	}
}

func TestTuneHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, []string{"tune", "-h"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--target", "--candidates", "DEV:MASK", "max-duration", "save"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestTuneListAndDurationLimitOnFixture(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		testenv.Skipf(t, "iperf3 not installed")
	}
	root := fixturetest.Root(t, "bcm53xx", nil)
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb}
	code := run(context.Background(), env, []string{"tune", "--root", root, "--target", "198.18.0.2", "--max-configs", "13", "--list"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// The four modes, then the bcm53xx commit's table for br-lan x eth0 on 2 CPUs.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 13 || lines[0] != "1\toff" || lines[3] != "4\tauto" || lines[4] != "5\tbr-lan:0/eth0:0" {
		t.Errorf("candidates:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "13 candidates x (settle 2s + 3 runs x 10.7s) = about 7m") {
		t.Errorf("estimate not printed first:\n%s", errb.String())
	}
	// The same sweep does not fit in one minute: refused, nothing changed.
	out.Reset()
	errb.Reset()
	code = run(context.Background(), env, []string{"tune", "--root", root, "--target", "198.18.0.2", "--max-configs", "13", "--max-duration", "1m"})
	if code != 2 || !strings.Contains(errb.String(), "exceeds --max-duration") {
		t.Errorf("exit %d, stderr %s", code, errb.String())
	}
}
