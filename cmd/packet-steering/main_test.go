package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBadInputExitsTwo: every subcommand refuses bad input the same way,
// with exit status 2, a message on stderr and nothing on stdout, before
// anything below the root is read.
func TestBadInputExitsTwo(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"snapshot bad root", []string{"snapshot", "--root", "/nonexistent"}, "not an existing directory"},
		{"queues bad root", []string{"queues", "--root", "/nonexistent"}, "not an existing directory"},
		{"plan bad root", []string{"plan", "--root", "/nonexistent"}, "not an existing directory"},
		{"apply bad root", []string{"apply", "--root", "/nonexistent"}, "not an existing directory"},
		{"status bad root", []string{"status", "--root", "/nonexistent"}, "not an existing directory"},
		{"daemon bad root", []string{"daemon", "--root", "/nonexistent"}, "not an existing directory"},
		{"release bad root", []string{"release", "--root", "/nonexistent"}, "not an existing directory"},
		{"owner bad root", []string{"owner", "--root", "/nonexistent"}, "not an existing directory"},
		{"root is a file", []string{"status", "--root", "/proc/self/status"}, "not an existing directory"},
		{"unknown flag", []string{"status", "--nope"}, "flag provided but not defined"},
		{"stray argument", []string{"queues", "extra"}, "unexpected argument"},
		{"plan unknown mode", []string{"plan", "--mode", "turbo"}, "unknown mode"},
		{"plan root and snapshot", []string{"plan", "--root", "/", "--snapshot", "x.json"}, "not both"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
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
			if out.Len() != 0 {
				t.Errorf("stdout not empty: %q", out.String())
			}
		})
	}
}
